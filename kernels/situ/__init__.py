"""The MLP's gated activation: SiTU-and-mul (Kimi K3) or SiLU-and-mul (Kimi Linear), one op with a flag.

The public op lives in ops.py; what the compile stage needs (kernel instances, autotuning candidates, launch inputs)
in aot.py.
"""

from dayone.kernels.situ.ops import act_and_mul

__all__ = ["act_and_mul"]
