"""The public ops of dayone.kernels.kda: chunk_kda (prefill, training forward) and kda_decode (decode, verify); the
Triton kernel for CUDA tensors, the torch counterpart for CPU ones (dayone.kernels.dispatch)."""

from __future__ import annotations

import torch
from dayone.kernels.dispatch import use_triton
from dayone.kernels.kda.chunk import (
    chunk_kda_triton,
)
from dayone.kernels.kda.recurrent import kda_decode_triton
from dayone.kernels.kda.torch_chunk import chunk_kda_torch
from dayone.kernels.kda.torch_recurrent import kda_decode_torch


def chunk_kda(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    *,
    gate: str = "plain",
    lower_bound: float = -5.0,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = True,
    cu_seqlens: torch.Tensor | None = None,
    use_qk_l2norm: bool = True,
    beta_logits: bool = True,
    backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Chunked KDA forward over (packed) sequences; chunk size 64.

    Args:
        q, k: [B, T, H, K] projected (and short-conv'd) queries and keys, any float dtype.
        v: [B, T, H, V].
        g: [B, T, H, K] raw gate (gate="plain" or "safe") or the log-decay itself (gate="none").
        beta: [B, T, H] logits (beta_logits=True, sigmoid applied inside) or beta itself.
        A_log: [H] fp32; dt_bias: [H * K] fp32. Needed unless gate="none".
        gate: "plain": -exp(A_log) * softplus(g + dt_bias)  (Kimi Linear);
              "safe":  lower_bound * sigmoid(exp(A_log) * (g + dt_bias))  (Kimi K3);
              "none":  g is already the log-decay.
        scale: query scale, default K^-0.5 (applied after the L2 norm).
        initial_state: [N, H, K, V] fp32, N = B, or the number of sequences when cu_seqlens is given.
        cu_seqlens: [N + 1] cumulative lengths of N sequences packed into B = 1.
        use_qk_l2norm: L2-normalise q and k per head inside the kernel (eps 1e-6), as fla's use_qk_l2norm_in_kernel.
        backend: None (CUDA -> Triton, CPU -> torch), "triton" or "torch".

    Returns:
        o: [B, T, H, V] in v's dtype; final_state: [N, H, K, V] fp32 (None unless output_final_state).
    """
    if cu_seqlens is not None and q.shape[0] != 1:
        raise ValueError(f"packed sequences (cu_seqlens) need B = 1, got q of shape {tuple(q.shape)}")
    run = chunk_kda_triton if use_triton(q, backend, "kda") else chunk_kda_torch
    return run(
        q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, initial_state, output_final_state,
        cu_seqlens, use_qk_l2norm, beta_logits,
    )  # fmt: skip


def kda_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state_pool: torch.Tensor,
    slots: torch.Tensor,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    *,
    gate: str = "plain",
    lower_bound: float = -5.0,
    scale: float | None = None,
    use_qk_l2norm: bool = True,
    beta_logits: bool = True,
    intermediate_states: torch.Tensor | None = None,
    backend: str | None = None,
) -> torch.Tensor:
    """Recurrent KDA for N requests of T tokens each, states read from and written to a pool.

    Args:
        q, k, g: [N, T, H, K]; v: [N, T, H, V]; beta: [N, T, H]. T = 1 for plain decode, the draft length to verify.
        state_pool: [P, H, K, V] fp32, contiguous.
        slots: [N] int, the pool slot of each request; a negative slot is a padding request and is skipped.
        A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits: as in `chunk_kda`.
        intermediate_states: None for decode: state_pool[slots[n]] is updated in place after the T tokens.
            For verify, an fp32 buffer [N, T, H, K, V]: the state after token t goes to intermediate_states[n, t] and
            the pool is left alone; keep the accepted prefix with `commit_accepted`.

    Returns:
        o: [N, T, H, V] in v's dtype.
    """
    run = kda_decode_triton if use_triton(q, backend, "kda") else kda_decode_torch
    return run(
        q, k, v, g, beta, state_pool, slots, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits,
        intermediate_states,
    )  # fmt: skip
