"""A vision-language model's tower and projector in the step (plan-v1 Extension 8, ``vision``).

What trains (``vision.trainable``): ``frozen`` leaves the tower and the projector without gradients and optimizer
states (their weights stay, in the model's weight dtype); ``full`` trains them beside the language model (under
LoRA they train in full among the adapters' group); ``lora`` puts adapters on the tower's and projector's
linears whose names are in ``lora.targets`` (PEFT matches target names in every module).

What the tower saves (``vision.images_per_sample``): nothing while it is frozen (pixel values need no gradient,
so autograd records no graph there); trained, the ops of each ViT layer that the selected features depend on,
read off the traced step of a LLaVA-1.5-shaped model (Video-LLaVA's image path is the same: traced in
tools/memtrace/vision_towers.py) on fake tensors (tools/memtrace/vision.py,
tests/data/vision_trace.json; transformers 5.24 modeling_clip.py CLIPEncoderLayer), per token n of the
micro-batch's images (patches, plus CLIP's class token), e bytes per element:
  layer_norm1 input, its output (read by q/k/v), q, k, v, SDPA's output, layer_norm2 input and output: 8·e·n·h
  the MLP: fc1's output and fc2's input, and QuickGELU's sigmoid (CLIP): 3·e·n·I (one GELU kernel: 2·e·n·I)
  SDPA's fp32 logsumexp per head: 4·heads·n; the LayerNorms' mean and rstd (fp32 on CUDA): 16·n
plus CLIP's pre_layrnorm input (e·n·h, 8·n) and the selected hidden state kept by the projector (e·n·h);
LLaVA's projector keeps GELU's input and linear_2's input (2·e·n'·h_text, n' the patches without the class
token). SigLIP towers (Gemma 3, PaliGemma, Cohere2 Vision, Aya Vision, DeepSeek-VL, Idefics2, Idefics3, SmolVLM) run the same layer with one GELU and a post_layernorm
(its input and its output, read by the projector): the same op rules, traced through Cohere2 Vision's tower
(tools/memtrace/vision_towers.py, tests/data/vision_towers_trace.json, modeling_siglip.py SiglipVisionModel,
modeling_cohere2_vision.py Cohere2VisionMultiModalProjector), whose projector's own rule is below. Pixtral
(Mistral 3, Mistral Large 4, LightOnOCR): memory/vision_pixtral.py; BLIP-2's ViT and Q-Former: memory/vision_qformer.py; Qwen2-Audio's and Voxtral's audio encoders
(images_per_sample: their 30 s clips): memory/vision_audio.py; LFM2-VL's SigLIP 2 NaFlex tower:
memory/vision_siglip2.py; Gemma 4's tower: memory/vision_gemma4.py; Idefics2's connector: memory/vision_perceiver.py.
GOT-OCR 2.0's SAM ViTDet: memory/vision_sam.py; Florence-2's DaViT: memory/vision_davit.py. Fuyu has no tower: its one patch linear keeps the batch's patches (nothing more) or, under autocast, their
16-bit copy. The Qwen-VL towers and GLM-4.1V / 4.6V's: memory/vision_qwen.py; InternVL's
InternViT: memory/vision_internvl.py. Layers after the selected feature layer
(LLaVA's vision_feature_layer -2) run but nothing reaches the loss through them: their graph dies with the
outputs. With activation checkpointing the tower's layers keep their inputs only.
"""
from __future__ import annotations

from ..model import ModelArch
from ..plan import Plan
from .blocks_kosmos import kosmos25_images
from .ernie_vl import fed_support
from .vision_audio import audio_saved_bytes
from .vision_gemma4 import gemma4_vision_saved_bytes
from .vision_siglip2 import lfm2_vl_saved_bytes
from .vision_davit import davit_saved_bytes
from .vision_internvl import internvit_saved_bytes
from .vision_perceiver import perceiver_saved_bytes
from .vision_pixtral import pixtral_patches, pixtral_saved_bytes
from .vision_qformer import blip2_saved_bytes
from .vision_sam import sam_saved_bytes
from .vision_qwen import glm4v_saved_bytes, qwen_tower_saved_bytes

def tower_tensors(arch: ModelArch) -> tuple:
    return arch.tower_tensors                 # vision / projector / audio, read once per model (model/arch.py)


# model_support where a trained tower (or one fed images) has no tower_spec: its parameters are counted exactly,
# what it saves for its backward is not (plan-v1 Extension 8, `model_support`)
UNTRACED_TOWER = ("activations approximate (the {} tower's activations are not modelled: no traced rule for them, "
                  "and vision.trainable {} leaves out what the tower and projector save for their backward)")


def tower_untraced(arch: ModelArch, plan: Plan) -> bool:
    """Whether the step runs a tower whose activations have no rule: a composite's tower / projector / audio
    tensors without a tower_spec (composite.tower_spec), trained (``vision.trainable`` not frozen) or fed
    images. A frozen tower saves nothing (no graph), so its zero is exact. A spec marked frozen_only (Kosmos-2.5:
    memory/blocks_kosmos.py kosmos25_images) models a frozen tower fed images, not a trained one."""
    if arch.tower is not None and arch.tower.get("frozen_only"):
        return plan.vision.trainable != "frozen"
    return (arch.tower is None and (plan.vision.trainable != "frozen" or plan.vision.images_per_sample > 0)
            and bool(tower_tensors(arch)))


def plan_support(arch: ModelArch, plan: Plan) -> str:
    """The estimate's ``model_support``: the model's own (``ModelArch.support``, "exact" where the parameter
    count equals transformers'), with the untraced tower's activations named where this plan runs them."""
    if arch.gated_cross_layers and not plan.vision.tokens_per_sample:
        # IDEFICS: its gated cross-attention layers run over the vision states only (memory/blocks_cross.py)
        return ("exact parameter count; activations approximate: the gated cross-attention layers are costed over "
                "vision.tokens_per_sample vision states (IdeficsModel.forward requires images): give them")
    own = fed_support(arch, plan.vision.tokens_per_sample > 0 or plan.vision.images_per_sample > 0)
    if not tower_untraced(arch, plan):
        return own
    why = UNTRACED_TOWER.format(arch.model_type, plan.vision.trainable)
    return f"exact parameter count; {why}" if own == "exact" else f"{own}; {why}"


def tower_trained_in_full(plan: Plan) -> bool:
    return plan.vision.trainable == "full"


def tower_adapters(arch: ModelArch, plan: Plan) -> list[tuple[int, int]]:
    """(d_in, d_out) of every tower / projector linear LoRA adapts under ``vision.trainable: lora``."""
    if plan.vision.trainable != "lora" or plan.method == "full":
        return []
    targets = set(plan.lora.targets)
    return [(t.shape[1], t.shape[0]) for t in tower_tensors(arch)
            if t.linear in targets and len(t.shape) == 2]


def tower_saved_bytes(plan: Plan, arch: ModelArch, e: int) -> int:
    """Bytes the tower and projector keep from forward to their backward (the module docstring's rules)."""
    spec, images = arch.tower, plan.vision.images_per_sample * plan.micro_batch_size
    if spec is not None and spec["kind"] == "kosmos25":
        return kosmos25_images(plan, arch)   # fed images, the tower frozen (memory/blocks_kosmos.py)
    if spec is None or not images or plan.vision.trainable == "frozen":
        return 0
    if spec["kind"] == "qwen":      # dynamic resolution: the patches are the image tokens times merge^2
        n = plan.micro_batch_size * plan.vision.tokens_per_sample * spec["merge"] ** 2
        return qwen_tower_saved_bytes(spec, n, e, plan.activation_checkpointing == "full", plan.attention == "flash")
    if spec["kind"] == "glm4v":     # as the Qwen-VL towers: the patches are the image tokens times merge^2
        n = plan.micro_batch_size * plan.vision.tokens_per_sample * spec["merge"] ** 2
        return glm4v_saved_bytes(spec, n, e, plan.activation_checkpointing == "full", plan.attention == "flash")
    if spec["kind"] == "pixtral":   # dynamic resolution: every image's patches in one packed sequence
        n = plan.micro_batch_size * plan.vision.images_per_sample * pixtral_patches(
            spec, plan.vision.tokens_per_sample, plan.vision.images_per_sample)
        return pixtral_saved_bytes(spec, n, e, plan.activation_checkpointing == "full", plan.attention == "flash")
    if spec["kind"] == "fuyu":
        # no tower: vision_embed_tokens keeps its input, the batch's patches; under autocast the fp32 patches
        # FuyuProcessor emits are cast to a 16-bit copy that the linear keeps (e·patches·patch_dim, traced; the
        # weight's copy is autocast_weight_copies' in activations.py)
        if plan.precision not in ("bf16-mixed", "fp16-mixed"):
            return 0
        n = plan.micro_batch_size * plan.vision.images_per_sample * pixtral_patches(
            spec, plan.vision.tokens_per_sample, plan.vision.images_per_sample)
        return e * n * spec["patch_dim"]
    if spec["kind"] == "davit":     # its blocks are not checkpointed (plain modules)
        return davit_saved_bytes(spec, images, e)
    if spec["kind"] == "sam":
        return sam_saved_bytes(spec, images, e, plan.activation_checkpointing == "full")
    if spec["kind"] == "blip2":
        return blip2_saved_bytes(spec, images, e, plan.activation_checkpointing == "full",
                                 plan.vision.instruction_tokens)
    if spec["kind"] == "lfm2_vl":   # NaFlex: the patches are the image tokens times downsample_factor^2
        n = plan.micro_batch_size * plan.vision.tokens_per_sample * spec["factor"] ** 2
        return lfm2_vl_saved_bytes(spec, n, e, plan.activation_checkpointing == "full")
    if spec["kind"] == "audio":     # images_per_sample: the 30 s clips (memory/vision_audio.py)
        return audio_saved_bytes(spec, images, e, plan.activation_checkpointing == "full")
    if spec["kind"] == "gemma4":    # every image padded to its max patches (memory/vision_gemma4.py)
        return gemma4_vision_saved_bytes(spec, images, e, plan.activation_checkpointing == "full")
    if spec["kind"] == "internvit":
        return internvit_saved_bytes(spec, images, e, plan.activation_checkpointing == "full")
    h, inter, heads, layers = spec["hidden"], spec["inter"], spec["heads"], spec["layers_run"]
    n = images * (spec["patches"] + spec["cls"])
    if plan.activation_checkpointing == "full":
        per_layer = e * n * h                         # each checkpointed CLIPEncoderLayer keeps its input
    else:
        per_layer = e * n * (8 * h + spec["mlp_tensors"] * inter) + 4 * heads * n + 16 * n
    total = layers * per_layer
    if spec["cls"]:
        total += e * n * h + 8 * n                    # pre_layrnorm's input and statistics
    if spec["projector"] == "llava":
        total += spec["features"] * e * n * h         # the selected hidden state(s), linear_1's input
        total += 2 * e * images * spec["patches"] * spec["text_hidden"]    # GELU's and linear_2's inputs
    elif spec["projector"] == "vipllava":
        # VipLlavaMultiModalProjector: its LayerNorm keeps its input (several hidden states without the class token
        # concatenated; one is a view that keeps the whole hidden state), its output (linear_1's input) and fp32
        # statistics; then GELU's and linear_2's inputs (traced)
        p, k = images * spec["patches"], spec["features"]
        total += (k * e * p * h if k > 1 else e * n * h) + k * e * p * h + 8 * p + 2 * e * p * spec["text_hidden"]
    elif spec["projector"] == "aya":
        # AyaVisionModel takes hidden_states[vision_feature_layer], before post_layernorm (whose graph dies with its
        # unused output); AyaVisionMultiModalProjector's pixel_shuffle copies it (the LayerNorm's input), the
        # LayerNorm's output is linear_1's input, fp32 statistics over n' = n / downsample^2 rows; then the SwiGLU
        # as Cohere2 Vision's: 2·e·n·h + 8·n' + 2·e·n'·mid (traced)
        shuffled = n // spec["downsample"] ** 2
        total += 2 * e * n * h * spec["features"] + 8 * shuffled + 2 * e * shuffled * spec["mid"]
    else:
        total += 2 * e * n * h + 8 * n                # post_layernorm's input and output, its statistics
        if spec["projector"] == "cohere2":
            # Cohere2VisionMultiModalProjector: linear_1 reads the pixel-shuffled view of post_layernorm's output
            # (no copy); linear_1's output (kept by SiLU and the product), SiLU's output and the product
            # (linear_2's input), half its width each: 2·e·n'·mid over n' = n / downsample^2 tokens (traced)
            total += 2 * e * (n // spec["downsample"] ** 2) * spec["mid"]
        if spec["projector"] in ("idefics3", "idefics2"):
            # Idefics3Connector's pixel shuffle copies post_layernorm's output for modality_projection (the same
            # bytes as that output, counted above); Idefics3VisionEmbeddings keeps the real images' pixels, a
            # boolean-indexed copy (e·3·image_size^2 an image), and its int64 position ids (traced)
            total += images * (e * 3 * spec["image_size"] ** 2 + 8 * spec["patches"])
        if spec["projector"] == "deepseek_vl":
            # DeepseekVLAligner over post_layernorm's output: GELU's input and linear2's input (traced)
            total += 2 * e * n * spec["text_hidden"]
        if spec["projector"] == "idefics2":        # modality_projection and the perceiver resampler
            total += perceiver_saved_bytes(spec, images, e)
        if spec["projector"] == "gemma3":
            # Gemma3MultiModalProjector: the pooled tokens' fp32 RMSNorm upcast and the projection's input
            total += (4 + e) * images * spec["tokens_per_image"] * h
    return total
