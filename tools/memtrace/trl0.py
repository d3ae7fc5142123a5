"""TRL 0.x (traced at 0.17.0, 0.18.2, 0.19.1) in the post-training tracer (tools/memtrace/post.py, docs/tracer.md
§11): what the published runs of 2025 used. Each wheel is unpacked first on the path, over .venv-trl's
transformers 5.24 (DPO's dpo_trainer.py is 0.16.0's but for the copyright line, so 0.17 stands for 0.16):

  pip install --no-deps --target .venv-trl-017 trl==0.17.0
  PYTHONPATH=.venv-trl-017:py:. .venv-trl/bin/python -m tools.memtrace.postgrid

Import shims (`import_shims`, before TRL is imported; none changes what a step allocates):
- `transformers.models.auto.modeling_auto.MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES` (gone in transformers 5; TRL
  0.17's dpo_trainer.py imports it to tell vision models apart) is aliased to the IMAGE_TEXT_TO_TEXT mapping;
- transformers 5's `_is_package_available` returns (bool, version), which TRL 0.17's import_utils keeps as its
  `_X_available` flags, so `is_mergekit_available()` is a truthy tuple and callbacks.py imports the absent
  mergekit; the flags are set to the tuple's bool.
- `model.warnings_issued` (a PreTrainedModel dict in transformers 4, gone in 5), which DPOTrainer 0.17's
  `__init__` writes a flag into, is given to the model as an empty dict (`model_shim`).
Trace shim: `flush_left` (trl/trainer/utils.py, DPO's `concatenated_forward`) reads each row's first mask
position with `.item()`, which a FakeTensor cannot answer; every mask of a traced batch is all ones, so it is
the identity on the (2·B, s) id / mask tensors, whose clones it returns (its own copies: 8 B per token).

What differs from 1.x, read in the 0.17.0 wheel:
- GRPO: the reference is `create_reference_model(model)` (a deepcopy of the policy, grpo_trainer.py
  `__init__` when beta != 0 and no PEFT; beta defaults to 0.04 up to 0.18; 0.19 `from_pretrained`), prepared with
  `accelerator.prepare_model(ref, evaluation_mode=True)`; scoring is `_get_per_token_logps(model, ids, mask,
  logits_to_keep, batch_size)`: `model(..., logits_to_keep=C + 1).logits[:, :-1]`, `/ self.temperature`,
  `selective_log_softmax` (the per-row logsumexp loop of fp32 logits); with PEFT the reference pass runs under
  `unwrap_model(model).disable_adapter()` (`_generate_and_score_completions`; 0.18 in `_compute_loss`, after
  the policy's pass: `grpo_ref_in_step`; 0.19 without batch_size).
- DPO: the batch is `DataCollatorForPreference`'s prompt / chosen / rejected ids and masks; `concatenated_forward`
  builds the 2·B rows, `selective_log_softmax(logits, labels)` over the whole rows; the reference runs after the
  policy's forward in `get_batch_loss_metrics` -> `compute_ref_log_probs` (no_grad; `null_ref_context` =
  `disable_adapter()` with PEFT), which is the `score` window here; 0.19 asks for `output_hidden_states=True`.
- KTO (tools/memtrace/post_kto.py): `get_batch_loss_metrics` -> `forward` (KL forward under no_grad, then the
  B matched rows), the reference's `forward` in the `score` window; 0.16.1 traced too (its KL logits kept).
"""
from __future__ import annotations

import contextlib

import torch


def trl_major() -> int | None:
    import importlib.metadata as md  # noqa: PLC0415
    try:
        return int(md.version("trl").split(".")[0])
    except (md.PackageNotFoundError, ValueError):
        return None


def import_shims() -> None:
    """See the module docstring; only for TRL 0.x."""
    if trl_major() != 0:
        return
    import transformers.models.auto.modeling_auto as ma  # noqa: PLC0415
    if not hasattr(ma, "MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES"):
        ma.MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES = ma.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    import trl.import_utils as iu  # noqa: PLC0415
    for k, v in list(vars(iu).items()):
        if k.startswith("_") and k.endswith("_available") and isinstance(v, tuple):
            setattr(iu, k, bool(v[0]))


def model_shim(model) -> None:
    if is_trl0() and not hasattr(model, "warnings_issued"):
        model.warnings_issued = {}


def is_trl0() -> bool:
    import trl  # noqa: PLC0415
    return trl.__version__.startswith("0.")


def build_grpo(grpo_cls, cfg_cls, args_kw, model, ref, tok, ds, pc):
    """GRPOTrainer 0.x: its reference is `create_reference_model(model)` (a deepcopy of the policy: 0.17, 0.18)
    or `AutoModelForCausalLM.from_pretrained(model_id, **model_init_kwargs)` (0.19: `model_init_kwargs` is {}
    for a model passed built, so transformers 4's default fp32); the one built on meta and fakeified by the
    tracer (the policy's class and dtype) is returned instead."""
    import types  # noqa: PLC0415
    import trl.trainer.grpo_trainer as grpo_mod  # noqa: PLC0415
    args_kw.pop("generation_batch_size", None)     # not a 0.17 GRPOConfig field (0.18+: None = B x steps)
    asked = {}

    def from_pretrained(path, **kw):
        asked.update({"from_pretrained": str(path), **{k: str(v) for k, v in kw.items()}})
        return ref

    def create_reference_model(m, *a, **k):
        asked["create_reference_model"] = "deepcopy of the policy"
        return ref
    saved = {k: getattr(grpo_mod, k) for k in ("create_reference_model", "AutoModelForCausalLM")
             if hasattr(grpo_mod, k)}
    grpo_mod.create_reference_model = create_reference_model
    grpo_mod.AutoModelForCausalLM = types.SimpleNamespace(from_pretrained=from_pretrained)
    try:
        tr = grpo_cls(model=model, reward_funcs=[lambda completions, **k: [0.0] * len(completions)],
                      args=cfg_cls(**args_kw), train_dataset=ds, processing_class=tok, peft_config=pc)
    finally:
        for k, f in saved.items():
            setattr(grpo_mod, k, f)
        if "create_reference_model" not in saved:
            del grpo_mod.create_reference_model
    tr._traced_ref_kwargs = asked
    return tr


def version() -> tuple[int, int]:
    import trl  # noqa: PLC0415
    return tuple(int(x) for x in trl.__version__.split(".")[:2])


def grpo_ref_in_step() -> bool:
    """TRL 0.18.x GRPO computes the reference log-probabilities in `_compute_loss`, after the policy's
    `_get_per_token_logps` and under no_grad (grpo_trainer.py v0.18.0 lines 1332-1345, the same at v0.18.2), not
    in `_generate_and_score_completions` as 0.17 and 0.19 do."""
    return is_trl0() and version() == (0, 18)


def grpo_score(tr, trainer, ids, am, C):
    """The reference pass of `_generate_and_score_completions`, under no_grad, as the `score` window: 0.17 in
    chunks of per_device_train_batch_size, 0.19 over the whole generation batch at once (no batch_size)."""
    bs = trainer.args.per_device_train_batch_size if version() < (0, 18) else None
    with tr.window("score"):
        if trainer.ref_model is not None:
            return trainer._get_per_token_logps(trainer.ref_model, ids, am, C, bs)
        with trainer.accelerator.unwrap_model(trainer.model).disable_adapter():
            return trainer._get_per_token_logps(trainer.model, ids, am, C, bs)


@contextlib.contextmanager
def score_window(tr, trainer, method):
    """The `score` window nested in the step: DPO's `compute_ref_log_probs`, TRL 0.18 GRPO's no-grad
    `_get_per_token_logps` in `_compute_loss`; else nothing (0.17 / 0.19 GRPO score before the step)."""
    if method in ("dpo", "kto"):
        from .post_kto import score_window0  # noqa: PLC0415
        with dpo_score_window(tr, trainer) if method == "dpo" else score_window0(tr, trainer):
            yield
        return
    if not grpo_ref_in_step():
        yield
        return
    gpl = trainer._get_per_token_logps

    def get_per_token_logps(*a, **k):
        if torch.is_grad_enabled():
            return gpl(*a, **k)
        with tr.window("score", replay_phase=tr.run_phase == "step"):
            return gpl(*a, **k)
    trainer._get_per_token_logps = get_per_token_logps
    try:
        yield
    finally:
        del trainer._get_per_token_logps


def dpo_batch(b: int, p: int, c: int) -> dict:
    """DataCollatorForPreference (0.17.0): B prompts (left-padded) and B chosen / rejected completions, all real."""
    z = lambda n: torch.zeros(b, n, dtype=torch.long)       # noqa: E731
    o = lambda n: torch.ones(b, n, dtype=torch.long)        # noqa: E731
    return {"prompt_input_ids": z(p), "prompt_attention_mask": o(p), "chosen_input_ids": z(c),
            "chosen_attention_mask": o(c), "rejected_input_ids": z(c), "rejected_attention_mask": o(c)}


@contextlib.contextmanager
def dpo_score_window(tr, trainer):
    """`compute_ref_log_probs` as the `score` window (nested in the step), and the flush_left shim."""
    import trl.trainer.dpo_trainer as dpo_mod  # noqa: PLC0415
    fl = dpo_mod.flush_left
    dpo_mod.flush_left = lambda mask, *ts: (mask.clone(), *[t.clone() for t in ts])
    crl = trainer.compute_ref_log_probs

    def compute_ref_log_probs(batch):
        with tr.window("score", replay_phase=tr.run_phase == "step"):
            return crl(batch)
    trainer.compute_ref_log_probs = compute_ref_log_probs
    try:
        yield
    finally:
        dpo_mod.flush_left = fl
        del trainer.compute_ref_log_probs
