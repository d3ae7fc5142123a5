"""torch.compile's saved set, read from the partitioner on CPU (tools/memtrace/compiled.py), against the engine's
compiled-block rule (memory/blocks.py, `stack.compile`)."""
import warnings

import pytest

pytestmark = [pytest.mark.tools]

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from zerocalc import Plan  # noqa: E402
from zerocalc.memory.activations import activations  # noqa: E402
from zerocalc.memory.precision import dtypes_for, module_dtypes  # noqa: E402

H, I, A, KV, S = 256, 688, 8, 64, 96          # hidden, intermediate, heads, kv width (2 heads x 32), tokens
TINY = {"name": "tiny", "model_type": "llama", "hidden_size": H, "intermediate_size": I, "num_attention_heads": A,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 1000, "tie_word_embeddings": False}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _partition(**kw):
    from tools.memtrace.compiled import layer_saved_bytes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return layer_saved_bytes(hidden=H, intermediate=I, heads=A, kv_heads=2, seq=S, **kw)


def _engine_middle_layer(method):
    d = {"model": TINY, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": method,
         "seq_len": S, "micro_batch_size": 1, "attention": "sdpa",
         "stack": {"trainer": "custom-loop", "compile": "model", "peft_adapter_dtype": "base"}}
    if method == "lora":
        d["lora"] = {"rank": 16, "alpha": 32, "dropout": 0.0, "targets": TARGETS}
    plan = Plan.from_dict(d)
    return activations(plan, plan.arch, module_dtypes(plan, dtypes_for(plan))).layers[1]


def test_partition_of_a_full_layer_by_hand():
    """min_cut_rematerialization_partition(compiler="inductor") keeps: the layer input, each norm's rsqrt and its
    normalised output (the matmuls' input), q, k, v, SDPA's output and fp32 logsumexp, o_proj's contiguous
    input, the residual, gate, up and their product (down_proj's input); silu(gate) is recomputed."""
    t = 2 * S * H                                                  # one (s, h) bf16 tensor: 49,152 B
    expected = 7 * t + 2 * 4 * S + 2 * (2 * S * KV) + 4 * A * S + 3 * (2 * S * I)
    assert expected == 768_768
    assert _partition()["bytes"] == expected


@pytest.mark.parametrize("method", ["full", "lora"])
def test_engine_compiled_layer_matches_the_partition(method):
    assert _engine_middle_layer(method) == _partition(lora_rank=16 if method == "lora" else 0)["bytes"]


def test_compiled_chunk_loss_keeps_its_input_and_two_floats_a_row():
    """torchtune's compiled `compute_cross_entropy` on one bf16 chunk of 96 rows x 1000: inductor's forward saves
    the chunk itself, the labels and two fp32 values a row (amax, log-sum-exp), 192,000 + 768 + 2 x 384 B, and
    allocates nothing chunk-sized; its backward writes the bf16 gradient (192,000 B) and one fp32 value a row."""
    from tools.memtrace.compiled import chunked_ce_compiled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = chunked_ce_compiled(rows=96, vocab=1000)
    assert sorted(b for _, _, b in r["saved"]) == [384, 384, 768, 192_000]
    assert max(b for _, _, b in r["forward_buffers"]) == 384
    assert sorted(b for _, _, b in r["backward_buffers"]) == [384, 192_000]
    assert r["grad"] == ((96, 1000), "bfloat16")


def test_engine_compiled_chunked_loss_matches_inductor():
    """The engine's compiled chunked-loss rule (memory/logits.py) at 768 tokens = 8 chunks of the 96 rows above:
    saved 8 x (192,000 + 2 x 384) = 1,542,144 B (the labels are the batch's, not logits); end of forward the same;
    start of backward one chunk's bf16 gradient more, 192,000 B."""
    from zerocalc.memory.logits import logits
    from zerocalc.memory.stack import effective_stack
    d = {"model": TINY, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
         "seq_len": 768, "micro_batch_size": 1, "attention": "sdpa", "loss": "chunked",
         "stack": {"trainer": "torchtune", "compile": "model+loss"}}
    plan = Plan.from_dict(d)
    lg = logits(plan, plan.arch, 2, effective_stack(plan))
    assert lg.saved == 8 * (192_000 + 2 * 384) == 1_542_144
    assert lg.forward_peak == lg.saved
    assert lg.backward_peak - lg.saved == 192_000


@pytest.mark.parametrize("tied", [True, False])
def test_engine_chunked_head_gradients_match_the_fake_trace(tied):
    """A trainable output projection under the compiled chunk loss, 8192 tokens x hidden 3072 x vocab 128,256 in
    bf16 (Llama 3.2 3B's head at torchtune's 2 x 4096): the traced backward peaks in the second chunk's weight-gradient
    matmul, 2 x 788,004,864 B of weight gradients less one consumed chunk gradient (262,668,288 B) beyond the end of
    forward, plus two 6 MB input-gradient chunks; the engine's loss-backward moment (logits_backward +
    head_chunk_grads over logits_forward) within 1 %."""
    from tools.memtrace.compiled import chunked_head_backward
    from zerocalc.memory.logits import chunked_head_grads, logits
    from zerocalc.memory.stack import effective_stack
    tr = chunked_head_backward(tokens=8192, hidden=3072, vocab=128256, chunks=8, tied=tied)
    traced = tr["backward_peak"] - tr["forward_end"]
    model = {**TINY, "hidden_size": 3072, "vocab_size": 128256, "tie_word_embeddings": tied}
    d = {"model": model, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
         "seq_len": 8192, "micro_batch_size": 1, "attention": "sdpa", "loss": "chunked",
         "stack": {"trainer": "torchtune", "compile": "model+loss"}}
    plan = Plan.from_dict(d)
    st = effective_stack(plan)
    lg = logits(plan, plan.arch, 2, st)
    engine = lg.backward_peak + chunked_head_grads(plan, plan.arch, 2, 2, st) - lg.forward_peak
    assert engine == 2 * 788_004_864 - 262_668_288
    assert abs(engine - traced) / traced < 0.01, (engine, traced)
