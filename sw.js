// zerocalc's service worker (template: scripts/build_site.py fills VERSION and FILES and writes _site/sw.js).
// Offline and installable: every file of the site is precached into one cache named after the site's content
// hash, and served from it first. A new deploy has a new hash: its worker fills a new cache while the old one
// keeps serving the open tabs (never a mix of two versions); when it takes over (all tabs closed, or the page's
// "Reload" button posts "skip-waiting") it deletes every older zerocalc cache.
const VERSION = "{{version}}";
const FILES = {{files}};
const CACHE = "zerocalc-" + VERSION;
const scope = new URL(self.registration.scope);
// Opened once per start of this worker, not per request: a repeat visit asks it for ~60 files in its first second.
// Every file is served as the Response Cache Storage returns, untouched: Chromium keeps V8's code for the .wasm
// (streaming compilation from fetch() in assets/worker.js) keyed to that entry; a Response built here anew is
// written each visit and never read back (scripts/wasm_cache_probe.py, sw-synth; when V8 writes it at all: README).
let opened = null;
const cache = () => (opened ??= caches.open(CACHE));

self.addEventListener("install", (event) => {
  event.waitUntil(cache().then((c) =>
    c.addAll(FILES.map((f) => new Request(new URL(f, scope), { cache: "reload" })))));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k.startsWith("zerocalc-") && k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener("message", (event) => {
  if (event.data === "skip-waiting") self.skipWaiting();
  if (event.data === "version" && event.source) event.source.postMessage({ type: "zerocalc:sw", version: VERSION });
});

self.addEventListener("fetch", (event) => {
  const req = event.request;
  const url = new URL(req.url);
  if (req.method !== "GET" || url.origin !== scope.origin || !url.pathname.startsWith(scope.pathname)) return;
  event.respondWith((async () => {
    const c = await cache();
    // The page under any query (?embed=1, ?runtime=...) and fragment (#plan=...) is the one cached index.html.
    const page = req.mode === "navigate" && (url.pathname === scope.pathname || url.pathname === scope.pathname + "index.html");
    const hit = await c.match(page ? new URL("index.html", scope).href : url.origin + url.pathname);
    return hit || fetch(req);
  })());
});
