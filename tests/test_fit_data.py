"""fit's data / allocator options for a plan of variable lengths (issue 21 item 4): pack the samples,
padding-free batches, expandable segments, each with its reserved after 1000 steps."""
from zerocalc import Plan, estimate
from zerocalc.cli import format_fit
from zerocalc.fit import fit

VAR = {"model": "llama-3.1-8b", "gpu": "a100-sxm4-80gb", "seq_len": 8192, "micro_batch_size": 2, "method": "lora",
       "activation_checkpointing": "full", "attention": "flash", "loss": "chunked",
       "data": {"lengths": "padded-longest", "mean_len": 1500, "p99_len": 7000}}


def by_label(f):
    return {o.label: o for o in f.options}


def test_variable_lengths_get_the_three_options():
    f = fit(Plan.from_dict(VAR))
    opts = by_label(f)
    pack = opts["pack the samples into rows of 8192 tokens"]
    assert pack.changes["data"]["lengths"] == "fixed"
    assert pack.changes["data"]["mean_len"] == 1500            # the rest of the data block is kept
    pf = opts["padding-free batches (TRL padding_free, flash-attention varlen)"]
    assert pf.changes["data"]["lengths"] == "padding-free"
    exp = opts["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]
    assert exp.changes["allocator"]["expandable_segments"] is True
    # packed rows: no ratchet, reserved after 1000 steps is the one step's reserved
    packed = estimate(Plan.from_dict({**VAR, "data": {**VAR["data"], "lengths": "fixed"}}))
    assert pack.reserved_after_1000_bytes == packed.per_gpu.peak_reserved
    # expandable segments are never higher than the native allocator after 1000 steps (issue 21 must-show)
    assert exp.reserved_after_1000_bytes <= f.reserved_after_1000_bytes
    assert pf.reserved_after_1000_bytes is not None and pf.fragmentation_oom_step is None


def test_fixed_lengths_get_none_of_them():
    f = fit(Plan.from_dict({k: v for k, v in VAR.items() if k != "data"}))
    assert not [o for o in f.options if "data" in o.changes or "allocator" in o.changes]
    assert "1000 st" not in format_fit(f.to_dict())


def test_no_padding_free_option_when_already_padding_free_nor_expandable_when_on():
    p = {**VAR, "data": {**VAR["data"], "lengths": "padding-free"}, "allocator": {"expandable_segments": True}}
    labels = set(by_label(fit(Plan.from_dict(p))))
    assert "pack the samples into rows of 8192 tokens" in labels
    assert not any("padding-free" in lb or "expandable" in lb for lb in labels)


def test_max_seq_len_search_clips_the_lengths():
    # the search tries sequence lengths below p99_len (7000): the samples are truncated there, no PlanError
    p = {**VAR, "micro_batch_size": 8, "loss": "standard"}
    f = fit(Plan.from_dict(p))
    assert f.max_seq_len is not None and f.max_seq_len < 8192


def test_table_shows_reserved_after_1000_steps():
    text = format_fit(fit(Plan.from_dict(VAR)).to_dict())
    assert "reserved after 1000 steps" in text.splitlines()[0]
    assert "1000 st" in text and "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in text
