"""Per-head RMSNorm with sigmoid output gate, fused (KDA's o_norm): o = rmsnorm(x; weight, eps) * sigmoid(gate).

Ladder: reference.py (fp32 truth) -> norm.py (Triton) -> torch_norm.py (CPU fast tier). CUDA tensors run Triton;
CPU tensors run torch unless backend="triton" (interpreter tests).

The public op lives in ops.py; what the compile stage needs (kernel instances, autotuning candidates, launch inputs)
in aot.py.
"""

from dayone.kernels.gated_rmsnorm.ops import gated_rmsnorm

__all__ = ["gated_rmsnorm"]
