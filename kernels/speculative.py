"""Speculative decoding: keep each request's state after its last accepted draft token.

A verify pass (`kda_decode` or `short_conv_update` with `intermediate_states`) runs T tokens per request and writes
the state after every one of them instead of updating the pool; once the engine knows how many tokens each request
accepted, `commit_accepted` copies that state into the pool. Rejected drafts then leave no trace.
"""

from __future__ import annotations

import torch


def commit_accepted(
    state_pool: torch.Tensor, slots: torch.Tensor, intermediate_states: torch.Tensor, num_accepted: torch.Tensor
) -> None:
    """After a verify pass, keep in the pool the state of each request's last accepted token, in place.

    state_pool: [P, *S] (KDA: S = H, K, V; short conv: S = D, W - 1); slots: [N]; intermediate_states: [N, T, *S];
    num_accepted: [N] tokens accepted out of T (0 keeps the pool slot unchanged). Negative slots are skipped.
    """
    n = torch.nonzero((num_accepted > 0) & (slots >= 0)).flatten()
    last = num_accepted.long()[n] - 1
    state_pool[slots.long()[n]] = intermediate_states[n, last].to(state_pool.dtype)
