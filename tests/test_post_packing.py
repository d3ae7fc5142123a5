"""verl's remove-padding and dynamic batch sizes (``post_training.packing``), read in verl's source at v0.4.1,
v0.5.0, v0.6.0, v0.7.0 (dp_actor.py `_forward_micro_batch` / `update_policy` / `compute_log_prob`,
utils/seqlen_balancing.py `rearrange_micro_batches`, flash-attn's triton cross_entropy), each against arithmetic
written here (no figure copied from the code under test)."""
from __future__ import annotations

import pytest

from zerocalc.plan import Plan, PlanError

# Qwen2.5-7B: vocabulary 152,064, hidden 3,584, 28 layers, intermediate 18,944
V, H = 152_064, 3_584


def verl_plan(packing=None, micro=4, accumulation=8, prompt=1024, completion=1024, **kw) -> Plan:
    pt = {"method": "grpo", "trainer": "verl", "num_generations": 8, "prompt_len": prompt,
          "completion_len": completion}
    if packing is not None:
        pt["packing"] = packing
    d = {"model": "qwen2.5-7b", "gpu": "h100-sxm-80gb", "gpus_per_node": 8, "framework": "fsdp", "zero_stage": 3,
         "micro_batch_size": micro, "gradient_accumulation_steps": accumulation, "seq_len": prompt + completion,
         "activation_checkpointing": "full", "method": "full", "precision": "bf16-mixed", "post_training": pt}
    d.update(kw)
    return Plan.from_dict(d)


def step(p: Plan) -> dict:
    from zerocalc.estimate import step_inputs_for, step_terms
    return {t.name: t for t in step_terms(p, step_inputs_for(p))[2]}


def score(p: Plan):
    from zerocalc.estimate import step_inputs_for, whole_run
    from zerocalc.post import post_phases, resolve
    return dict(post_phases(whole_run(p, step_inputs_for(p), p.gpu_spec)[1], resolve(p)))["score"]


def test_absent_packing_is_today():
    from zerocalc.post import resolve
    p = verl_plan()
    post = resolve(p)
    assert (post.rows, post.length, post.packed, post.score_rows, post.score_length) == (4, 2048, False, 0, 0)
    assert "packing" not in p.to_dict()["post_training"]          # plans from before the key read the same


def test_remove_padding_packs_the_micro_batch_into_one_row():
    # unpad_input -> (1, total_nnz); worst case every token real: 4 rows x (1024 + 1024) = 8,192 tokens in one row,
    # the logits over all of them (logits_rmpad, prompt included): 2 B (bf16 autocast) x 8,192 x 152,064
    from zerocalc.post import resolve
    post = resolve(verl_plan({"remove_padding": True}))
    assert (post.rows, post.length, post.logit_positions) == (1, 8192, 8192)
    t = step(verl_plan({"remove_padding": True}))
    n = 8192 * V
    assert t["logits_forward"].nbytes == 2 * n == 2_491_416_576
    # flash-attn cross_entropy_loss(inplace_backward=True): the gradient written into the saved logits, no second
    # tensor; the padded path (the same 4 x 2,048 positions) counts its gradient beside them: 2 x 2n
    assert t["logits_backward"].nbytes == 2 * n
    padded = step(verl_plan())
    assert padded["logits_forward"].nbytes == 2 * n and padded["logits_backward"].nbytes == 2 * 2 * n


def test_qwen7b_update_budget_16384():
    # use_dynamic_bsz, ppo_max_token_len_per_gpu 16384: the mini-batch (4 x 8 = 32 rows x 2,048 = 65,536 tokens)
    # splits into k = ceil(65,536 / 16,384) = 4 Karmarkar-Karp partitions; KK's merge keeps the largest partition
    # within one sequence of the smallest, so it holds at most 16,384 + 2,048 - 1 = 18,431 tokens (verl caps no
    # partition: lengths 6, 6, 6 under a budget of 10 give k = 2 and a partition of 12)
    from zerocalc.post import resolve
    p = verl_plan({"remove_padding": True, "update_max_tokens": 16384})
    post = resolve(p)
    assert (post.rows, post.length) == (1, 18431)
    # logits bytes = 18,431 x 152,064 x 2 (bf16):
    assert step(p)["logits_forward"].nbytes == 18431 * V * 2 == 5_605_383_168
    # a budget above the whole mini-batch: one micro-batch of its 65,536 tokens
    assert resolve(verl_plan({"remove_padding": True, "update_max_tokens": 100_000})).length == 65536


def test_padded_dynamic_batches_take_full_length_rows():
    # use_dynamic_bsz without remove-padding: rows stay padded to 2,048; full-length rows under the bound
    # (16,384 + 2,047) // 2,048 = 18,431 // 2,048 = 8 rows (at most the mini-batch's 32)
    from zerocalc.post.defaults import packed_shape
    assert packed_shape(False, 16384, 4, 32, 2048) == (8, 2048)
    assert packed_shape(False, 16384, 4, 4, 2048) == (4, 2048)
    assert packed_shape(False, None, 4, 32, 2048) == (4, 2048)
    assert packed_shape(True, None, 4, 32, 2048) == (1, 8192)


def test_score_pass_has_its_own_budget_and_no_eager_entropy():
    # log_prob_max_token_len_per_gpu 32768: the old-log-prob pass over one packed row of min(32 x 2,048,
    # 32,768 + 2,047) = 34,815 tokens; its logits 2 x 34,815 x V; the rmpad path's entropy is torch.compile'd
    # (use_torch_compile default true): nothing vocabulary-wide beside them. The peak is the logits plus the last
    # hidden state (2 x 34,815 x 3,584) or the MLP's moment, whichever is larger
    p = verl_plan({"remove_padding": True, "update_max_tokens": 16384, "score_max_tokens": 32768})
    ph = score(p)
    tokens = 34815
    mlp = 2 * tokens * (3 * 18944 + 2 * H)
    assert ph.transient == max(2 * tokens * V + 2 * tokens * H, mlp) == 2 * tokens * V + 2 * tokens * H
    assert "1 rows x 34815 tokens" in ph.note
    # padded, the same micro-batch of 4 rows: the logits 2 x 4 x 2,048 x V and the eager entropy's two fp32
    # tensors of the response slice, 2 x 4 x 4 x 1,024 x V
    padded = score(verl_plan())
    assert padded.transient == 2 * 4 * 2048 * V + 8 * 4 * 1024 * V + 2 * 4 * 2048 * H


def test_score_micro_batch_size_and_the_larger_pass():
    # log_prob_micro_batch_size_per_gpu 16 (data.split(16)), remove-padding: one row of 16 x 2,048 = 32,768 tokens
    from zerocalc.post import resolve
    post = resolve(verl_plan({"remove_padding": True, "score_micro_batch_size": 16}))
    assert (post.score_rows, post.score_length) == (1, 32768) and (post.rows, post.length) == (1, 8192)
    # padded: 16 rows of 2,048
    assert resolve(verl_plan({"score_micro_batch_size": 16})).score_rows == 16
    # a budget (one pass, 8,192 -> 8,192 + 2,047 = 10,239 tokens) beside a micro-batch (the other, 32,768): the
    # larger pass sets the score phase
    post = resolve(verl_plan({"remove_padding": True, "score_max_tokens": 8192, "score_micro_batch_size": 16}))
    assert post.score_length == 32768
    post = resolve(verl_plan({"remove_padding": True, "score_max_tokens": 8192, "score_micro_batch_size": 2}))
    assert post.score_length == 10239                                     # 2 x 2,048 = 4,096 < 10,239


@pytest.mark.parametrize("packing, key", [
    ({"remove_padding": True, "update_max_tokens": 2047}, "post_training.packing.update_max_tokens"),
    ({"score_max_tokens": 1000}, "post_training.packing.score_max_tokens"),
    ({"remove_padding": "yes"}, "post_training.packing.remove_padding"),
    ({"pad": True}, "post_training.packing.pad"),
    ({"score_micro_batch_size": 0}, "post_training.packing.score_micro_batch_size"),
])
def test_bad_packing_names_the_key(packing, key):
    # verl's rearrange_micro_batches asserts max_token_len >= attention_mask.shape[-1] (1,024 + 1,024 = 2,048)
    with pytest.raises(PlanError) as e:
        verl_plan(packing)
    assert e.value.key == key


def test_packing_is_verls_and_needs_flash_attention():
    with pytest.raises(PlanError) as e:
        verl_plan({"remove_padding": True}, attention="eager")
    assert e.value.key == "post_training.packing.remove_padding"       # the varlen forward needs flash-attn
    d = verl_plan().to_dict()
    d["post_training"].update(trainer="trl", packing={"remove_padding": True})
    with pytest.raises(PlanError) as e:
        Plan.from_dict(d)
    assert e.value.key == "post_training.packing"


def test_packing_round_trips():
    p = verl_plan({"remove_padding": True, "update_max_tokens": 16384})
    d = p.to_dict()["post_training"]["packing"]
    assert d == {"remove_padding": True, "update_max_tokens": 16384, "score_max_tokens": None,
                 "score_micro_batch_size": None}
    assert Plan.from_dict(p.to_dict()).to_dict() == p.to_dict()
