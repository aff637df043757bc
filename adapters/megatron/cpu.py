"""CPU stand-ins for the CUDA-only calls on megatron-core 0.16.1's path, installed only when no GPU is present (on a
GPU nothing changes), and one fix for an install without TransformerEngine. Each keeps the arithmetic.

    torch.cuda.current_device      megatron-core allocates router buffers, its global memory buffer and the router
                                   weight on it; without CUDA it names the CPU
    CudaRNGStatesTracker.fork      forks CUDA RNG states around initialisation and dropout; a no-op context
    router_gating_linear           TransformerEngine's te_general_gemm in megatron-core; an fp32 F.linear here
Without TransformerEngine, megatron-core's extension module defines TELinear as a MagicMock and
multi_latent_attention then believes TE present (HAVE_TE = True) and calls isinstance(x, TELinear), which raises;
its HAVE_TE is set to what is true.
"""

from __future__ import annotations

import contextlib
import importlib.util

import torch
import torch.nn.functional as F

_installed = False


def install_cpu_standins() -> None:
    global _installed
    if importlib.util.find_spec("transformer_engine") is None:
        from megatron.core.transformer import multi_latent_attention

        multi_latent_attention.HAVE_TE = False
    if _installed or torch.cuda.is_available():
        return
    from megatron.core.tensor_parallel import random
    from megatron.core.transformer.moe import moe_utils, router

    torch.cuda.current_device = lambda: torch.device("cpu")
    random.CudaRNGStatesTracker.fork = lambda self, name=None: contextlib.nullcontext()

    def gating_linear(inp, weight, bias, router_dtype):
        return F.linear(inp.to(router_dtype), weight.to(router_dtype), None if bias is None else bias.to(router_dtype))

    moe_utils.router_gating_linear = gating_linear
    router.router_gating_linear = gating_linear
    _installed = True
