"""Chunked KDA for training on a GPU: the Triton forward (chunk.py) and the Triton backward (chunk_backward.py) tied by
one torch.autograd.Function.

What runs where:
- torch autograd, around the Function: the preprocessing (`reference.prepare_inputs`: L2 norm and scale of q, k,
  the gate's activation from A_log / dt_bias, beta's sigmoid), elementwise work whose gradients autograd gives
  exactly and cheaply.
- forward: chunk.py's two kernels on the prepared inputs (gate "none", no in-kernel norm or sigmoid, scale 1).
- backward: the chunk-local WY / UT-transform of every chunk recomputed in torch (torch_chunk.py's formulas, all
  chunks at once, no loop over chunks); the recurrence over chunks in Triton both ways (chunk_backward.py: the
  states recomputed, then the state gradient walked back, with the gradients through the states); from those, torch
  autograd differentiates the chunk-local part, whose two matrix steps have their backward in Triton
  (chunk_backward_intra.py): the in-chunk products A_qk, A_kk (`IntraChunk`) and the WY form (`WYForm`). What stays
  in torch is elementwise (and the recompute's triangular solve).
The readable reference of the whole is torch_chunk_autograd.py (the same algorithm, differentiated by autograd), the
CPU training path; tests/kernels/test_kda_triton_backward.py checks this one in the interpreter against autograd of
the fp64 per-token recurrence.
"""

from __future__ import annotations

import itertools

import torch
from dayone.kernels.kda.chunk import CHUNK, chunk_kda_triton
from dayone.kernels.kda.chunk_backward import chunk_backward_triton
from dayone.kernels.kda.chunk_backward_intra import intra_chunk_backward_triton, wy_backward_triton
from dayone.kernels.kda.reference import prepare_inputs
from dayone.kernels.kda.torch_chunk import chunk_index, decay, intra_chunk, padded_tokens, suffix_sum
from dayone.kernels.packed_sequences import sequence_bounds


class IntraChunk(torch.autograd.Function):
    """torch_chunk.py's `intra_chunk` before beta: (q, k, g) [C, H, BT, K] -> (A~_kk, A_qk) [C, H, BT, BT], with the
    backward in Triton (chunk_backward_intra.py)."""

    @staticmethod
    def forward(ctx, qc, kc, gc, ieee):
        ctx.save_for_backward(qc, kc, gc)
        ctx.ieee = ieee
        return intra_chunk(qc, kc, gc, qc.new_ones(qc.shape[:3]))

    @staticmethod
    def backward(ctx, dAkk, dAqk):
        qc, kc, gc = ctx.saved_tensors
        return *intra_chunk_backward_triton(qc, kc, gc, dAqk, dAkk, ieee=ctx.ieee), None


class WYForm(torch.autograd.Function):
    """(A~, beta, k exp(G), v) -> (w, u) = (I + diag(beta) A~)^-1 diag(beta) [k exp(G) | v], the triangular solve in
    torch, the backward in Triton (chunk_backward_intra.py). A~: [C, H, BT, BT] strictly lower; beta: [C, H, BT]."""

    @staticmethod
    def forward(ctx, Ak, bc, keg, vc, ieee):
        eye = torch.eye(CHUNK, device=Ak.device)
        inverse = torch.linalg.solve_triangular(Ak * bc[..., None] + eye, eye.expand_as(Ak), upper=False,
                                                unitriangular=True)  # fmt: skip
        ctx.save_for_backward(inverse, Ak, bc, keg, vc)
        ctx.ieee = ieee
        return inverse @ (bc[..., None] * keg), inverse @ (bc[..., None] * vc)

    @staticmethod
    def backward(ctx, dw, du):
        inverse, Ak, bc, keg, vc = ctx.saved_tensors
        return *wy_backward_triton(inverse, Ak, bc, keg, vc, dw, du, ctx.ieee), None


def chunk_local(qc, kc, vc, gc, bc, ieee):
    """The WY intermediates of every chunk (torch_chunk.py's formulas), differentiable.

    qc, kc, gc: [C, H, BT, K]; vc: [C, H, BT, V]; bc: [C, H, BT]; ieee: IEEE fp32 dots in the Triton part. Returns
    qg, kg, w [C, H, BT, K], u [C, H, BT, V], Aqk [C, H, BT, BT] and gl [C, H, K] (the decay over the whole chunk)."""
    Ak, Aqk = IntraChunk.apply(qc, kc, gc, ieee)
    eG = decay(gc.cumsum(2))
    w, u = WYForm.apply(Ak, bc, kc * eG, vc, ieee)
    return qc * eG, kc * decay(suffix_sum(gc, 2)), w, u, Aqk, eG[:, :, -1]


class ChunkKDAFunction(torch.autograd.Function):
    """(qn, kn, v, log_decay, beta, h0) -> (o, final state), inputs already prepared (`prepare_inputs`).

    qn, kn, log_decay: [B, T, H, K] fp32; v: [B, T, H, V]; beta: [B, T, H] fp32; h0: [N, H, K, V] or None;
    bounds: the N + 1 sequence boundaries in the flattened B * T tokens; cu_seqlens: as given to chunk_kda.
    o: [B, T, H, V] in v's dtype; final state: [N, H, K, V] fp32.
    """

    @staticmethod
    def forward(ctx, qn, kn, v, log_decay, beta, h0, bounds, cu_seqlens):
        o, final = chunk_kda_triton(
            qn, kn, v, log_decay, beta, None, None, "none", 0.0, 1.0, h0, True, cu_seqlens, False, False
        )
        ctx.save_for_backward(qn, kn, v, log_decay, beta, h0)
        ctx.bounds = bounds
        ctx.set_materialize_grads(False)  # an unused final state (training) sends None: no gradient to load
        return o, final

    @staticmethod
    def backward(ctx, do, dfinal):
        qn, kn, v, log_decay, beta, h0 = ctx.saved_tensors
        B, T = qn.shape[:2]
        rows, first, counts = chunk_index(list(ctx.bounds), pad=B * T)
        rows = rows.to(qn.device)

        def chunks(x):  # [B, T, H(, D)] -> [C, H, BT, D], padding rows zero (no input, no decay)
            return padded_tokens(x)[rows].movedim(2, 1)

        do = torch.zeros_like(v) if do is None else do
        ieee = v.dtype == torch.float32  # IEEE fp32 dots for an fp32 model, TF32 for a 16-bit one, as the forward's
        leaves = [x.detach().float().requires_grad_() for x in (qn, kn, v, log_decay, beta)]
        with torch.enable_grad():
            qc, kc, vc, gc, bc = (chunks(x) for x in leaves)
            local = chunk_local(qc, kc, vc, gc, bc[..., 0], ieee)
        offsets = torch.tensor([*first, first[-1] + counts[-1]] if counts else [0], dtype=torch.int32)
        h0, dfinal = (None if x is None else x.float().contiguous() for x in (h0, dfinal))
        grads = chunk_backward_triton(
            *(x.detach().contiguous() for x in local), chunks(do.float()).contiguous(), h0, dfinal,
            offsets.to(qn.device), ieee,
        )  # fmt: skip
        dqn, dkn, dv, dg, dbeta = torch.autograd.grad(local, leaves, grads[:6])
        return dqn, dkn, dv.to(v.dtype), dg, dbeta, None if h0 is None else grads[6], None, None


def chunk_kda_triton_autograd(
    q, k, v, g, beta, A_log, dt_bias, gate, lower_bound, scale, initial_state, output_final_state,
    cu_seqlens, use_qk_l2norm, beta_logits,
):  # fmt: skip
    """Arguments and results as in `dayone.kernels.kda.chunk_kda` (o in v's dtype, final state fp32), differentiable
    in every tensor argument (q, k, v, g, beta, A_log, dt_bias, initial_state)."""
    B, T = q.shape[:2]
    if cu_seqlens is not None and B != 1:
        raise ValueError(f"packed sequences (cu_seqlens) need B = 1, got q of shape {tuple(q.shape)}")
    qn, kn, log_decay, b = prepare_inputs(
        q, k, g, beta, A_log, dt_bias, gate, lower_bound, scale, use_qk_l2norm, beta_logits
    )
    bounds = tuple(sequence_bounds(B, T, cu_seqlens))
    if any(a > b for a, b in itertools.pairwise(bounds)):
        raise ValueError(f"cu_seqlens must not decrease, got {list(bounds)}")
    o, final = ChunkKDAFunction.apply(qn, kn, v, log_decay, b, initial_state, bounds, cu_seqlens)
    return o, (final if output_final_state else None)
