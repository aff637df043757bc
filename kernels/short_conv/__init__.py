"""Causal depthwise short convolution (width W, no bias) with SiLU: packed prefill and a decode update over a pool.

Ladder: reference.py (fp32 truth) -> conv.py (Triton) -> torch_conv.py (CPU fast tier). CUDA tensors run Triton;
CPU tensors run torch unless backend="triton" (interpreter tests). For speculative decoding, `short_conv_update`
verifies T draft tokens per request into an intermediate buffer and `commit_accepted` keeps the accepted prefix.

The public op lives in ops.py; what the compile stage needs (kernel instances, autotuning candidates, launch inputs)
in aot.py.
"""

from dayone.kernels.short_conv.ops import short_conv, short_conv_update
from dayone.kernels.speculative import commit_accepted

__all__ = ["commit_accepted", "short_conv", "short_conv_update"]
