"""What the image-to-text encoder-decoders keep beyond their text stacks (transformers 5.24), read off fake-tensor
traces of the real training step with the vision side frozen (vision.trainable's default: no graph there):
tools/memtrace/vision_seq2seq_trace.py, fixtures in tools/memtrace/golden/vision_seq2seq/, held within 3 % by
tests/test_vision_seq2seq_blocks.py.

- florence2 (modeling_florence2.py Florence2ForConditionalGeneration): Florence2Model.forward embeds input_ids,
  runs the frozen DaViT tower and multi_modal_projector on pixel_values, and scatters the image features into the
  embeddings at the image_token_id placeholders (`inputs_embeds.masked_scatter(special_image_mask,
  image_features)`: the plan's seq_len holds the image tokens, as a LLaVA prompt's do); the BART encoder and decoder
  then run as plain BART (memory/blocks_seq2seq.py bart_block, post-LN with layernorm_embedding). Beyond them: the
  batch's pixel_values (b x in_channels x H x W in the weights' dtype, alive the whole step, as input_ids are) and,
  where the embeddings need a gradient, masked_scatter's bool mask (b·s). The loss is self.loss_function
  (ForCausalLMLoss, shift_labels=labels: the logits upcast, an fp32 log-softmax; memory/logits.py UPCAST_SEQ2SEQ).
"""
from __future__ import annotations

from ..model import ModelArch
from .blocks import Ctx

FLORENCE2_CONV0 = "model.vision_tower.convs.0.conv.weight"


def florence2_inputs(arch: ModelArch, c: Ctx, input_grads: bool) -> int:
    """Florence-2's pixel_values and masked_scatter's mask (module docstring); 0 for any other model."""
    if arch.model_type != "florence2" or arch.tower is None:
        return 0
    channels = next(tt.shape[1] for tt in arch.tensors if tt.name == FLORENCE2_CONV0)
    side = int(arch.tower["image_size"])
    pixels = c.res * c.batch * channels * side * side
    mask = c.tokens if (c.train_base or input_grads) else 0
    return pixels + mask
