"""The one backend rule every kernel's public function follows."""

from __future__ import annotations

import torch

BACKENDS = (None, "triton", "torch")


def use_triton(x: torch.Tensor, backend: str | None, op: str) -> bool:
    """Triton for CUDA tensors, the torch counterpart for CPU ones; backend="triton" | "torch" forces one (tests run
    the Triton path on the CPU under TRITON_INTERPRET=1)."""
    if backend not in BACKENDS:
        raise ValueError(f"{op}: backend must be None, 'triton' or 'torch', got {backend!r}")
    return backend == "triton" or (backend is None and x.is_cuda)
