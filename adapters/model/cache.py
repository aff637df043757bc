"""Inference state of a batch of requests between calls: what prefill leaves behind and decode reads.

Per KDA layer: the short-conv window (the last W-1 pre-conv q|k|v projections of each request, channel-major as
the short_conv kernels' state pool) and the recurrent
state S [H, K, V] in fp32. Per MLA layer: the latent of every past token, kv_a_layernorm(c) | k_rope
[kv_lora_rank + qk_rope_head_dim], i.e. after kv_a_proj_with_mqa and before the kv_b up-projection.
Attention residuals need nothing here: the bank and the prefix mix one token's own layer outputs (per token).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class KDAState:
    conv: torch.Tensor  # [B, 3*H*K, W-1] pre-conv projections, oldest first, zeros before a request's first token
    recurrent: torch.Tensor  # [B, H, K, V] fp32


@dataclass
class MLAState:
    latents: list[torch.Tensor]  # per request [t, kv_lora_rank + qk_rope_head_dim]


@dataclass
class ModelCache:
    """lengths[b]: tokens of request b seen so far; layers[i]: the state of layer i's attention."""

    lengths: list[int]
    layers: list[KDAState | MLAState] = field(default_factory=list)

    @property
    def batch_size(self) -> int:
        return len(self.lengths)
