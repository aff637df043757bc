"""dayone's Triton kernels: one folder per op (reference, Triton kernel, torch counterpart, the public op in ops.py
exported by its __init__, the compile stage's instances and autotuning candidates in aot.py)."""

import os

# Triton 3.9 warns on every process that FP fusion (a*b+c as one FMA) is on by default only until 3.10. Our kernels
# are built and checked with fusion on, so say so explicitly: same code, and the notice stays out of our output.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
