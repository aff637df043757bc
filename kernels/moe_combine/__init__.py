"""MoE combine: weighted sum over the chosen experts' outputs, then (latent MoE) the latent RMSNorm.

The public op lives in ops.py; what the compile stage needs (kernel instances, autotuning candidates, launch inputs)
in aot.py.
"""

from dayone.kernels.moe_combine.ops import moe_combine

__all__ = ["moe_combine"]
