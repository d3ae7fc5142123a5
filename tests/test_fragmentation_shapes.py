"""The native ratchet's growth (py/zerocalc/memory/fragmentation.py RECORD_GROWTH) against replays of five step
shapes under an Alpaca-like tail (tests/data/fragmentation_shapes.json, scripts/fragmentation.py --shapes: full
and LoRA, with and without checkpointing, h 1024 and 4096; b 2 or 4, seq_len 1305, 8 seeds, 1000 steps, no device
limit). Each replayed point gives the schedule's longest batch, its record count and the summed x of the records
before the longest, so the rule is held on what each run drew."""
from __future__ import annotations

import json
import pathlib
import statistics

from zerocalc.memory import fragmentation as F

SHAPES = json.loads((pathlib.Path(__file__).parent / "data" / "fragmentation_shapes.json").read_text())
SEQ = SHAPES["seq_len"]


def name(row) -> str:
    s = row["shape"]
    return f"h{s['hidden']} L{s['layers']} {s['method']} ac={s['checkpointing']}"


def terms(row):
    alloc = row["step_peak_at_seq_len"]
    return alloc, alloc - row["step_peak_at_0"], row["logits"], row["cache"]


def growth_ratios(row, n: str, per: str) -> list[float]:
    """(replayed reserved - the longest step's tensors and steady cache) / (bytes x the earlier records' x)."""
    alloc, transient, logits, cache = terms(row)
    out = []
    for r in row["runs"]:
        p = r["after"][n]
        if p["earlier"] > 0:
            x = p["longest"] / SEQ
            base = F.allocated_peak(alloc, transient, x) + cache * x
            out.append((p["reserved"] - base) / ((logits if per == "logits" else transient) * p["earlier"]))
    return out


def test_the_fixture_has_every_shape_and_its_logits_are_12_bytes_per_token_and_vocab_entry():
    assert len(SHAPES["rows"]) == 5 and all(len(r["runs"]) == 8 for r in SHAPES["rows"])
    for row in SHAPES["rows"]:
        # the bf16 logits, their fp32 upcast, the fp32 log-softmax gradient and its bf16 cast: 2 + 4 + 4 + 2 B
        assert row["logits"] == row["shape"]["b"] * SEQ * 32000 * 12, name(row)


def test_the_growth_is_a_share_of_the_logits_not_of_every_transient_byte():
    """Medians over the seeds at 1000 steps: per logits byte 0.64-0.95 (max / min 1.5); per transient byte
    0.24-0.90 (3.7): LoRA without checkpointing, whose layers' activations outweigh the logits, grows as little
    per logits byte as the others and much less per transient byte."""
    per_logits = [statistics.median(growth_ratios(r, "1000", "logits")) for r in SHAPES["rows"]]
    per_transient = [statistics.median(growth_ratios(r, "1000", "transient")) for r in SHAPES["rows"]]
    assert 0.6 < min(per_logits) and max(per_logits) < 1.0 and max(per_logits) / min(per_logits) < 1.6
    assert max(per_transient) / min(per_transient) > 3.0
    assert min(per_logits) < F.RECORD_GROWTH < max(per_logits)


def test_the_rule_is_within_10_percent_of_each_shapes_median_replay():
    """Median over the 8 seeds of rule / replay - 1, at 100 and 1000 steps: -4.5 % to +9.7 % (LoRA without
    checkpointing highest: +9.7 / +6.0 % at h 1024, +8.5 / +7.7 % at h 4096). The same form on every transient
    byte (0.72) was +24 % to +48 % there."""
    for row in SHAPES["rows"]:
        alloc, transient, logits, cache = terms(row)
        for n in ("100", "1000"):
            errs = []
            for r in row["runs"]:
                p = r["after"][n]
                got = F.reserved_after(alloc, transient, logits, cache, p["longest"] / SEQ, p["records"],
                                       p["earlier"], "native")
                errs.append(got / p["reserved"] - 1)
            assert abs(statistics.median(errs)) < 0.10, (name(row), n, statistics.median(errs))
