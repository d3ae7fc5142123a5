"""TRL's KTOTrainer for the post-training tracer (tools/memtrace/post.py): the trainer, its collated batch and
the log of the step's decoder forwards (docs/tracer.md §11).

`trl.KTOTrainer(model, ref_model, args=KTOConfig(...), train_dataset, processing_class, peft_config)` with the
default loss_type "kto", which estimates the KL term (`calculate_KL`: B > 1, sequential sampling); the batch is
`DataCollatorForUnpairedPreference`'s shape (trl/trainer/kto_trainer.py `torch_call`): B rows and B mismatched
`KL_` rows, the labels alternating desirable / undesirable. `_compute_loss` runs the policy's KL forward under
no_grad, the trained forward of the B rows, then the reference's KL and matched forwards under no_grad (the
`score` window, nested in `step`); `forwards` in the fixture lists each decoder forward of the step.
TRL 0.x (traced at 0.16.1, 0.17.0, 0.18.2, 0.19.1 with tools/memtrace/trl0.py's shims): the tokenized
`completion_*` / `KL_completion_*` columns and a list of labels, the reference's pass (`self.forward(self.ref_model,
batch)`, or `null_ref_context()` with PEFT) the `score` window (`score_window0`).
"""
from __future__ import annotations

import contextlib

import torch


def _is_trl0() -> bool:
    import trl  # noqa: PLC0415
    return trl.__version__.startswith("0.")


def build_kto(args_fn, model, ref, tok, pc, p: int, c: int):
    """KTOTrainer on a 4-example data set; 0.x's KTOConfig also takes max_prompt_length / max_completion_length."""
    from datasets import Dataset  # noqa: PLC0415
    from trl import KTOConfig, KTOTrainer  # noqa: PLC0415
    ds = Dataset.from_dict({"prompt": ["w2 w3"] * 4, "completion": ["w4"] * 4, "label": [True, False] * 2})
    extra = {"max_prompt_length": p, "max_completion_length": c} if _is_trl0() else {}
    return KTOTrainer(model=model, ref_model=ref, args=args_fn(KTOConfig, extra), train_dataset=ds,
                      processing_class=tok, peft_config=pc)


def kto_batch(b: int, p: int, c: int, dpo_batch) -> dict:
    """DataCollatorForUnpairedPreference's output: B rows of (prompt + completion) and B `KL_` rows (the
    completions cycled by one within the batch), right-padded to one length (all tokens real here,
    s = prompt_len + completion_len), and the B labels. TRL 0.x (`DPODataCollatorWithPadding` over the
    tokenized `completion_*` / `KL_completion_*` columns, kto_trainer.py v0.19.1): input ids, attention masks and
    labels (-100 over the prompt) of the prompt + completion rows, the labels a list of bools."""
    s = p + c
    if _is_trl0():
        lab = torch.zeros(b, s, dtype=torch.long)
        out = {}
        for pre in ("completion_", "KL_completion_"):
            out.update({pre + "input_ids": torch.zeros(b, s, dtype=torch.long),
                        pre + "attention_mask": torch.ones(b, s, dtype=torch.long), pre + "labels": lab.clone()})
        return {**out, "label": [i % 2 == 0 for i in range(b)]}
    kl = {"KL_" + k: v for k, v in dpo_batch(b, s).items()}
    return {**dpo_batch(b, s), **kl, "label": torch.tensor([i % 2 == 0 for i in range(b)])}


@contextlib.contextmanager
def score_window0(tr, trainer):
    """TRL 0.x: the reference's pass in `get_batch_loss_metrics` (`self.forward(self.ref_model, batch)`, or
    `self.forward(self.model, batch)` inside `null_ref_context()` with PEFT) as the `score` window, nested in
    the step: the reference model's forward or the adapter-disabled context."""
    undo = []
    if trainer.ref_model is not None:
        ref, fwd = trainer.ref_model, trainer.ref_model.forward

        def ref_forward(*a, **k):
            with tr.window("score", replay_phase=tr.run_phase == "step"):
                return fwd(*a, **k)
        ref.forward = ref_forward
        undo.append(lambda: setattr(ref, "forward", fwd))
    else:
        nrc = trainer.null_ref_context

        @contextlib.contextmanager
        def null_ref_context():
            with tr.window("score", replay_phase=tr.run_phase == "step"), nrc():
                yield
        trainer.null_ref_context = null_ref_context
        undo.append(lambda: delattr(trainer, "null_ref_context"))
    try:
        yield
    finally:
        for u in undo:
            u()


def log_forwards(tr, model, ref) -> None:
    """Each decoder forward inside the step, in order: [model, grad enabled, rows, tokens] (`forwards` in the
    fixture): which model runs each pass, with or without autograd, over how many rows."""
    tr.forwards = []
    for name, m in (("policy", model), ("reference", ref)):
        dec = getattr(m, "model", None)
        if dec is None:
            continue

        def pre(mod, args, kwargs, name=name):
            ids = kwargs.get("input_ids", args[0] if args else None)
            if "step" in tr.open and ids is not None:
                tr.forwards.append([name, torch.is_grad_enabled(), *map(int, ids.shape)])
        dec.register_forward_pre_hook(pre, with_kwargs=True)
