"""Post-training (contract plan-v1, Extension 7): preference methods (DPO and its family), reward models, PPO,
GRPO / RLOO, as TRL, OpenRLHF, verl, LLaMA-Factory and ms-swift run them.

- defaults.py: each trainer's defaults resolved once (rows, lengths, reference, dtypes, generator);
- step.py: the update step (the SFT step's terms on the method's rows, the trainer's log-prob buffers, the
  reference, reward and critic models, a vLLM that does not sleep);
- phases.py: the run's ``generate``, ``sync`` and ``score`` phases;
- logprobs.py, models.py, generator.py: the terms, each citing the code it models.
A plan without ``post_training`` passes through unchanged (``resolve`` is None).
"""
from __future__ import annotations

from .defaults import Post, resolve
from .phases import post_phases
from .step import post_step_terms, update_inputs, update_plan

__all__ = ["Post", "resolve", "post_phases", "post_step_terms", "update_inputs", "update_plan"]
