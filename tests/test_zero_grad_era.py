"""stack.torch (plan-v1 Extension 1): torch 1.x's `zero_grad` defaults to set_to_none=False, so the HF Trainer's
`model.zero_grad()` and a loop's `optimizer.zero_grad()` zero the gradients in place and they stay allocated
through the next forward (memory/stack.py cites the sources; the traced steps are
tools/memtrace/golden/stacks/l1b-*-torch1, held within 3 % by tests/test_stack_grid.py).

Llama 3.2 1B: P = 1,235,814,400 parameters (tied embedding), bf16 gradients 2·P = 2,471,628,800 bytes.
"""
from __future__ import annotations

import pytest

from zerocalc import Plan, PlanError, estimate

P = 1_235_814_400
ONE_GPU = {"model": "llama-3.2-1b", "framework": "single", "gpus_per_node": 1, "nodes": 1, "precision": "bf16-pure",
           "gradient_accumulation_steps": 1, "micro_batch_size": 1, "seq_len": 2048, "activation_checkpointing": "none",
           "attention": "flash", "method": "full", "optimizer": "adamw"}


def _est(torch=None, **kw):
    d = {**ONE_GPU, **kw}
    if torch:
        d["stack"] = {"torch": torch, "optimizer_impl": "fused"}
    else:
        d["stack"] = {"optimizer_impl": "fused"}
    return estimate(Plan.from_dict(d)).to_dict()


def test_torch1_keeps_the_gradients_through_forward_and_the_loss():
    old, new = _est("1")["per_gpu"]["phases"], _est()["per_gpu"]["phases"]
    assert old["fwd"] - new["fwd"] == 2 * P == 2_471_628_800
    assert old["loss_bwd"] - new["loss_bwd"] == 2 * P
    assert old["step"] == new["step"]                 # the step holds the gradients either way


def test_torch1_gradients_stay_for_the_run_phases_after_zero_grad():
    # a save runs after zero_grad: torch 2 frees the gradients, torch 1 only zeroes them
    run = {"save": {}}
    old, new = _est("1", run=run)["run"]["phases"], _est(run=run)["run"]["phases"]
    assert old["save"]["peak_allocated_bytes"] - new["save"]["peak_allocated_bytes"] == 2 * P


def test_accumulation_already_keeps_them_so_torch1_adds_nothing_to_forward():
    old, new = _est("1", gradient_accumulation_steps=4)["per_gpu"]["phases"], \
        _est(gradient_accumulation_steps=4)["per_gpu"]["phases"]
    assert old["fwd"] == new["fwd"]


def test_the_default_is_torch2_and_round_trips():
    assert "torch" not in Plan.from_dict(ONE_GPU).to_dict()["stack"]
    assert Plan.from_dict({**ONE_GPU, "stack": {"torch": 1}}).to_dict()["stack"]["torch"] == "1"


@pytest.mark.parametrize("stack", [{"torch": "1", "trainer": "torchtune"}, {"torch": "1", "compile": "model"},
                                   {"torch": "1.13"}])
def test_torch1_with_torch2_only_software_is_refused_naming_the_key(stack):
    with pytest.raises(PlanError) as e:
        Plan.from_dict({**ONE_GPU, "stack": stack})
    assert e.value.key == "stack.torch"
