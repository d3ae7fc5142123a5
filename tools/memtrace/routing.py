"""Balanced routing for the MoE models whose expert loop reads the router's values (docs/tracer.md §1k).

FakeTensors have shapes, not values: modeling_dbrx.py DbrxExperts.forward picks the experts to run and their tokens
with `nonzero()` / `torch.where` over the top-k indices, modeling_jetmoe.py JetMoeTopKGating.forward splits the
routed rows with `expert_size.tolist()`, modeling_switch_transformers.py SwitchTransformersExperts.forward picks
its experts' rows with `nonzero()` / `torch.where` too, modeling_longcat_flash.py LongcatFlashExperts.forward loops
over `nonzero()` with `.item()` (its zero-compute experts among them: E counts them there); all fail on fake
tensors. Inside `balanced_routing()` the router still
runs as written (its linear, softmax and top-k: what it keeps for backward) but the assignment is fixed: routed
slot r = i·k + s (token i's s-th choice) goes to expert r mod E, so each expert gets ⌈t·k/E⌉ or ⌊t·k/E⌋ rows and
every token k distinct experts (k <= E): a perfectly balanced router, which is what the load-balancing loss
trains towards. The rest of each forward is the modelling file's own ops in its own order, so the saved tensors
are the real code's for that assignment (their sizes depend only on the row counts). Switch's top-1 router then
drops what its expert_capacity does: an expert's tokens past the capacity of each sequence (switch_kept).
"""
from __future__ import annotations

import contextlib

import torch

from .xmod_lang import xmod_output_forward


def _slots(t: int, k: int, e: int, j: int):
    """Expert j's routed slots (token i·k + choice s), in token order."""
    return torch.arange(j, t * k, e)


def _dbrx_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """modeling_dbrx.py DbrxExperts.forward with `expert_hit` / `torch.where(expert_mask[expert_idx])` replaced by
    the balanced assignment (every expert hit)."""
    batch_size = hidden_states.shape[0]
    hidden_states = hidden_states.reshape(-1, self.hidden_size)
    next_states = torch.zeros_like(hidden_states, dtype=hidden_states.dtype, device=hidden_states.device)
    t, k = top_k_index.shape
    split_expert_shape = (-1, self.ffn_hidden_size, self.hidden_size)
    for expert_idx in range(self.num_experts):
        slots = _slots(t, k, self.num_experts, expert_idx)
        idx, token_idx = slots % k, slots.div(k, rounding_mode="trunc")
        v1 = self.mlp.v1.view(split_expert_shape)[expert_idx]
        w1 = self.mlp.w1.view(split_expert_shape)[expert_idx]
        w2 = self.mlp.w2.view(split_expert_shape)[expert_idx]
        states = self.mlp(hidden_states[token_idx], w1, v1, w2)
        states = states.view(-1, self.hidden_size) * top_k_weights[token_idx, idx, None]
        next_states.index_add_(0, token_idx, states)
    return next_states.view(batch_size, -1, self.hidden_size)


def _jetmoe_gating_forward(self, hidden_states):
    """modeling_jetmoe.py JetMoeTopKGating.forward with the expert sizes and the expert-sorted slot order of the
    balanced assignment instead of `gates.long().sum(0).tolist()` and `top_k_experts.sort(0)`."""
    logits = self.layer(hidden_states).float()
    top_k_logits, top_k_indices = logits.topk(self.top_k, dim=1)
    top_k_gates = torch.softmax(top_k_logits, dim=1).type_as(hidden_states)
    t = top_k_gates.size(0)
    groups = [_slots(t, self.top_k, self.num_experts, j) for j in range(self.num_experts)]
    expert_size = [len(range(j, t * self.top_k, self.num_experts)) for j in range(self.num_experts)]
    index_sorted_experts = torch.cat(groups)
    batch_index = index_sorted_experts.div(self.top_k, rounding_mode="trunc")
    batch_gates = top_k_gates.flatten()[index_sorted_experts]
    return index_sorted_experts, batch_index, batch_gates, expert_size, logits


def switch_kept(s: int, e: int, capacity: int) -> list[list[int]]:
    """Each expert's kept positions in one sequence of s tokens: the balanced top-1 assignment (position p to expert
    p mod e), then SwitchTransformersTop1Router's capacity (`token_priority = cumsum(expert_index, dim=-2)` over the
    sequence, `token_priority <= expert_capacity`): an expert's first `capacity` tokens of each sequence."""
    return [list(range(j, s, e))[:capacity] for j in range(e)]


def _switch_router(router, hidden_states):
    """modeling_switch_transformers.py SwitchTransformersTop1Router.forward as written, less its
    `self.classifier = self.classifier.to(self.dtype)`, which Module._apply does by swap_tensors, refused on the
    tracer's (weakly referenced) fake parameters: a no-op on fp32 weights (full bf16-mixed), and on frozen 16-bit
    ones (LoRA) the fp32 classifier is applied as F.linear over an fp32 copy of its (E x d_model) weight, a
    temporary the real converted module does not have (E·d_model·4 bytes). A trainable 16-bit classifier (full
    bf16-pure) is not traced."""
    w = router.classifier.weight
    assert w.dtype == router.dtype or not w.requires_grad, "Switch traced with fp32 or frozen router weights only"
    router.input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(router.dtype)
    if router.training and router.jitter_noise > 0:
        hidden_states *= torch.empty_like(hidden_states).uniform_(1.0 - router.jitter_noise, 1.0 + router.jitter_noise)
    if w.dtype == router.dtype:
        router_logits = router.classifier(hidden_states)
    else:
        bias = router.classifier.bias
        router_logits = torch.nn.functional.linear(hidden_states, w.to(router.dtype),
                                                   None if bias is None else bias.to(router.dtype))
    router_probs = torch.nn.functional.softmax(router_logits, dim=-1, dtype=router.dtype).to(router.input_dtype)
    expert_index = torch.argmax(router_probs, dim=-1)
    expert_index = torch.nn.functional.one_hot(expert_index, num_classes=router.num_experts)
    token_priority = torch.cumsum(expert_index, dim=-2)
    expert_capacity_mask = token_priority <= router.expert_capacity
    expert_index = expert_index * expert_capacity_mask
    router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)
    return expert_index, router_probs, router_logits


def _switch_sparse_mlp_forward(self, hidden_states):
    """modeling_switch_transformers.py SwitchTransformersSparseMLP.forward and SwitchTransformersExperts.forward
    with `expert_hit` (`nonzero()`) and `torch.where(expert_mask[expert_idx])` replaced by the balanced top-1
    assignment under the router's expert capacity (switch_kept); the router runs as written (_switch_router)."""
    batch_size, sequence_length, hidden_dim = hidden_states.shape
    selected_experts, routing_weights, _ = _switch_router(self.router, hidden_states)
    hidden_states = hidden_states.view(-1, hidden_dim)
    routing_weights = routing_weights.view(-1, 1)
    experts = self.experts
    final_hidden_states = torch.zeros_like(hidden_states)
    kept = switch_kept(sequence_length, experts.num_experts, self.router.expert_capacity)
    for expert_idx in range(experts.num_experts):
        rows = [b * sequence_length + p for b in range(batch_size) for p in kept[expert_idx]]
        if not rows:
            continue
        top_x = torch.tensor(rows, dtype=torch.long)
        idx = torch.zeros_like(top_x)
        current_state = hidden_states[None, top_x].reshape(-1, hidden_states.shape[-1])
        current_hidden_states = experts[f"expert_{expert_idx}"](current_state) * routing_weights[top_x, idx, None]
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
    return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)


def _longcat_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """modeling_longcat_flash.py LongcatFlashExperts.forward with `expert_hit` / `torch.where(expert_mask[...])`
    replaced by the balanced assignment over the routed and the zero-compute (identity) experts: expert j of E + Z gets the
    slots r = j mod (E + Z), so a share Z / (E + Z) of the routed slots passes through an identity expert."""
    final_hidden_states = torch.zeros_like(hidden_states)
    t, k = top_k_index.shape
    for expert_idx in range(self.total_experts):
        slots = _slots(t, k, self.total_experts, expert_idx)
        if slots.numel() == 0:
            continue
        selection_idx, token_idx = slots % k, slots.div(k, rounding_mode="trunc")
        current_state = hidden_states[token_idx]
        if expert_idx >= self.num_routed_experts or self.gate_up_proj is None:
            current_hidden_states = self.identity_expert(current_state)
        else:
            gate, up = torch.nn.functional.linear(current_state, self.gate_up_proj[expert_idx]).chunk(2, dim=-1)
            current_hidden_states = self.act_fn(gate) * up
            current_hidden_states = torch.nn.functional.linear(current_hidden_states, self.down_proj[expert_idx])
        current_hidden_states = current_hidden_states * top_k_weights[token_idx, selection_idx, None]
        final_hidden_states.index_add_(0, token_idx, current_hidden_states.to(hidden_states.dtype))
    return final_hidden_states


PATCHES = (("transformers.models.dbrx.modeling_dbrx", "DbrxExperts", _dbrx_experts_forward),
           ("transformers.models.longcat_flash.modeling_longcat_flash", "LongcatFlashExperts",
            _longcat_experts_forward),
           ("transformers.models.jetmoe.modeling_jetmoe", "JetMoeTopKGating", _jetmoe_gating_forward),
           ("transformers.models.switch_transformers.modeling_switch_transformers", "SwitchTransformersSparseMLP",
            _switch_sparse_mlp_forward),
           ("transformers.models.xmod.modeling_xmod", "XmodOutput", xmod_output_forward))


@contextlib.contextmanager
def balanced_routing():
    import importlib  # noqa: PLC0415
    undo = []
    for mod_name, cls_name, fwd in PATCHES:
        try:
            cls = getattr(importlib.import_module(mod_name), cls_name)
        except (ImportError, AttributeError):     # an older transformers without the model
            continue
        undo.append((cls, cls.forward))
        cls.forward = fwd
    try:
        yield
    finally:
        for cls, fwd in undo:
            cls.forward = fwd
