"""TRL's KTOTrainer for the post-training tracer (tools/memtrace/post.py): the trainer, its collated batch and
the log of the step's decoder forwards (docs/tracer.md §11).

`trl.KTOTrainer(model, ref_model, args=KTOConfig(...), train_dataset, processing_class, peft_config)` with the
default loss_type "kto", which estimates the KL term (`calculate_KL`: B > 1, sequential sampling); the batch is
`DataCollatorForUnpairedPreference`'s shape (trl/trainer/kto_trainer.py `torch_call`): B rows and B mismatched
`KL_` rows, the labels alternating desirable / undesirable. `_compute_loss` runs the policy's KL forward under
no_grad, the trained forward of the B rows, then the reference's KL and matched forwards under no_grad (the
`score` window, nested in `step`); `forwards` in the fixture lists each decoder forward of the step.
"""
from __future__ import annotations

import torch


def build_kto(args_fn, model, ref, tok, pc):
    from datasets import Dataset  # noqa: PLC0415
    from trl import KTOConfig, KTOTrainer  # noqa: PLC0415
    ds = Dataset.from_dict({"prompt": ["w2 w3"] * 4, "completion": ["w4"] * 4, "label": [True, False] * 2})
    return KTOTrainer(model=model, ref_model=ref, args=args_fn(KTOConfig), train_dataset=ds, processing_class=tok,
                      peft_config=pc)


def kto_batch(b: int, s: int, dpo_batch) -> dict:
    """DataCollatorForUnpairedPreference's output: B rows of (prompt + completion) and B `KL_` rows (the
    completions cycled by one within the batch), right-padded to one length (all tokens real here,
    s = prompt_len + completion_len), and the B labels."""
    kl = {"KL_" + k: v for k, v in dpo_batch(b, s).items()}
    return {**dpo_batch(b, s), **kl, "label": torch.tensor([i % 2 == 0 for i in range(b)])}


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
