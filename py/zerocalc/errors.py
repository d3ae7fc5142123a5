"""The engine's one input error: a bad value in a plan, named by its dotted key (``lora.rank``,
``model.hidden_size``). Raised by the plan parser and by the model builder; shells print it in one line."""
from __future__ import annotations


class PlanError(ValueError):
    """A bad value in a plan. ``key`` is the dotted plan key (``lora.rank``)."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message
