"""What a plan asks of the model against what transformers' class for it can run: the class flags (_supports_flash_attn,
_supports_sdpa, supports_gradient_checkpointing) read off transformers 5.24 into tests/data/class_flags.json by
tools/archgen/class_flags.py, the engine's tables (model/class_flags.py) and the warnings they raise."""
import json
import pathlib

import pytest

from zerocalc import Plan, estimate
from zerocalc.advice import warnings
from zerocalc.model.class_flags import ATTENTION_FREE, NO_CHECKPOINTING, NO_FLASH, NO_SDPA

DATA = pathlib.Path(__file__).resolve().parent / "data"
FLAGS = json.loads((DATA / "class_flags.json").read_text())
ROWS = json.loads((DATA / "architectures.json").read_text())["rows"]


def _config(model_type):
    return next(r["config"] for r in ROWS if r["id"] == f"default:{model_type}")


def _warning(plan):
    found = [w for w in warnings(estimate(Plan.from_dict(plan))) if w.id == "attention-unsupported"]
    assert len(found) <= 1
    return found[0] if found else None


def test_the_table_is_transformers_flags():
    types = FLAGS["model_types"]
    assert FLAGS["transformers"] == "5.24.0"
    assert NO_FLASH == {t for t, f in types.items() if not f["flash"]}
    assert NO_SDPA == {t for t, f in types.items() if not f["sdpa"]}


def test_every_built_model_type_has_its_flags():
    built = {r["model_type"] for r in ROWS if "class" in r}
    assert built == set(FLAGS["model_types"])
    for r in ROWS:
        if "class" in r:
            assert FLAGS["model_types"][r["model_type"]]["class"] == r["class"], r["id"]


def test_gemma3_composite_refuses_flash_its_text_model_does_not():
    # modeling_gemma3.py: Gemma3ForConditionalGeneration sets _supports_flash_attn = False ("Flash Attention drops
    # the bidirectional mask over image tokens"); Gemma3ForCausalLM (gemma3_text) keeps it
    assert FLAGS["model_types"]["gemma3"]["flash"] is False and FLAGS["model_types"]["gemma3_text"]["flash"] is True
    w = _warning({"model": _config("gemma3"), "gpu": "h100-sxm-80gb", "attention": "flash"})
    assert w is not None and w.severity == "error" and "FlashAttention" in w.message
    assert w.fix == "Use attention sdpa."
    assert _warning({"model": _config("gemma3_text"), "gpu": "h100-sxm-80gb", "attention": "flash"}) is None


def test_sdpa_on_gemma2_points_to_flash_or_eager():
    w = _warning({"model": "gemma-2-9b", "gpu": "h100-sxm-80gb", "attention": "sdpa"})
    assert w is not None and w.severity == "error" and "eager" in w.message
    assert w.fix.startswith("Use attention flash")
    assert _warning({"model": "gemma-2-9b", "gpu": "h100-sxm-80gb", "attention": "flash"}) is None
    assert _warning({"model": "gemma-2-9b", "gpu": "h100-sxm-80gb", "attention": "eager"}) is None


def test_neither_path_points_to_eager():
    # BLOOM's class has neither flag (its own ALiBi eager attention)
    assert "bloom" in NO_FLASH and "bloom" in NO_SDPA
    for attention in ("flash", "sdpa"):
        w = _warning({"model": _config("bloom"), "gpu": "h100-sxm-80gb", "attention": attention})
        assert w is not None and w.fix.startswith("Use attention eager")


@pytest.mark.parametrize("attention", ["flash", "sdpa", "eager"])
def test_llama_runs_every_attention(attention):
    assert _warning({"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "attention": attention}) is None


def test_only_transformers_model_code_follows_the_flags():
    # torchtune runs its own Gemma 2 (SDPA with its own softcapping path), an older transformers era is not read
    assert _warning({"model": "gemma-2-9b", "gpu": "h100-sxm-80gb", "attention": "sdpa",
                     "framework": "fsdp", "stack": {"trainer": "torchtune"}}) is None
    assert _warning({"model": "gemma-2-9b", "gpu": "h100-sxm-80gb", "attention": "sdpa",
                     "stack": {"transformers": "4.46"}}) is None


def test_attention_free_models_are_not_warned():
    assert ATTENTION_FREE <= NO_FLASH
    assert _warning({"model": _config("mamba"), "gpu": "h100-sxm-80gb", "attention": "flash"}) is None


def test_readme_counts_the_flags():
    import re  # noqa: PLC0415
    text = " ".join((DATA.parent.parent / "README.md").read_text().split())
    m = re.search(r"(\d+) of the (\d+) classes refuse FlashAttention .*?\) and (\d+) have no SDPA path", text)
    assert m, "README's attention-support sentence"
    types = FLAGS["model_types"]
    assert [int(g) for g in m.groups()] == [len(NO_FLASH), len(types), len(NO_SDPA)]


def test_the_checkpointing_table_is_transformers_flag():
    assert NO_CHECKPOINTING == {t for t, f in FLAGS["model_types"].items() if not f["checkpointing"]}


def test_checkpointing_a_class_without_it_is_an_error():
    # modeling_ctrl.py CTRLPreTrainedModel sets no supports_gradient_checkpointing: activation_checkpointing_enable
    # raises ValueError; without checkpointing, or under torchtune's own models, nothing is said
    plan = {"model": _config("ctrl"), "gpu": "h100-sxm-80gb", "attention": "eager", "seq_len": 256}
    found = [w for w in warnings(estimate(Plan.from_dict({**plan, "activation_checkpointing": "full"})))
             if w.id == "checkpointing-unsupported"]
    assert len(found) == 1 and found[0].severity == "error" and found[0].fix.startswith("Set activation_checkpointing none")
    assert not [w for w in warnings(estimate(Plan.from_dict({**plan, "activation_checkpointing": "none"})))
                if w.id == "checkpointing-unsupported"]
    llama = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "activation_checkpointing": "full"}
    assert not [w for w in warnings(estimate(Plan.from_dict(llama))) if w.id == "checkpointing-unsupported"]


def test_readme_counts_the_classes_without_checkpointing():
    text = " ".join((DATA.parent.parent / "README.md").read_text().split())
    import re  # noqa: PLC0415
    m = re.search(r"a checkpointed plan for one of those (\d+) classes", text)
    assert m and int(m.group(1)) == len(NO_CHECKPOINTING)


@pytest.mark.parametrize("model_type", ["blip", "git", "kosmos-2", "udop", "blt"])
def test_peft_with_checkpointing_where_the_trace_could_not_run(model_type):
    # the trace tools leave these rows out because transformers 5.24 raises (each tool's rows() says where)
    from zerocalc.model.class_flags import PEFT_CHECKPOINTING_RAISES  # noqa: PLC0415
    assert model_type in PEFT_CHECKPOINTING_RAISES
    plan = {"model": _config(model_type), "gpu": "h100-sxm-80gb", "attention": "eager", "seq_len": 256,
            "method": "lora", "lora": {"targets": ["query", "value"] if model_type in ("blip", "git") else ["q_proj"]}}
    def ids(p):
        return [w.id for w in warnings(estimate(Plan.from_dict(p)))]
    assert "checkpointing-unsupported" in ids({**plan, "activation_checkpointing": "full"})
    assert "checkpointing-unsupported" not in ids({**plan, "activation_checkpointing": "none"})
    assert "checkpointing-unsupported" not in ids({**plan, "method": "full", "activation_checkpointing": "full"})


def test_pi0_checkpointed_raises_whatever_the_method():
    # PI0's class allows checkpointing, but its action expert reads the prefix cache the checkpointed Gemma drops
    assert FLAGS["model_types"]["pi0"]["checkpointing"] is True
    plan = {"model": _config("pi0"), "gpu": "h100-sxm-80gb", "attention": "sdpa", "seq_len": 256, "method": "full"}
    def ids(p):
        return [w.id for w in warnings(estimate(Plan.from_dict(p)))]
    assert "checkpointing-unsupported" in ids({**plan, "activation_checkpointing": "full"})
    assert "checkpointing-unsupported" not in ids({**plan, "activation_checkpointing": "none"})


def test_steps_the_traces_found_failing():
    # own_attention_trace.py NO_PURE / NO_LORA, checked on real CPU tensors
    def ids(model_type, **kw):
        plan = {"model": _config(model_type), "gpu": "h100-sxm-80gb", "attention": "eager", "seq_len": 256, **kw}
        return [w.id for w in warnings(estimate(Plan.from_dict(plan)))]
    assert "precision-unsupported" in ids("xlnet", precision="bf16-pure")
    assert "precision-unsupported" not in ids("xlnet", precision="bf16-mixed")
    assert "method-unsupported" in ids("reformer", precision="bf16-mixed", method="lora",
                                       lora={"targets": ["query_key", "value"]})
    assert "method-unsupported" not in ids("reformer", precision="bf16-mixed")
