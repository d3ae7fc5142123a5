"""The native ratchet (py/zerocalc/memory/fragmentation.py reserved_after) against replays of five step shapes
under an Alpaca-like tail (tests/data/fragmentation_shapes.json, scripts/fragmentation.py --shapes: full and
LoRA, with and without checkpointing, h 1024 and 4096; b 2 or 4, seq_len 1305, 8 seeds, 1000 steps, no device
limit). Each replayed point gives the schedule's longest batch, its record count and the summed x of the records
before the longest, each seed its mean batch's x, so the rule is held on what each run drew."""
from __future__ import annotations

import json
import pathlib
import statistics

import pytest

from zerocalc.memory import fragmentation as F

SHAPES = json.loads((pathlib.Path(__file__).parent / "data" / "fragmentation_shapes.json").read_text())
SEQ = SHAPES["seq_len"]
MIB = 2**20


def name(row) -> str:
    s = row["shape"]
    return f"h{s['hidden']} L{s['layers']} {s['method']} ac={s['checkpointing']}"


def terms(row):
    alloc = row["step_peak_at_seq_len"]
    return alloc, alloc - row["step_peak_at_0"], row["logits"], row["cache"]


def per_logits_byte(row, n: str) -> list[float]:
    """(replayed reserved - the longest step's tensors and steady cache) / (logits x the earlier records' x)."""
    alloc, transient, logits, cache = terms(row)
    out = []
    for r in row["runs"]:
        p = r["after"][n]
        if p["earlier"] > 0:
            x = p["longest"] / SEQ
            out.append((p["reserved"] - F.allocated_peak(alloc, transient, x) - cache * x) / (logits * p["earlier"]))
    return out


def test_the_fixture_has_every_shape_and_its_logits_are_12_bytes_per_token_and_vocab_entry():
    assert len(SHAPES["rows"]) == 5 and all(len(r["runs"]) == 8 for r in SHAPES["rows"])
    for row in SHAPES["rows"]:
        # the bf16 logits, their fp32 upcast, the fp32 log-softmax gradient and its bf16 cast: 2 + 4 + 4 + 2 B
        assert row["logits"] == row["shape"]["b"] * SEQ * 32000 * 12, name(row)
        assert all(0 < r["mean"] < 1 for r in row["runs"])


def test_the_growth_per_logits_byte_falls_where_the_activations_outweigh_the_logits():
    """Medians over the seeds at 1000 steps, per logits byte of the earlier records: 0.64-0.95, the two lowest
    (0.77, 0.64) the shapes whose activations at the loss outweigh their logits (LoRA without checkpointing,
    transient / logits 1.94 and 2.61; the others 1.05-1.21): a later record's activations fill the earlier
    records' logits segments, so no constant share of the logits holds every shape within 5 %."""
    rows = sorted(SHAPES["rows"], key=lambda r: terms(r)[1] / terms(r)[2])
    med = [statistics.median(per_logits_byte(r, "1000")) for r in rows]
    assert [r["shape"]["checkpointing"] for r in rows[-2:]] == ["none", "none"]
    assert max(med[-2:]) < min(med[:-2]) and max(med) / min(med) > 1.4


def test_reserved_after_by_hand():
    # allocated 10 GiB of which transient 6 GiB (logits 2 GiB, activations 4 GiB), steady cache 1 GiB; a longest
    # batch x = 0.5 after earlier records summing 1.5, mean batch 0.25:
    #   the longest step: 10 - 6 * 0.5 + 1 * 0.5 = 7.5 GiB
    #   kept segments: static 4 + logits 2 * (1.5 + 0.5) + max(4 * 0.25, 1 * 0.5) = 4 + 4 + 1 = 9 GiB
    g = 2**30
    assert F.reserved_after(10 * g, 6 * g, 2 * g, g, 0.5, 3, 1.5, "native", typical=0.25) == 9 * g
    # one record only (nothing earlier): the longest step, 7.5 GiB
    assert F.reserved_after(10 * g, 6 * g, 2 * g, g, 0.5, 1, 0.0, "native", typical=0.25) == int(7.5 * g)
    # few records: 0.2 earlier: 4 + 2 * 0.7 + 1 = 6.4 < 7.5, the longest step wins
    assert F.reserved_after(10 * g, 6 * g, 2 * g, g, 0.5, 2, 0.2, "native", typical=0.25) == int(7.5 * g)


@pytest.mark.parametrize("row", SHAPES["rows"], ids=name)
def test_the_rule_is_within_5_percent_of_each_shapes_median_replay(row):
    """Median over the 8 seeds of rule / replay - 1 at 10, 100 and 1000 steps: -4.9 % to +4.5 % (h 4096 LoRA
    without checkpointing at 1000 steps lowest, h 1024 full at 10 steps highest). The record-sum form before
    (0.87 x the earlier records' logits) was -4.5 % to +9.7 % (+5.9 % at 10 steps)."""
    alloc, transient, logits, cache = terms(row)
    for n in ("10", "100", "1000"):
        errs = []
        for r in row["runs"]:
            p = r["after"][n]
            got = F.reserved_after(alloc, transient, logits, cache, p["longest"] / SEQ, p["records"],
                                   p["earlier"], "native", typical=r["mean"])
            errs.append(got / p["reserved"] - 1)
        assert abs(statistics.median(errs)) <= 0.05, (n, statistics.median(errs))
