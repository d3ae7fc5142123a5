"""memory/runtime.py lazy_state_cache and where it applies (estimate.py _lazy_states): optimizer states that
torch.optim creates in the first step, on one GPU or DDP, for full fine-tuning only."""
from __future__ import annotations

from zerocalc import Plan, estimate
from zerocalc.estimate import _lazy_states
from zerocalc.memory.runtime import LAZY_STATE_SHARE, lazy_state_cache

MIB = 2**20
BASE = {"model": "llama-3.2-1b", "gpu": "h100-sxm-80gb", "seq_len": 1024, "micro_batch_size": 2,
        "precision": "bf16-pure", "attention": "flash", "activation_checkpointing": "none"}


def test_share_of_the_smaller_of_states_and_freed_transients():
    # 4,000 MiB of states among 1,000 MiB of freed transients: the states can displace only 1,000 MiB
    assert lazy_state_cache(4000 * MIB, 1000 * MIB) == int(LAZY_STATE_SHARE * 1000 * MIB)
    # 500 MiB of states among 3,000 MiB of transients: only 500 MiB of their blocks are taken
    assert lazy_state_cache(500 * MIB, 3000 * MIB) == int(LAZY_STATE_SHARE * 500 * MIB)
    assert lazy_state_cache(0, 3000 * MIB) == 0


def _plan(**kw):
    return Plan.from_dict({**BASE, **kw})


def test_only_full_fine_tuning_on_one_gpu_or_ddp():
    assert _lazy_states(_plan(framework="single", nodes=1, gpus_per_node=1))
    assert _lazy_states(_plan(framework="ddp", nodes=1, gpus_per_node=2))
    assert not _lazy_states(_plan(framework="deepspeed", zero_stage=2, nodes=1, gpus_per_node=2))
    assert not _lazy_states(_plan(framework="fsdp", zero_stage=3, nodes=1, gpus_per_node=2))
    assert not _lazy_states(_plan(framework="single", nodes=1, gpus_per_node=1, method="lora"))
    assert not _lazy_states(_plan(framework="single", nodes=1, gpus_per_node=1, optimizer_in_backward=True))


def test_one_gpu_full_fine_tune_reserves_the_stranded_share():
    """Llama 3.2 1B bf16 AdamW: states 2 x 2 B x P; the forward's activations and logits are freed before the step.
    Reserved is at least the allocated peak plus 0.30 of the smaller (the states' 4.9 GB here: it is the smaller)."""
    pg = estimate(_plan(framework="single", nodes=1, gpus_per_node=1)).per_gpu
    states = 4 * 1_235_814_400
    assert pg.peak_reserved - pg.peak_allocated >= int(LAZY_STATE_SHARE * min(states, pg.components["activations"]
                                                                                + pg.components["logits"]))
