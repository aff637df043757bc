"""Attention-residual aggregation (Kimi K3's replacement for the residual stream), fused with the side's RMSNorm.

The public op lives in ops.py; what the compile stage needs (kernel instances, autotuning candidates, launch inputs)
in aot.py.
"""

from dayone.kernels.attn_residual.ops import attn_res_aggregate
from dayone.kernels.attn_residual.reference import combined_score_weight

__all__ = ["attn_res_aggregate", "combined_score_weight"]
