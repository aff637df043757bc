"""dayone's Triton kernels: one folder per op (reference, Triton kernel, torch counterpart, the public op in ops.py
exported by its __init__, the compile stage's instances and autotuning candidates in aot.py).

Every launch and the compile stage ask for FP fusion (a*b+c as one FMA) explicitly, `enable_fp_fusion=True`: our
kernels are built and checked with it, and Triton 3.9 warns that its default (fusion on) changes in 3.10. Importing
this package changes no environment variable (the CLI entry owns the process environment)."""
