"""The public op of dayone.kernels.attn_residual: attn_res_aggregate; the Triton kernel for CUDA tensors, the torch
counterpart for CPU ones (dayone.kernels.dispatch)."""

from __future__ import annotations

import os

import torch
from dayone.kernels.attn_residual.reference import attn_res_aggregate_reference
from dayone.kernels.dispatch import use_triton


def attn_res_aggregate(
    bank: torch.Tensor | None,
    prefix: torch.Tensor,
    w_comb: torch.Tensor,
    norm_weight: torch.Tensor,
    eps: float = 1e-5,
    *,
    score_eps: float | None = None,
    return_mixed: bool = False,
    backend: str | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm(softmax-weighted sum of the rows [bank_0 .. bank_{n-1}, prefix]) per token; see reference.py.

    Args:
        bank: snapshots [T, n, D] (any token/row strides, e.g. a [n, T, D] store passed as .transpose(0, 1)),
            or None / n = 0 for an empty bank (then the result is RMSNorm(prefix)).
        prefix: the live partial sum [T, D].
        w_comb: the score vector [D] = `*_res_norm.weight` * `*_res_proj.weight`[0] (see combined_score_weight).
        norm_weight: the side's RMSNorm weight [D] (input_layernorm, post_attention_layernorm or the final norm).
        eps: that RMSNorm's epsilon (rms_norm_eps).
        score_eps: the weightless per-row norm's epsilon; None = eps.
        return_mixed: also return the mixed vector before the norm.
        backend: None (CUDA -> Triton, CPU -> torch), "triton" or "torch".
    Returns:
        out [T, D] in prefix's dtype (the sublayer's input), and with return_mixed also mixed [T, D] fp32.
    """
    triton = use_triton(prefix, backend, "attn_res_aggregate")
    t, d = prefix.shape
    if bank is None:
        bank = prefix.new_empty(t, 0, d)
    if bank.shape[0] != t or bank.shape[2] != d:
        raise ValueError(f"attn_res_aggregate: bank {tuple(bank.shape)} does not match prefix {tuple(prefix.shape)}")
    if w_comb.shape != (d,) or norm_weight.shape != (d,):
        raise ValueError(f"attn_res_aggregate: w_comb {tuple(w_comb.shape)}, norm_weight {tuple(norm_weight.shape)}")
    score_eps = eps if score_eps is None else score_eps
    if not triton:
        out, mixed = attn_res_aggregate_reference(bank, prefix, w_comb, norm_weight, eps, score_eps)
        return (out, mixed) if return_mixed else out
    from dayone.kernels.attn_residual.kernel import launch

    bank = bank if bank.stride(-1) == 1 else bank.contiguous()
    prefix = prefix if prefix.stride(-1) == 1 else prefix.contiguous()
    # The interpreter's fp32->bf16 cast truncates instead of rounding to nearest (triton 3.9), so under it the
    # kernel stores fp32 and torch rounds; on a GPU the kernel stores prefix's dtype itself.
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    out = torch.empty(t, d, dtype=torch.float32 if interpreting else prefix.dtype, device=prefix.device)
    mixed = torch.empty(t, d, dtype=torch.float32, device=prefix.device) if return_mixed else None
    if t:
        launch(bank, prefix, w_comb.contiguous(), norm_weight.contiguous(), out, mixed, eps, score_eps)
    out = out.to(prefix.dtype)
    return (out, mixed) if return_mixed else out
