"""Saved tensors of GIT (modeling_git.py GitForCausalLM, transformers 5.24; model/vision_encdec.py git): the image
tokens prefixed to the text inside BERT post-LayerNorm layers. Read off fake-tensor traces of the real training step
(tools/memtrace/bert_cross_trace.py git rows, fixtures in tools/memtrace/golden/bert_cross/git-*, held within 3 % by
tests/test_bert_cross_blocks.py).

What a step runs: GitModel.forward embeds the text (GitEmbeddings: word + position embeddings, LayerNorm, dropout
over the s text tokens), runs the frozen CLIP tower (vision.trainable's default; the tower and visual_projection
take no gradient, so no graph) on pixel_values, and concatenates `(projected_visual_features, embedding_output)`:
every GitLayer runs on T = n_img + s positions a sample (n_img = the tower's patches + 1, x num_image_with_embedding),
under create_causal_mask's additive (b, 1, T, T) mask (images bidirectional, text causal). GitSelfAttention is GIT's
only attention class (GIT_SELF_ATTENTION_CLASSES: "eager"): matmul / softmax / dropout / matmul whatever the plan
asks, BERT's eager rule over T x T scores (memory/blocks.py attention_core). GitSelfOutput / GitIntermediate /
GitOutput are BERT's (memory/blocks_bert_cross.py bert_layer). GitForCausalLM.forward's `output` Linear runs on
all T positions, the loss on `logits[:, n_img:-1].contiguous()` (memory/logits.py: the image rows' logits) through
ForCausalLMLoss (upcast, fp32 log-softmax). The batch's pixel_values are alive the whole step.
"""
from __future__ import annotations

from dataclasses import replace

from ..model import ModelArch
from .blocks import Ctx, SavedSet
from .blocks_bert import outside_saved
from .blocks_bert_cross import bert_layer, pixel_numel
from .lora import Adapter

POSITIONS = "git.image_encoder.vision_model.embeddings.position_embedding.weight"


def image_tokens(arch: ModelArch) -> int:
    """n_img a sample: GitSelfAttention.image_patch_tokens, (image_size / patch_size)² + 1 (the CLIP tower's
    position rows) x num_image_with_embedding (model/vision_encdec.py git: one img_temporal_embedding a frame)."""
    if arch.model_type != "git":
        return 0
    rows = next(tt.shape[0] for tt in arch.tensors if tt.name == POSITIONS)
    frames = sum(1 for tt in arch.tensors if tt.name.startswith("git.img_temporal_embedding"))
    return rows * max(frames, 1)


def git_stacks(arch: ModelArch, c_first: Ctx, c: Ctx, adapters: tuple[Adapter, ...],
               lm_head_adapter: Adapter | None, input_grads: bool):
    """memory/blocks_seq2seq.py EncDec's fields (layers, extra, ckpt_extra, head) for GIT (module docstring)."""
    n_img, t, h = image_tokens(arch), c.tokens, arch.hidden_size
    seq = c.seq + n_img

    def wide(x: Ctx) -> Ctx:
        return replace(x, tokens=seq * x.batch, seq=seq, attention="eager")
    layers = []
    for i, lins in enumerate((arch.block_linears,) * arch.num_layers):
        layers.append(bert_layer(arch, wide(c_first if i == 0 else c), lins, adapters).total)
    head = SavedSet()
    outside_saved(head, c, replace(arch, model_type="roberta"), lm_head_adapter, input_grads)
    if c.train_base:
        # `output` reads the image rows too: its input's 16-bit copy under autocast (the fp32 LayerNorm output)
        head.save("output.image_rows", (2 if c.autocast else c.res) * n_img * c.batch * h)
    head.save("pixel_values", c.res * c.batch * pixel_numel(arch))
    res = 4 if c.autocast else c.res
    # checkpointing: each layer's input over T positions (fp32 under autocast: a LayerNorm's output) and the
    # additive (b, 1, T, T) mask, in the weights' dtype
    ckpt = arch.num_layers * (res * seq * c.batch * h) - arch.num_layers * c.res * t * h + c.res * c.batch * seq * seq
    return tuple(layers), 0, ckpt + tower_graph(arch, c, n_img), head.total


def tower_graph(arch: ModelArch, c: Ctx, n_img: int) -> int:
    """Under checkpointing the frozen CLIP tower runs a graph: PreTrainedModel.gradient_checkpointing_enable calls
    enable_input_require_grads wherever main_input_name is "input_ids" (GIT's, even in full fine-tuning), which hooks
    every PreTrainedModel's input embeddings, GitVisionModel's patch_embedding too, whose output then requires grad.
    Kept: that hooked conv output (the patches), pre_layrnorm's input, each checkpointed CLIPEncoderLayer's input,
    post_layernorm's input and visual_projection's LayerNorm input, with three LayerNorms' mean / rstd (traced:
    git-full-pure-eager-gc; the 16-bit stream, fp32 under autocast as its LayerNorms make it: not traced)."""
    vh = next(tt.shape[1] for tt in arch.tensors if tt.name == POSITIONS)
    n_vit = len({tt.name.split(".")[5] for tt in arch.tensors
                 if tt.name.startswith("git.image_encoder.vision_model.encoder.layers.")})
    e = 4 if c.autocast else c.res
    b = c.batch
    return (e * (n_img - 1) * b * vh + (n_vit + 2) * e * n_img * b * vh + e * n_img * b * arch.hidden_size
            + 3 * 8 * n_img * b)



