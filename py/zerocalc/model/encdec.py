"""EncoderDecoderModel (modeling_encoder_decoder.py, transformers 5.24): a composite of two configs, the
``encoder`` built as ``AutoModel.from_config`` (the bare model: BertModel with its pooler) and the ``decoder``
as ``AutoModelForCausalLM.from_config`` with cross-attention (BertLMHeadModel; from_encoder_decoder_configs sets
is_decoder and add_cross_attention), and ``enc_to_dec_proj`` (encoder hidden -> decoder hidden) when the two
hidden sizes differ and the decoder names no cross_attention_hidden_size. Modelled where both sides are of
the BERT lineage (model/encoders.py, and "bert" itself); any other pair is refused by name. The decoder's LM
head follows the decoder's own tie_word_embeddings; the encoder's and decoder's embeddings are never shared
(tie_encoder_decoder is not modelled). Checked against the meta-device build in tests/data/architectures.json.
Activations: memory/blocks_bert_cross.py, both stacks' post-LayerNorm BertLayers and the decoder's crossattention
(each decoder layer's ``layer_linears`` adds crossattention.query/key/value/dense, so PEFT's adapters on them are
counted), traced as EncoderDecoderModel with BERT on both sides (tools/memtrace/bert_cross_trace.py)."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..errors import PlanError
from .arch import Linear, ModelArch, Tensor
from .config import ConfigReader, TensorList
from .encoders import ENCODERS, LM_ONLY, encoder_lm

# the sides whose layer is modeling_bert.py's post-LayerNorm BertLayer (memory/blocks_bert.py POST): the traced rule
POST_LN_SIDES = ("bert", "roberta", "camembert", "xlm-roberta", "data2vec-text", "ernie", "bert-generation")
SUPPORT_TRACED = ("exact parameter count; activations traced (memory/blocks_bert_cross.py; "
                  "tools/memtrace/bert_cross_trace.py)")
SUPPORT_OTHER = ("exact parameter count; activations approximate (both stacks costed as the post-LayerNorm BertLayer "
                 "of memory/blocks_bert_cross.py, traced with BERT on both sides; this pair's own layers not traced)")

SIDES = set(ENCODERS) | {"bert"}     # the BERT-lineage configs AutoModel / AutoModelForCausalLM build


def encoder_decoder(cfg: Mapping) -> ModelArch:
    enc, dec = cfg.get("encoder"), cfg.get("decoder")
    if not isinstance(enc, Mapping) or not isinstance(dec, Mapping):
        raise PlanError("model.encoder", "model_type 'encoder-decoder' needs its encoder and decoder sub-configs")
    for side, sub in (("encoder", enc), ("decoder", dec)):
        if sub.get("model_type") not in SIDES:
            raise PlanError(f"model.{side}.model_type", f"model_type 'encoder-decoder' with a "
                            f"{sub.get('model_type')!r} {side} is not modelled; modelled: " + ", ".join(sorted(SIDES)))
    top = ConfigReader(cfg)
    if top.bool("tie_encoder_decoder", False):
        raise PlanError("model.tie_encoder_decoder", "model_type 'encoder-decoder' with tie_encoder_decoder is not "
                                                     "modelled")
    ec, dc = ConfigReader(enc), ConfigReader({**dec, "is_decoder": True, "add_cross_attention": True})
    encoder = encoder_lm(ec, enc["model_type"], base_model=True)
    decoder = encoder_lm(dc, dec["model_type"])
    e_base = (ENCODERS.get(enc["model_type"]) or LM_ONLY[enc["model_type"]])[0]
    tensors = (rebase(encoder.tensors, e_base + ".", "encoder.")
               + rebase(head_as_other(decoder.tensors), "", "decoder."))
    if encoder.hidden_size != decoder.hidden_size and not dc.has("cross_attention_hidden_size"):
        b = TensorList()
        b.linear("enc_to_dec_proj", encoder.hidden_size, decoder.hidden_size, "other", bias=True)
        tensors += tuple(b.tensors)
    traced = enc["model_type"] in POST_LN_SIDES and dec["model_type"] in POST_LN_SIDES \
        and encoder.hidden_size == decoder.hidden_size
    return replace(decoder, name=top.str("name", "encoder-decoder"), model_type="encoder-decoder",
                   num_layers=encoder.num_layers + decoder.num_layers, tensors=tensors,
                   layer_linears=(encoder.block_linears,) * encoder.num_layers
                   + (cross_linears(decoder),) * decoder.num_layers,
                   support=SUPPORT_TRACED if traced else SUPPORT_OTHER)


def cross_linears(decoder: ModelArch, kv_in: int | None = None) -> tuple[Linear, ...]:
    """A BERT decoder layer's linears with its crossattention's (BertLayer.__init__ registers crossattention after
    attention): query, key, value, attention.output.dense, crossattention.self.query / key / value (key and value
    read ``kv_in``, the encoder states' width), crossattention.output.dense, intermediate.dense, output.dense."""
    q, k, v, o, up, down = decoder.block_linears
    h = decoder.hidden_size
    kv = h if kv_in is None else kv_in
    return (q, k, v, o, Linear("crossattention.query", h, h), Linear("crossattention.key", kv, h),
            Linear("crossattention.value", kv, h), Linear("crossattention.dense", h, h), up, down)


def require_sub_configs(cfg: Mapping, model_type: str, *paths: str) -> None:
    """Refuse, naming the model_type and the field, a composite config lacking one of its sub-configs
    (``paths``: dotted, "vlm_config.text_config")."""
    for path in paths:
        node = cfg
        for key in path.split("."):
            node = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            raise PlanError(f"model.{path}", f"model_type {model_type!r} needs its {path} sub-config")


def head_as_other(tensors: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """tools/archgen files a sub-model's head (decoder.cls.*, text_decoder.cls.*) under "other", as for ELECTRA's
    generator head (model/encoders.py); the untied decoder matrix stays the head."""
    return tuple(t if t.component != "lm_head" or t.linear == "decoder" else replace(t, component="other")
                 for t in tensors)


def rebase(tensors: tuple[Tensor, ...], old: str, new: str) -> tuple[Tensor, ...]:
    """The tensors of a sub-model renamed as EncoderDecoderModel registers them (encoder. / decoder.)."""
    def move(path: str) -> str:
        return new + (path[len(old):] if path.startswith(old) else path) if path else path
    return tuple(replace(t, name=move(t.name), module=move(t.module), block=move(t.block)) for t in tensors)
