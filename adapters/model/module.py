"""The base of every module of the model: weights are buffers registered under their manifest role.

A module says which checkpoint role fills which of its tensors (`add_weight`), so the loader needs no name table of
its own: it finds the module of a layer that owns a role and copies the tensor in. Derived tensors (computed from
weights) are rebuilt by `refresh_derived`, which the loader calls after every load.
"""

from __future__ import annotations

import torch
from dayone.adapters.model.config import Tier, weight_dtype
from torch import nn


class SpecModule(nn.Module):
    def __init__(self, tier: Tier) -> None:
        super().__init__()
        self.tier = tier
        self.roles: dict[str, str] = {}

    def add_weight(
        self, attr: str, shape: tuple[int, ...], role: str, device: torch.device | str | None = None
    ) -> None:
        """Register buffer `attr` of `shape`, filled from the checkpoint tensor of `role` (dtype by tier and role)."""
        self.register_buffer(attr, torch.empty(shape, dtype=weight_dtype(role, self.tier), device=device))
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
