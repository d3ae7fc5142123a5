"""X-MOD's language routing on FakeTensors (tools/memtrace/bert.py's xmod rows).

modeling_xmod.py XmodOutput.lang_adapter picks each language's rows with a boolean mask over lang_ids
(`hidden_states[lang_mask]`, `new_hidden_states[lang_mask] = ...`): aten.nonzero, a data-dependent shape a
FakeTensor cannot give. XmodModel.forward fills lang_ids with the default_language's index when none is passed; the
traced configs make that languages[0], so every row is language 0's. Inside balanced_routing() (routing.py PATCHES)
XmodOutput.forward runs as written with `nonzero(lang_mask)` replaced by what it returns for those lang_ids: every
row for adapter 0, none for the others (their adapters still run, on empty rows, as the real loop does).
"""
from __future__ import annotations

import torch


def _lang_adapter(self, lang_ids: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
    """modeling_xmod.py XmodOutput.lang_adapter, the boolean masks as the long indices nonzero gives."""
    if not self.ln_before_adapter:
        residual = hidden_states
    if self.adapter_layer_norm is not None:
        hidden_states = self.adapter_layer_norm(hidden_states)
    elif self.adapter_reuse_layer_norm:
        hidden_states = self.LayerNorm(hidden_states)
    if self.ln_before_adapter:
        residual = hidden_states
    new_hidden_states = torch.zeros_like(hidden_states)
    b = hidden_states.shape[0]
    for adapter_idx, lang_key in enumerate(self.adapter_modules.keys()):
        _ = lang_ids == adapter_idx                                      # the real code's mask
        rows = torch.arange(b if adapter_idx == 0 else 0, device=hidden_states.device)
        lang_hidden_states = hidden_states[rows]
        adapted_lang_hidden_states = self.adapter_modules[lang_key](lang_hidden_states)
        new_hidden_states[rows] = adapted_lang_hidden_states
    hidden_states = self.dropout(new_hidden_states)
    hidden_states += residual
    return hidden_states


def xmod_output_forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor,
                        lang_ids: torch.Tensor) -> torch.Tensor:
    """modeling_xmod.py XmodOutput.forward (dense, dropout, residual sum, lang_adapter)."""
    hidden_states = self.dense(hidden_states)
    hidden_states = self.dropout(hidden_states)
    hidden_states = hidden_states + input_tensor
    return _lang_adapter(self, lang_ids, hidden_states)
