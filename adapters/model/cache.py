"""Inference state of a batch of requests between calls: what prefill leaves behind and decode reads.

Per KDA layer: the short-conv window (the last W-1 pre-conv q|k|v projections of each request, channel-major as
the short_conv kernels' state pool) and the recurrent
state S [H, K, V] in fp32. Per MLA layer: the latent of every past token, kv_a_layernorm(c) | k_rope
[kv_lora_rank + qk_rope_head_dim], i.e. after kv_a_proj_with_mqa and before the kv_b up-projection, in a paged
pool as an engine keeps it (`MLAState`).
Attention residuals need nothing here: the bank and the prefix mix one token's own layer outputs (per token).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from dayone.kernels.mla_decode.reference import gather_request_tokens

PAGE_SIZE = 64  # tokens per page, as the engines' MLA caches (and kernels/mla_decode's tuning) use


@dataclass
class KDAState:
    conv: torch.Tensor  # [B, 3*H*K, W-1] pre-conv projections, oldest first, zeros before a request's first token
    recurrent: torch.Tensor  # [B, H, K, V] fp32


class MLAState:
    """The latents of B requests in a paged pool, the layout `dayone.kernels.mla_decode` reads:
    pool [num_pages, page_size, width], page_table [B, max_pages] int32 (token t of request b sits in page
    page_table[b, t // page_size], slot t % page_size), seq_lens [B] int32.

    Pages are handed out on demand, so requests' pages interleave in the pool as in an engine. The pool and the
    table grow by doubling (whole pages, amortised O(1) per token); a token written within the capacity moves
    nothing, so a decode step costs one row written in place, whatever the context length.
    """

    def __init__(
        self,
        batch_size: int,
        width: int,
        dtype: torch.dtype,
        device=None,
        page_size: int = PAGE_SIZE,
        capacity_tokens: int = 0,
    ) -> None:
        """capacity_tokens: tokens per request to reserve up front (pool and table sized for them, no growth)."""
        self.page_size = page_size
        pages_each = max(1, -(-capacity_tokens // page_size))
        self.pool = torch.zeros(batch_size * pages_each, page_size, width, dtype=dtype, device=device)
        self.page_table = torch.zeros(batch_size, pages_each, dtype=torch.int32, device=device)
        self.seq_lens = torch.zeros(batch_size, dtype=torch.int32, device=device)
        self.lengths = [0] * batch_size  # host copy of seq_lens
        self.owned = [0] * batch_size  # pages of request b: page_table[b, :owned[b]]
        self.used_pages = 0  # pool[:used_pages] is handed out
        self.growths = 0  # pool reallocations so far (each doubles it)

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    def reserve(self, request: int, tokens: int) -> None:
        """Make room for `tokens` tokens of `request` in all (allocating whole pages, growing by doubling)."""
        need = -(-tokens // self.page_size)
        extra = need - self.owned[request]
        if extra <= 0:
            return
        if self.used_pages + extra > self.pool.shape[0]:
            grown = self.pool.new_zeros(max(2 * self.pool.shape[0], self.used_pages + extra), *self.pool.shape[1:])
            grown[: self.used_pages] = self.pool[: self.used_pages]
            self.pool, self.growths = grown, self.growths + 1
        if need > self.page_table.shape[1]:
            table = self.page_table.new_zeros(self.batch_size, max(2 * self.page_table.shape[1], need))
            table[:, : self.page_table.shape[1]] = self.page_table
            self.page_table = table
        new = torch.arange(self.used_pages, self.used_pages + extra, dtype=torch.int32, device=self.pool.device)
        self.page_table[request, self.owned[request] : need] = new
        self.used_pages += extra
        self.owned[request] = need

    def append(self, request: int, rows: torch.Tensor) -> None:
        """Write rows [n, width] after the tokens of `request` (a prefill chunk)."""
        start, n = self.lengths[request], rows.shape[0]
        self.reserve(request, start + n)
        positions = torch.arange(start, start + n, device=self.pool.device)
        pages = self.page_table[request, positions // self.page_size].long()
        self.pool[pages, positions % self.page_size] = rows.to(self.pool.dtype)
        self.lengths[request] += n
        self.seq_lens[request] += n

    def append_step(self, rows: torch.Tensor) -> None:
        """One new token per request, rows [B, width], written in place (a decode step)."""
        for b, length in enumerate(self.lengths):
            if length % self.page_size == 0:  # the request's pages are full: one more (or none, if reserved)
                self.reserve(b, length + 1)
        positions = self.seq_lens.long()
        pages = self.page_table.gather(1, (positions // self.page_size)[:, None])[:, 0].long()
        self.pool[pages, positions % self.page_size] = rows.to(self.pool.dtype)
        self.seq_lens += 1
        self.lengths = [n + 1 for n in self.lengths]

    def tokens(self, request: int) -> torch.Tensor:
        """The cached rows [length, width] of `request`, in token order (a gathered copy)."""
        return gather_request_tokens(self.pool, self.page_table, request, self.lengths[request])


@dataclass
class ModelCache:
    """lengths[b]: tokens of request b seen so far; layers[i]: the state of layer i's attention."""

    lengths: list[int]
    layers: list[KDAState | MLAState] = field(default_factory=list)

    @property
    def batch_size(self) -> int:
        return len(self.lengths)
