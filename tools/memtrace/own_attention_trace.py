"""Traced steps of four models whose attention is their own (issue 20, item 3), for the CI checks that the engine
keeps what their layers save:

- ``big_bird``: BigBirdForCausalLM (modeling_big_bird.py) in its default attention_type "block_sparse" at lengths
  above (5 + 2·num_random_blocks)·block_size (BigBirdModel.forward switches to "original_full" at or below it: the
  -s512 row), the default config's gelu_new MLP and head transform (tests/test_big_bird_blocks.py);
- ``xlnet``: XLNetLMHeadModel (modeling_xlnet.py) fed input_ids and labels: the one-stream relative attention
  (tests/test_xlnet_blocks.py);
- ``reformer``: ReformerModelWithLMHead (modeling_reformer.py): reversible layers under no_grad, local / LSH
  attention recomputed in backward (tests/test_reformer_blocks.py);
- ``blt``: BltForCausalLM (modeling_blt.py): the byte-level local encoder / decoder and their cross-attentions
  around the global transformer over fixed patches (blt_fixed_patches; tests/test_blt_blocks.py).

  python -m tools.memtrace.own_attention_trace big_bird > tests/data/big_bird_trace.json
  python -m tools.memtrace.own_attention_trace xlnet > tests/data/xlnet_trace.json
  python -m tools.memtrace.own_attention_trace reformer > tests/data/reformer_trace.json
  python -m tools.memtrace.own_attention_trace blt > tests/data/blt_trace.json

Each model's default config (tests/data/architectures.json), made small (SHRINK), gets full bf16 with and without
checkpointing, LoRA bf16-mixed with and without, and a bf16-mixed full row, less what the model cannot run
(NO_CKPT, NO_PURE: a full fp32 row and a b 2 bf16-mixed row instead, NO_LORA), plus its own rows (plans). Each
case keeps what tools/memtrace/compare.py compares and the plan.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0}
SHRINK = {
    # google/bigbird-roberta-base's layout (BigBirdConfig's default: h 768, 12 heads of 64, I 3072, 12 layers,
    # block_size 64, 3 random blocks, gelu_new, dropout 0.1) at h 256, 4 heads of 64, I 1024, 2 layers, the
    # vocabulary cut to 8192; block_sparse runs above (5 + 2·3)·64 = 704 tokens
    "big_bird": {"hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024, "num_hidden_layers": 2,
                 "vocab_size": 8192},
    # xlnet/xlnet-large-cased's layout (XLNetConfig's default: d_model 1024, 16 heads of 64, d_inner 4096, 24
    # layers, attn_type "bi", gelu, dropout 0.1) at d_model 256, 4 heads of 64, d_inner 1024, 2 layers, the
    # vocabulary cut to 8192
    "xlnet": {"d_model": 256, "n_head": 4, "d_head": 64, "d_inner": 1024, "n_layer": 2, "vocab_size": 8192},
    # google/reformer-crime-and-punishment's layout is ReformerConfig's default (h 256, 12 heads of 64, feed-forward
    # 512, local / lsh / local / lsh / local / lsh, chunks of 64, axial positions 64 x 64: training needs
    # exactly 4096 tokens, vocabulary 320): as it is
    "reformer": {},
    # itazap/blt-1b-hf's layout is BltConfig's default (a 1-layer local encoder of h 1024, a 25-layer global
    # transformer of h 2048, a 9-layer local decoder of h 1024 with a cross-attention in every layer, a 14-layer
    # entropy patcher of h 768, 6 hash-embedding groups of 500002 rows, patch_size 4): local encoder h 256 (4 heads,
    # I 512), global h 512 (4 heads of 128, I 1024, 2 layers), local decoder h 256 (4 heads, I 512, 2 layers), the
    # patcher h 128 (1 layer; frozen, replaced by fixed patches: blt_fixed_patches), 1000 rows per hash group
    "blt": {"encoder_hash_byte_group_vocab": 1000,
            "patcher_config": {"hidden_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
                               "num_key_value_heads": 2, "intermediate_size": 256, "head_dim": 64},
            "encoder_config": {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 4,
                               "intermediate_size": 512, "hidden_size_global": 512},
            "decoder_config": {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 4,
                               "intermediate_size": 512, "num_hidden_layers": 2, "hidden_size_global": 512,
                               "head_dim": 64},
            "global_config": {"hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 4,
                              "intermediate_size": 1024, "num_hidden_layers": 2, "head_dim": 128}},
}
SEQ = {"big_bird": 1024, "reformer": 4096}
# BigBird's attention is its own code whatever attn_implementation says (BigBirdSelfAttention's matmuls,
# BigBirdBlockSparseAttention): the plans ask for eager
ATTENTION = {"big_bird": "eager", "xlnet": "eager", "reformer": "eager",
             # BltPreTrainedModel: _supports_flash_attn False, SDPA
             "blt": "sdpa"}
# no gradient checkpointing (XLNetPreTrainedModel has no supports_gradient_checkpointing)
NO_CKPT = ("xlnet", "reformer")
# no bf16-pure step: XLNetRelativeAttention.__init__ makes q / k / v / o / r / the biases with torch.FloatTensor,
# fp32 whatever dtype the model is built in, so the first einsum meets bf16 hidden states ("expected scalar type
# BFloat16 but found Float"); AxialPositionEmbeddings' weights are made fp32 (torch.ones(dtype=torch.float32)),
# so Reformer's stream turns fp32 at the embeddings' sum and the first LayerNorm / Linear with 16-bit weights
# fails (checked on real CPU tensors: FakeTensors let the mixed matmul through). These models get bf16-mixed in
# place of the pure rows and a full fp32 row
NO_PURE = ("xlnet", "reformer")
# no LoRA step: ReformerEncoder runs the layers inside _ReversibleFunction (under no_grad, each layer's backward
# run by hand from the function's backward), whose only tensor input is the embedding output; with the embeddings
# frozen it needs no gradient, so neither does the loss ("element 0 of tensors does not require grad", checked on
# real CPU tensors with PEFT; model.enable_input_require_grads() would make it train)
# BLT: PEFT's model gets enable_input_require_grads, whose hook makes local_encoder.embed_tokens' output a leaf
# that requires grad, and compute_hash_embeddings adds the hash embeddings into it in place ("a leaf Variable that
# requires grad is being used in an in-place operation", with and without checkpointing; seen on the fake-tensor
# trace)
NO_LORA = ("reformer", "blt")
# PEFT's default LoRA targets (peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING)
TARGETS = {"big_bird": ["query", "value"],
           # XLNetRelativeAttention's q / k / v / o / r are nn.Parameters PEFT cannot wrap: the feed-forward's
           "xlnet": ["layer_1", "layer_2"],
           # LSHSelfAttention's shared query_key, LocalSelfAttention's query, and both's value
           "reformer": ["query_key", "query", "value"],
           "blt": ["q_proj", "k_proj", "v_proj", "o_proj"]}


@contextlib.contextmanager
def blt_fixed_patches():
    """BLT with patches of BltConfig.patch_size bytes: BltModel.forward's entropy patching (BltPatcher.forward:
    torch.distributions.Categorical(logits=...).entropy() validates its values, patch_lengths_from_entropies
    slices by `patch_mask.sum(dim=1).max()`) depends on the data, which FakeTensors do not have. The patcher is
    frozen and fed ids, so it keeps nothing for backward; BltPatcher.forward is replaced by s / patch_size patches
    of patch_size bytes (its own forward's transients, before the model's, are left out)."""
    import torch  # noqa: PLC0415
    from transformers.models.blt import modeling_blt as mb  # noqa: PLC0415

    def forward(self, input_ids=None, patch_size=None, **kwargs):
        b, s = input_ids.shape
        lengths = torch.full((b, s // patch_size), patch_size, dtype=torch.long, device=input_ids.device)
        return None, lengths, None

    fwd, mb.BltPatcher.forward = mb.BltPatcher.forward, forward
    try:
        yield
    finally:
        mb.BltPatcher.forward = fwd


def plans(model_type: str) -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = dict(next(r for r in rows if r["id"] == f"default:{model_type}")["config"])
    for k, v in SHRINK[model_type].items():        # a sub-config's shrink merged into the default's
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v
    layers = cfg.get("num_hidden_layers") or cfg.get("n_layer") or cfg["global_config"]["num_hidden_layers"]
    s = SEQ.get(model_type, 512)
    tag = f'{model_type.replace("_", "-")}-{layers}l'
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": s, "attention": ATTENTION.get(model_type, "flash")}
    lora = {**base, "method": "lora", "precision": "bf16-mixed", "lora": {**LORA, "targets": TARGETS[model_type]}}
    out = [(f"{tag}-full-s{s}", base),
           (f"{tag}-full-s{s}-ckpt", {**base, "activation_checkpointing": "full"}),
           (f"{tag}-lora-mixed-s{s}", lora),
           (f"{tag}-lora-mixed-s{s}-ckpt", {**lora, "activation_checkpointing": "full"}),
           (f"{tag}-full-mixed-s{s}", {**base, "precision": "bf16-mixed"})]
    if model_type in NO_PURE:
        out = [(f"{tag}-full-fp32-s{s}", {**base, "precision": "fp32"})] + [
            row for row in out[2:] if "ckpt" not in row[0] or model_type not in NO_CKPT]
        out.append((f"{tag}-full-mixed-s{s}-b2", {**base, "precision": "bf16-mixed", "micro_batch_size": 2}))
    if model_type == "big_bird":
        # two sequences of 2048 (rand_attn's other plan: _bigbird_block_rand_mask_with_head), and 512 tokens,
        # below the 704 where BigBirdModel.forward runs original_full
        out += [(f"{tag}-full-s2048-b2", {**base, "seq_len": 2048, "micro_batch_size": 2}),
                (f"{tag}-full-s512-full-attn", {**base, "seq_len": 512}),
                # is_decoder (what BigBirdForCausalLM asks for): the step passes no cache, so BigBirdModel.forward
                # keeps block_sparse (bidirectional) above the threshold all the same
                (f"{tag}-full-s1024-decoder", {**base, "model": {**cfg, "is_decoder": True}})]
    if model_type == "reformer":
        # the backward's recompute (memory/blocks_reformer.py reversible_backward_moment) on other layouts: local
        # layers only (chunks of 128), lsh / local / lsh / local (LSH chunks of 128, local of 32; 1 and 2 hashes),
        # and local / lsh, whose LSH layer is the top one (chunks of 256); then the feed-forward's recompute
        mix = {"attn_layers": ["lsh", "local", "lsh", "local"], "num_hidden_layers": 4, "lsh_attn_chunk_length": 128,
               "local_attn_chunk_length": 32}
        out += [("reformer-4l-local-c128-full-fp32-s4096",
                 {**base, "precision": "fp32", "model": {**cfg, "attn_layers": ["local"] * 4, "num_hidden_layers": 4,
                                                         "local_attn_chunk_length": 128}}),
                ("reformer-4l-mixed-layers-full-mixed-s4096-b2",
                 {**base, "precision": "bf16-mixed", "micro_batch_size": 2, "model": {**cfg, **mix}}),
                ("reformer-4l-mixed-layers-2-hashes-full-fp32-s4096",
                 {**base, "precision": "fp32", "model": {**cfg, **mix, "num_hashes": 2}}),
                ("reformer-2l-lsh-on-top-c256-full-fp32-s4096",
                 {**base, "precision": "fp32", "model": {**cfg, "attn_layers": ["local", "lsh"], "num_hidden_layers": 2,
                                                         "lsh_attn_chunk_length": 256}}),
                # a feed-forward wider than the attention (8192 wide, 2 heads): its recompute is the peak, whole
                # and in chunks of 512 (chunk_size_feed_forward); dropout only in the LSH attention's probabilities
                ("reformer-6l-wide-ff-full-fp32-s4096",
                 {**base, "precision": "fp32", "model": {**cfg, "feed_forward_size": 8192, "num_attention_heads": 2}}),
                ("reformer-6l-wide-ff-chunks-512-full-mixed-s4096",
                 {**base, "precision": "bf16-mixed", "model": {**cfg, "feed_forward_size": 8192,
                                                               "num_attention_heads": 2,
                                                               "chunk_size_feed_forward": 512}}),
                ("reformer-6l-lsh-dropout-only-full-fp32-s4096",
                 {**base, "precision": "fp32", "model": {**cfg, "hidden_dropout_prob": 0.0,
                                                         "local_attention_probs_dropout_prob": 0.0,
                                                         "lsh_attention_probs_dropout_prob": 0.1}})]
    return [row for row in out if (model_type not in NO_CKPT or "ckpt" not in row[0])
            and (model_type not in NO_LORA or "-lora-" not in row[0])]


def main(argv: list[str] | None = None) -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type = args[0]
    cases = []
    for cid, plan in plans(model_type):
        if len(args) > 1 and not cid.startswith(args[1]):
            continue
        with blt_fixed_patches() if model_type == "blt" else contextlib.nullcontext():
            r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": f"python -m tools.memtrace.own_attention_trace {model_type}",
               "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0], "cases": cases},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
