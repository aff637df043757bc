"""MXFP4 expert weights: dequantization, a decode-shaped matrix-vector product on the packed bytes, quantization.

Format and edge cases (scale byte 0, 254, 255; code 8 = -0.0) are documented in `reference.py`.

The public op lives in ops.py; what the compile stage needs (kernel instances, autotuning candidates, launch inputs)
in aot.py.
"""

from dayone.kernels.mxfp4.ops import dequantize_mxfp4, mxfp4_linear
from dayone.kernels.mxfp4.reference import quantize_mxfp4

__all__ = ["dequantize_mxfp4", "mxfp4_linear", "quantize_mxfp4"]
