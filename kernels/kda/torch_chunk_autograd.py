"""Chunked KDA forward that autograd can differentiate: the training path on a CPU (and wherever Triton has no
backward yet), instead of the token-by-token reference recurrence.

The same WY / UT-transform algorithm and arithmetic as torch_chunk.py (its `packed_inputs` and `wy_transform` are
shared), written without in-place updates of anything autograd saves: the state of each sequence is a new tensor per
chunk and the outputs are gathered once at the end. The only Python loop walks chunks of 64 tokens (batched over
sequences), so a step costs T / 64 small matmul rounds rather than T einsum rounds. All heads go in one pass (a
training batch's activations are kept for backward anyway). Gradients: autograd of these ops, checked against
autograd of the fp64 reference recurrence (tests/kernels/test_kda_autograd.py). Decay factors are floored at
exp(MIN_LOG_DECAY) as in the forward kernels: below it the gradient through the factor is zero where the
reference's is at most e^-60 times the term.
"""

from __future__ import annotations

import torch
from dayone.kernels.kda.torch_chunk import packed_inputs, wy_transform


def chunk_kda_autograd(
    q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, initial_state, output_final_state,
    cu_seqlens, use_qk_l2norm, beta_logits,
):  # fmt: skip
    """Arguments and results as in `dayone.kernels.kda.chunk_kda` (o in v's dtype, final state fp32)."""
    B, T, H, K = q.shape
    flat, rows, first, counts = packed_inputs(
        q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, cu_seqlens, use_qk_l2norm, beta_logits
    )
    qc, kc, vc, gc, bc = (x[rows].movedim(2, 1) for x in flat)  # [C, H, BT, ...]
    w, u, qg, kg, Aqk, chunk_decay = wy_transform(qc, kc, vc, gc, bc[..., 0])
    V = v.shape[-1]
    dev = q.device
    N = len(first)

    states = [
        initial_state[n].float() if initial_state is not None else torch.zeros(H, K, V, device=dev) for n in range(N)
    ]
    outputs: list[torch.Tensor | None] = [None] * rows.shape[0]
    for c in range(max(counts, default=0)):
        seqs = [n for n in range(N) if counts[n] > c]
        ids = torch.tensor([first[n] + c for n in seqs], device=dev)
        S = torch.stack([states[n] for n in seqs])
        vn = u[ids] - w[ids] @ S
        o = qg[ids] @ S + Aqk[ids] @ vn
        S = S * chunk_decay[ids] + kg[ids] @ vn
        for j, n in enumerate(seqs):
            states[n] = S[j]
            outputs[first[n] + c] = o[j]
    if outputs:
        o = torch.stack(outputs).movedim(1, 2).reshape(-1, H, V)  # [C * BT, H, V] in chunk-row order
        out = torch.zeros(B * T + 1, H, V, device=dev).index_copy(0, rows.reshape(-1), o)[: B * T]
    else:
        out = torch.zeros(B * T, H, V, device=dev)
    final = torch.stack(states) if output_final_state and states else None
    return out.view(B, T, H, V).to(v.dtype), final
