"""Kimi Delta Attention: chunked forward (prefill/training) and recurrent decode/verify over a state pool.

Ladder: reference.py (fp32 truth) -> chunk.py / recurrent.py (Triton) -> torch_chunk.py / torch_recurrent.py (CPU
fast tier). CUDA tensors run Triton; CPU tensors run the torch counterpart unless backend="triton" (interpreter tests).
Training: torch_chunk_autograd.py (CPU) and autograd.py (CUDA: chunk.py forward, chunk_backward*.py backward).

The public op lives in ops.py; what the compile stage needs (kernel instances, autotuning candidates, launch inputs)
in aot.py.
"""

from dayone.kernels.kda.ops import chunk_kda, kda_decode
from dayone.kernels.speculative import commit_accepted

__all__ = ["chunk_kda", "commit_accepted", "kda_decode"]
