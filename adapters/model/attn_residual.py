"""Attention residuals: each sublayer reads a softmax mix of block snapshots instead of a plain residual stream.

State per token: a bank of snapshots [n, D] and the running prefix [D]. Aggregate, per token, in fp32:
    rows R = [bank_0 .. bank_{n-1}, prefix];  x_i = R_i * rsqrt(mean(R_i^2) + eps)  (no weight)
    s_i = <x_i, norm_w * proj_w[0]>;  mixed = sum_i softmax(s)_i R_i
norm_w * proj_w[0] is a derived vector, recomputed from the current weights by `refresh_derived`.
The sublayer then reads RMSNorm(mixed; side norm). The reference tier calls the op's reference
(`dayone.kernels.attn_residual.reference`), the fast tier its public function `attn_res_aggregate`; both fuse the
side's norm.
Everything is per token, so nothing of it is cached between decode steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from dayone.adapters.model.capture import Capture, record, wants
from dayone.adapters.model.config import Tier
from dayone.adapters.model.module import SpecModule
from dayone.kernels.attn_residual.reference import attn_res_aggregate_reference, combined_score_weight


@dataclass
class Stream:
    """The residual state between layers, packed [N, D]. Plain residuals use only `prefix` (the hidden state)."""

    prefix: torch.Tensor
    bank: list[torch.Tensor] = field(default_factory=list)


class ResidualMix(SpecModule):
    """One aggregation point: role "attn_res", "mlp_res" or "output_res" (norm [D] and proj [1, D] weights)."""

    def __init__(self, hidden: int, role: str, eps: float, tier: Tier, device=None) -> None:
        super().__init__(tier)
        self.eps = eps
        self.add_weight("norm", (hidden,), f"{role}.norm", device)
        self.add_weight("proj", (1, hidden), f"{role}.proj", device)
        self.add_derived("combined")

    def compute_derived(self) -> None:
        self.combined = combined_score_weight(self.norm, self.proj)

    def then_norm(self, stream: Stream, norm_weight: torch.Tensor, name: str, capture: Capture | None = None):
        """RMSNorm(the mix; norm_weight) [N, D] in the stream's dtype: the sublayer's input. Records the mix as `name`."""
        prefix = stream.prefix
        bank = torch.stack(stream.bank, dim=1) if stream.bank else None  # [N, n, D]
        if self.tier.is_reference:
            no_bank = prefix.new_zeros(prefix.shape[0], 0, prefix.shape[1])
            out, mixed = attn_res_aggregate_reference(no_bank if bank is None else bank, prefix, self.combined,
                                                      norm_weight, self.eps)  # fmt: skip
            record(capture, name, mixed.to(prefix.dtype))
            return out
        from dayone.kernels.attn_residual import attn_res_aggregate

        out = attn_res_aggregate(
            bank, prefix, self.combined, norm_weight, self.eps, return_mixed=wants(capture, name),
            backend=self.tier.backend("attn_res_aggregate", prefix),
        )  # fmt: skip
        if isinstance(out, tuple):
            out, mixed = out
            record(capture, name, mixed.to(prefix.dtype))
        return out
