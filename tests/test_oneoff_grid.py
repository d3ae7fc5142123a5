"""The engine against the one-off grid: causal-LM types whose block is their own (memory/blocks_hrm.py ...), their
real transformers 5.24 training step traced on fake tensors (tools/memtrace/oneoff.py; the results in
tools/memtrace/golden/oneoff/, `python -m tools.memtrace.oneoff` re-traces them). Issue 20, item 3: the saved
activations and the peak within 3 %, as the family grid is held (tests/test_family_grid.py)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan, estimate

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "oneoff"
ROWS = sorted(GRID.glob("*.json"))


def test_every_type_has_its_four_rows():
    ids = {p.stem for p in ROWS}
    for fam in ("hrm_text", "dory"):
        assert {f"{fam}-full-pure-flash-s512-b2", f"{fam}-lora-mixed-flash-s1024-b2",
                f"{fam}-full-mixed-eager-s256-b2", f"{fam}-full-pure-flash-gc-s1024-b2"} <= ids, fam


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_saved_activations_and_components_within_3_percent(path):
    """The trace's saved bytes at forward end (less the loss's fp32 log-softmax, b·s·V·4 bytes, which the engine
    books under logits: memory/logits.py) against the engine's saved activations (blocks + head + autocast's weight
    copies); then every component at the peak (tools/memtrace/compare.py)."""
    row = json.loads(path.read_text())
    plan, vocab = row["plan"], row["plan"]["model"]["vocab_size"]
    t = plan["seq_len"] * plan["micro_batch_size"]
    # DoryLMHead's `logits.float() * scale` keeps the fp32 logits for the trained scale (b·s·V·4 bytes), booked
    # under logits too
    logits_kept = 2 if plan["model"]["model_type"] == "dory" and plan["method"] == "full" else 1
    traced = row["saved_activations_forward_end"] - logits_kept * 4 * t * vocab
    d = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]["detail"]
    engine = sum(d.get(k, 0) for k in ("saved_activations", "head_activations", "autocast_weight_copies"))
    assert abs(engine - traced) <= 0.03 * traced, (engine / 2**20, traced / 2**20)
    ok, table = check_fixture(row)
    assert ok, "\n" + table


def test_hrm_text_layer_by_hand():
    """memory/blocks_hrm.py on the hrm_text row's config (h 512, 4 heads of 128, I 1536, 2 layers per stack), bf16
    full training with flash attention, b 2 x s 512 = 1024 tokens; bytes per token of one layer call:
    input_layernorm (weightless) fp32 upcast 2048 + rsqrt 4, its bf16 output 1024 (read by q/k/v/gate_proj);
    FA2 q, k, v, out 4 x 1024, lse 4 x 4 = 16; sigmoid(gate) 1024; o_proj's input (the gated product) 1024;
    post_attention_layernorm 2048 + 4 and its output 1024; MLP gate, up, silu, product 4 x 2 x 1536 = 12288;
    the stack's final_norm (2048 + 4) over 2 layers = 1026: 25,626 per token = 26,241,024 bytes."""
    from tools.memtrace.oneoff import rows  # noqa: PLC0415
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == "hrm_text-full-pure-flash-s512-b2")
    plan = Plan.from_dict({k: v for k, v in row.items() if k != "id"})
    arch = model_from_config(row["model"])
    acts = activations(plan, arch, dtypes_for(plan))
    assert arch.num_layers == 8                      # H_cycles 2 x (1 L pass with grad + the H pass) x 2 layers
    assert acts.layers[1] == 26_241_024


def test_dory_layer_by_hand():
    """memory/blocks_dory.py on the dory row's config (h 512, 4 heads of 128: q 512, 2 KV heads: kv 256, I 1024),
    bf16 full training with flash attention, b 2 x s 512 = 1024 tokens; bytes per token of one layer call:
    four h-wide L2 norms (fp32 upcast 2048 + rsqrt 4 each) 8208; the input and pre-feedforward norm outputs read by
    the projections 2 x 1024; the two residual-rate differences 2 x 1024; q_norm 2048 + 16, k_norm 1024 + 8, the
    RoPE'd q times sqk² 1024, FA2 q, k, v, out 1024 + 512 + 512 + 1024 and lse 16; gate_states 1024, its sigmoid
    1024, attn_sub_norm 2048 + 4 and o_proj's input 1024; the MLP's gate and up outputs, their scaled copies and the
    activation 5 x 2048, ffn_sub_norm 4096 + 4 and down_proj's input 2048: 41,024 per token = 42,008,576 bytes; 6
    layer calls (1 input layer, 2 recurrent layers twice, 1 output layer)."""
    from tools.memtrace.oneoff import rows  # noqa: PLC0415
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == "dory-full-pure-flash-s512-b2")
    plan = Plan.from_dict({k: v for k, v in row.items() if k != "id"})
    arch = model_from_config(row["model"])
    assert 8208 + 2048 + 2048 + 2064 + 1032 + 1024 + 3072 + 16 + 2048 + 2052 + 1024 + 10240 + 4100 + 2048 == 41_024
    assert arch.num_layers == 6
    assert activations(plan, arch, dtypes_for(plan)).layers[1] == 41_024 * 1024
