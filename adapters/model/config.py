"""The two tiers of the executable model and the precision each tier keeps its weights and activations in.

reference: plain fp32 torch, formulas written for clarity (token-by-token KDA, per-token experts): the truth.
fast: bf16 weights and activations, chunked KDA, experts batched by assignment; fp32 where the math says so.
The fast tier runs every op through a `dayone.kernels` public function; its `kernels` switch picks the backend:
"auto" (Triton on CUDA tensors, the torch counterparts on CPU ones), "triton" (forced; on a CPU only under
TRITON_INTERPRET=1) or "torch" (forced). Each call records the implementation that ran (`Tier.ran`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from dayone.core.errors import InputError

KERNELS = ("auto", "triton", "torch")


@dataclass(frozen=True)
class Tier:
    name: str
    dtype: torch.dtype  # activations and (most) weights
    kernels: str = "auto"  # the fast tier's backend switch, one of KERNELS
    # op -> "triton" | "torch": what the fast tier's kernel calls actually ran (fresh per `dataclasses.replace`)
    ran: dict[str, str] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def is_reference(self) -> bool:
        return self.name == "reference"

    def backend(self, op: str, like: torch.Tensor) -> str | None:
        """The `backend` argument of kernel function `op` on tensors like `like`; records which implementation runs."""
        arg = None if self.kernels == "auto" else self.kernels
        self.ran[op] = "triton" if arg == "triton" or (arg is None and like.is_cuda) else "torch"
        return arg


TIERS = {"reference": Tier("reference", torch.float32), "fast": Tier("fast", torch.bfloat16)}


def get_tier(tier: str | Tier, kernels: str | None = None) -> Tier:
    """The tier named `tier` (or `tier` itself) with its `kernels` switch set (None: keep it); a fresh instance, so
    the backends it records are one model's own."""
    if not isinstance(tier, Tier):
        if tier not in TIERS:
            raise InputError(f"tier {tier!r} is not known (choose from {', '.join(TIERS)})")
        tier = TIERS[tier]
    if kernels is not None and kernels not in KERNELS:
        raise InputError(f"kernels {kernels!r} is not known (choose from {', '.join(KERNELS)})")
    return replace(tier, kernels=tier.kernels if kernels is None else kernels)
