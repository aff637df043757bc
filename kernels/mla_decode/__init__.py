"""MLA decode attention (absorbed up-projections) over a paged latent cache.

The public op lives in ops.py; what the compile stage needs (kernel instances, autotuning candidates, launch inputs)
in aot.py.
"""

from dayone.kernels.mla_decode.ops import mla_decode
from dayone.kernels.mla_decode.reference import mla_attention_reference, mla_decode_reference

__all__ = ["mla_attention_reference", "mla_decode", "mla_decode_reference"]
