"""Inkling's towers (transformers 5.24 modeling_inkling.py InklingModel, model_type inkling_mm_model), beside
the inkling_text language model (inkling.py).

- vision_tower (InklingVisionModel, an "HMLP" encoder; InklingVisionConfig's defaults, num_hidden_layers
  alias n_layers): plan_out_scales gives num_hidden_layers + 1 (t, h, w, c) grids: (1, 1, 1, num_channels),
  then per cumulative product H of patch_size's prime factors (largest first) (1, H, H, ceil(H^2 x channels /
  64) x 64), then per cumulative product T of temporal_patch_size's (T, P, P, (P^2 x channels x T) x 64); each
  layer picks the grid whose log(t h w) is nearest its point on linspace(0, log(P^2 x T x channels), n + 1)
  (the first and last fixed). Layer i is a projection Linear (no bias) from the start grid's c x its t / h / w
  folds to the end grid's c (the last layer: to the text width) with an RMSNorm after every layer but the last;
  final_norm (text width). With fewer layers than grids transformers solves an assignment
  (scipy linear_sum_assignment), temporal_patch_size 1 fails to build there, and a near-tie of the nearest grid could fall either way in float32: both
  are refused by name.
- audio_tower (InklingAudioModel): embed_audio_tokens (n_mel_bins x mel_vocab_size, text width) and norm.
Both towers' widths are the text config's hidden_size (InklingConfig.__post_init__).
"""
from __future__ import annotations

import math
from typing import Mapping

from ..errors import PlanError
from .config import ConfigReader, TensorList

VISION = {"patch_size": 40, "temporal_patch_size": 2, "num_channels": 3, "num_hidden_layers": 24}
AUDIO = {"n_mel_bins": 80, "mel_vocab_size": 256}


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _cumprod(xs: list[int]) -> list[int]:
    out, acc = [], 1
    for x in xs:
        acc *= x
        out.append(acc)
    return out


def plan_scales(patch: int, temporal: int, n: int, channels: int) -> list[tuple[int, int, int, int]]:
    """modeling_inkling.py plan_out_scales, the argmin branch (n >= number of grids)."""
    hs, ts = _cumprod(_prime_factors(patch)[::-1]), _cumprod(_prime_factors(temporal)[::-1])
    top = hs[-1] if hs else 1
    scales = ([(1, 1, 1, channels)] + [(1, h, h, -(-h * h * channels // 64) * 64) for h in hs]
              + [(t, top, top, top * top * channels * t * 64) for t in ts])
    if not ts or n < len(scales):
        raise PlanError("model.model_type", "model_type 'inkling_mm_model': a vision tower with fewer layers than "
                        "scale grids (transformers' linear_sum_assignment), or with temporal_patch_size 1 (no "
                        "temporal grid: transformers fails to build it), is not modelled")
    logs = [math.log(t * h * w) for t, h, w, _ in scales]
    end = math.log(patch * patch * temporal * channels)
    idx = []
    for i in range(n + 1):
        cost = sorted((abs(end * i / n - lg), j) for j, lg in enumerate(logs))
        if len(cost) > 1 and cost[1][0] - cost[0][0] < 1e-3:
            raise PlanError("model.model_type", "model_type 'inkling_mm_model': the vision tower's scale plan is a "
                            "near-tie that float32 may resolve either way; not modelled")
        idx.append(cost[0][1])
    idx[0], idx[-1] = 0, len(scales) - 1
    return [scales[j] for j in idx]


def inkling_mm_parts(cfg: Mapping, text_h: int) -> list:
    raw = cfg.get("vision_config") or {}
    v = ConfigReader({"num_hidden_layers": raw.get("n_layers"), **{k: x for k, x in raw.items() if x is not None}})
    g = lambda k: v.int(k, default=VISION[k])   # noqa: E731 - the class default when left out
    n = g("num_hidden_layers")
    scales = plan_scales(g("patch_size"), g("temporal_patch_size"), n, g("num_channels"))
    b = TensorList()
    for i, (s, e) in enumerate(zip(scales[:-1], scales[1:])):
        fold = (e[0] // s[0]) * (e[1] // s[1]) * (e[2] // s[2])
        last = i == n - 1
        q = f"model.vision_tower.encoder_layers.{i}"
        b.linear(f"{q}.projection", s[3] * fold, text_h if last else e[3], "vision")
        if not last:
            b.norm(f"{q}.layer_norm", e[3], component="vision")
    b.norm("model.vision_tower.final_norm", text_h, component="vision")
    a = ConfigReader(cfg.get("audio_config") or {})
    codes = a.int("n_mel_bins", "num_codebooks", default=AUDIO["n_mel_bins"]) * a.int(
        "mel_vocab_size", "codebook_size", default=AUDIO["mel_vocab_size"])
    b.matrix("model.audio_tower.embed_audio_tokens.embed_audio_tokens", "weight", (codes, text_h), "audio")
    b.norm("model.audio_tower.norm", text_h, component="audio")
    return b.tensors
