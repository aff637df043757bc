"""MXFP4 for the table walker. Generated packages ship a copy of `dayone.kernels.mxfp4.reference` under this name
(walk.py imports `.mxfp4` there and here); inside dayone it is that module itself."""

from dayone.kernels.mxfp4.reference import dequantize_mxfp4_reference, quantize_mxfp4

__all__ = ["dequantize_mxfp4_reference", "quantize_mxfp4"]
