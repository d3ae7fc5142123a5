"""Rasterise assets/icon.svg into the web app manifest's PNG icons (assets/icon-192.png, assets/icon-512.png).

    python scripts/make_icons.py        # needs playwright + Chromium; run after editing icon.svg, commit the PNGs

The PNGs are committed (small), so `make site` needs no browser; tests/test_page_offline.py checks that the
manifest's icons exist with the sizes it declares."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = (192, 512)


def main() -> int:
    from playwright.sync_api import sync_playwright
    svg = (ROOT / "assets" / "icon.svg").read_text()
    with sync_playwright() as pw:
        kw = {"executable_path": "/usr/bin/chromium"} if pathlib.Path("/usr/bin/chromium").exists() else {}
        browser = pw.chromium.launch(args=["--no-sandbox"], **kw)
        for size in SIZES:
            page = browser.new_page(viewport={"width": size, "height": size})
            page.set_content(f'<html><body style="margin:0;background:transparent">'
                             f'<div style="width:{size}px;height:{size}px">{svg.replace("<svg ", f"<svg width={size} height={size} ", 1)}</div></body></html>')
            page.screenshot(path=str(ROOT / "assets" / f"icon-{size}.png"), omit_background=True,
                            clip={"x": 0, "y": 0, "width": size, "height": size})
            page.close()
        browser.close()
    print("make_icons.py: " + ", ".join(f"assets/icon-{s}.png" for s in SIZES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
