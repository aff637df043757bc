"""The executable model a ModelSpec describes: embeddings, the layer stack, the head; two tiers, one module tree.

    model = SpecModel(spec, tier="reference")            # or "fast"
    WeightLoader(spec, get).load(model)                  # get(name) -> checkpoint tensor
    logits = model(input_ids)                            # [B, T] (+ lengths) or a list of 1-D id tensors
    cache = model.new_cache(B); model.prefill(ids, lengths, cache); model.decode(next_ids, cache)
    cap = Capture("layers.*.attn_out"); model(ids, capture=cap); cap["layers.3.attn_out"]

The parts load and run one at a time (`embed_tokens`, `layers[i]`, `head`), so a caller can stream a model larger
than memory: `forward_streaming` loads a layer, runs it and frees it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from dayone.adapters.model.attn_residual import ResidualMix, Stream
from dayone.adapters.model.batch import Batch
from dayone.adapters.model.cache import ModelCache
from dayone.adapters.model.capture import Capture, record
from dayone.adapters.model.config import Tier, get_tier
from dayone.adapters.model.layer import DecoderLayer
from dayone.adapters.model.module import SpecModule
from dayone.adapters.model.norms import rms_norm
from dayone.adapters.model.weights import bind_dtypes, canonical_map
from dayone.core.errors import InputError
from dayone.core.vocabulary import Point
from dayone.spec.schema import ModelSpec
from torch import nn


class Embedding(SpecModule):
    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        self.add_weight("weight", (spec.vocab_size, spec.hidden_size), "embed", device)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)


class Head(SpecModule):
    """Final aggregate (attention residuals), final norm, lm_head (or the tied embedding)."""

    def __init__(self, spec: ModelSpec, tier: Tier, device=None) -> None:
        super().__init__(tier)
        D, self.eps = spec.hidden_size, spec.norm_eps
        self.output_res = (
            ResidualMix(D, "output_res", spec.norm_eps, tier, device) if spec.residual.kind == "attention" else None
        )
        self.add_weight("norm", (D,), "final_norm", device)
        self.tied = spec.tie_word_embeddings
        if not self.tied:
            self.add_weight("lm_head", (spec.vocab_size, D), "lm_head", device)

    def forward(self, stream: Stream, embed: torch.Tensor, capture: Capture | None = None) -> torch.Tensor:
        if self.output_res is not None:
            h = self.output_res.then_norm(stream, self.norm, Point.OUTPUT_RES, capture)
        else:
            h = rms_norm(stream.prefix, self.norm, self.eps)
        record(capture, Point.FINAL_NORM, h)
        logits = F.linear(h, embed if self.tied else self.lm_head).float()
        record(capture, Point.LOGITS, logits)
        return logits


class SpecModel(SpecModule):
    """The model of `spec` in `tier` ("reference": fp32, clear formulas; "fast": bf16, chunked KDA, batched experts).
    device="meta" builds it without memory (for streaming: layers materialise when loaded).
    kernels: the fast tier's backend switch, "auto" (default), "triton" or "torch" (see config.py)."""

    def __init__(
        self,
        spec: ModelSpec,
        tier: str | Tier = "reference",
        device: torch.device | str | None = None,
        kernels: str | None = None,
    ) -> None:
        tier = get_tier(tier, kernels)
        super().__init__(tier)
        self.spec = spec
        self.embed_tokens = Embedding(spec, tier, device)
        self.layers = nn.ModuleList(DecoderLayer(spec, layer, tier, device) for layer in spec.layers)
        self.head = Head(spec, tier, device)
        bind_dtypes(self, canonical_map(spec), spec.checkpoint.dtype)

    @property
    def device(self) -> torch.device:
        return self.embed_tokens.weight.device

    def backends(self) -> dict[str, str]:
        """Kernel function -> the implementation that ran it ("triton" | "torch"), over every call so far; empty for
        the reference tier (plain torch, no kernel functions)."""
        return dict(sorted(self.tier.ran.items()))

    # ----- inference state
    def new_cache(self, batch_size: int) -> ModelCache:
        """An empty cache for `batch_size` requests (request b is row b of every later call)."""
        return ModelCache([0] * batch_size, [layer.new_state(batch_size, self.device) for layer in self.layers])

    # ----- running
    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor | Sequence[torch.Tensor],
        lengths: torch.Tensor | Sequence[int] | None = None,
        cache: ModelCache | None = None,
        capture: Capture | None = None,
    ) -> torch.Tensor | list[torch.Tensor]:
        """Logits of every new token, fp32.

        input_ids: [B, T] left-aligned (request b holds its tokens in [b, :lengths[b]]; lengths default to T), or a
            list of B 1-D tensors. With a cache, these are the next tokens of the cache's B requests.
        Returns [B, T, vocab] (zeros past each length) for a tensor input, a list of [t_b, vocab] for a list.
        """
        ids, batch = self.pack(input_ids, lengths, cache)
        logits = self.forward_packed(ids, batch, cache, capture)
        return self._unpack(logits, batch, input_ids)

    def prefill(self, input_ids, lengths=None, cache: ModelCache | None = None, capture: Capture | None = None):
        """`forward` that fills `cache` (required); returns the logits of every prompt token."""
        if cache is None:
            raise ValueError("prefill needs a cache (model.new_cache(batch_size))")
        return self.forward(input_ids, lengths, cache, capture)

    def decode(self, next_ids: torch.Tensor, cache: ModelCache, capture: Capture | None = None) -> torch.Tensor:
        """One token per request: next_ids [B] -> logits [B, vocab]; advances the cache."""
        return self.forward(next_ids.view(-1, 1), None, cache, capture)[:, 0]

    def forward_packed(self, ids: torch.Tensor, batch: Batch, cache: ModelCache | None, capture: Capture | None):
        """ids [N] packed -> logits [N, vocab]; the three stages one after another."""
        stream = self.embed(ids, capture)
        for i, layer in enumerate(self.layers):
            stream = layer(stream, batch, cache.layers[i] if cache is not None else None, capture)
        return self.finish(stream, batch, cache, capture)

    def embed(self, ids: torch.Tensor, capture: Capture | None = None) -> Stream:
        x = self.embed_tokens(ids)
        record(capture, Point.EMBED, x)
        return Stream(x)

    def finish(self, stream: Stream, batch: Batch, cache: ModelCache | None, capture: Capture | None = None):
        if cache is not None:
            for b, n in enumerate(batch.seqlens):
                cache.lengths[b] += n
        return self.head(stream, self.embed_tokens.weight, capture)

    @torch.inference_mode()
    def forward_streaming(self, input_ids, loader, lengths=None, capture: Capture | None = None, free: bool = True):
        """`forward` (no cache) loading each layer just before it runs and freeing it after (free=True).

        loader: a `WeightLoader`; the model may be built on device="meta"."""
        loader.load_globals(self)
        ids, batch = self.pack(input_ids, lengths, None)
        stream = self.embed(ids, capture)
        for i, layer in enumerate(self.layers):
            loader.load_layer(self, i)
            stream = layer(stream, batch, None, capture)
            if free:
                layer.to_empty(device="meta")
        return self._unpack(self.finish(stream, batch, None, capture), batch, input_ids)

    # ----- batch layout
    def pack(self, input_ids, lengths=None, cache: ModelCache | None = None) -> tuple[torch.Tensor, Batch]:
        """Input ids as `forward` takes them -> (packed ids [N], Batch): the layout the per-part calls take."""
        if isinstance(input_ids, torch.Tensor):
            if input_ids.dim() != 2:
                raise InputError(
                    f"input_ids must be [B, T] or a list of 1-D tensors, got shape {list(input_ids.shape)}"
                )
            B, T = input_ids.shape
            seqlens = [T] * B if lengths is None else [int(n) for n in lengths]
            if len(seqlens) != B or any(not 0 <= n <= T for n in seqlens):
                raise InputError(f"lengths {seqlens} do not fit input_ids of shape [{B}, {T}]")
            ids = torch.cat([input_ids[b, :n] for b, n in enumerate(seqlens)]) if B else input_ids.view(-1)
        else:
            seqlens = [int(t.numel()) for t in input_ids]
            ids = torch.cat([t.view(-1) for t in input_ids]) if seqlens else torch.zeros(0, dtype=torch.long)
        if cache is not None and cache.batch_size != len(seqlens):
            raise InputError(f"the cache holds {cache.batch_size} requests, the input has {len(seqlens)}")
        past = tuple(cache.lengths) if cache is not None else (0,) * len(seqlens)
        return ids.to(self.device), Batch(tuple(seqlens), past)

    @staticmethod
    def _unpack(logits: torch.Tensor, batch: Batch, input_ids):
        rows = [logits[s : s + n] for s, n in zip(batch.starts, batch.seqlens)]
        if not isinstance(input_ids, torch.Tensor):
            return rows
        B, T = input_ids.shape
        out = logits.new_zeros(B, T, logits.shape[-1])
        for b, r in enumerate(rows):
            out[b, : r.shape[0]] = r
        return out
