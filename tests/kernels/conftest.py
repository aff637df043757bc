"""Kernel tests run the Triton kernels in the interpreter on the CPU; the flag must be set before triton is imported."""

import os

os.environ["TRITON_INTERPRET"] = "1"
