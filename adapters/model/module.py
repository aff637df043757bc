"""The base of every module of the model: weights are buffers, each declared with the manifest role it holds.

Which checkpoint tensor fills which buffer, and in which dtype it is kept, is the weight map's canonical layout
(`dayone.adapters.weightmap`); `SpecModel` checks its buffers against that table when it is built (`bind_dtypes`)
and the loader walks it. Derived tensors (computed from weights) are rebuilt by `refresh_derived`, which the loader
calls after every load.
"""

from __future__ import annotations

import torch
from dayone.adapters.model.config import Tier
from torch import nn


class SpecModule(nn.Module):
    def __init__(self, tier: Tier) -> None:
        super().__init__()
        self.tier = tier
        self.roles: dict[str, str] = {}

    def add_weight(
        self,
        attr: str,
        shape: tuple[int, ...],
        role: str,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        """Register buffer `attr` of `shape`, filled from the checkpoint tensor of `role`, in `dtype` (default: the
        tier's) until the model binds it to the canonical weight map (fp32-stored weights stay fp32, MXFP4 bytes)."""
        self.register_buffer(attr, torch.empty(shape, dtype=dtype or self.tier.dtype, device=device))
        self.roles[role] = attr

    def add_derived(self, attr: str) -> None:
        """A tensor computed from weights in `refresh_derived`; not part of the state dict."""
        self.register_buffer(attr, None, persistent=False)

    def compute_derived(self) -> None:
        """Recompute this module's own derived tensors from its current weights (none by default)."""

    def role_targets(self) -> dict[str, tuple[SpecModule, str]]:
        """role -> (module, buffer name) over this module and its descendants."""
        out: dict[str, tuple[SpecModule, str]] = {}
        for module in self.modules():
            if isinstance(module, SpecModule):
                for role, attr in module.roles.items():
                    out[role] = (module, attr)
        return out

    def refresh_derived(self) -> None:
        """Recompute every derived tensor of this module and its descendants; call after any weight load or update."""
        for module in self.modules():
            if isinstance(module, SpecModule):
                module.compute_derived()
