"""One tier of the model run part by part (embedding, layer i, head): each part loads, runs and is freed, so no
more than one part's weights is resident. Optionally checks that each part reloads bitwise (`reload_check`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from dayone.adapters.model import Capture, SpecModel, WeightLoader
from dayone.adapters.model.attn_residual import Stream
from dayone.adapters.model.batch import Batch
from dayone.adapters.model.config import Tier
from dayone.adapters.model.module import SpecModule
from dayone.spec.schema import ModelSpec
from dayone.validate.source import ShardReader

NOISE_SEED = 12345


def return_freed_memory_promptly() -> None:
    """Have glibc map every large tensor on its own, so freeing a part returns its memory to the system.

    glibc raises its mmap threshold (up to 32 MB) each time a mapped block is freed; tensors under it then come
    from the heap, where fragmentation keeps freed ones from the system and RSS creeps by most of a layer per
    layer (measured). A fixed 1 MB threshold (M_MMAP_THRESHOLD) stops that. Elsewhere (not glibc): nothing to do.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError, TypeError):
        pass


def stream_tensors(stream: Stream) -> list[torch.Tensor]:
    return [stream.prefix, *stream.bank]


def _outputs(value) -> list[torch.Tensor]:
    return stream_tensors(value) if isinstance(value, Stream) else [value]


class StreamedModel:
    """A SpecModel of `tier` built on the meta device; `embed`, `layer(i)` and `head` run one part each.

    The model's state between parts is `self.stream` (the packed residual state). `tier`: a tier's name, or a Tier
    (the noise floor runs the reference tier's arithmetic in bf16)."""

    def __init__(
        self,
        spec: ModelSpec,
        tier: str | Tier,
        reader: ShardReader,
        manifest,
        device: torch.device,
        kernels: str = "auto",
    ) -> None:
        self.spec, self.tier, self.reader, self.device = spec, tier, reader, device
        return_freed_memory_promptly()
        self.model = SpecModel(spec, tier, device="meta", kernels=kernels)
        self.loader = WeightLoader(spec, reader, manifest, device=device)
        self.stream: Stream | None = None
        self.batch: Batch | None = None
        self.reload: list[dict] = []  # one entry per reload-checked part, until `drain_reload`

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of this tier's activations (and of its residual state)."""
        return self.model.tier.dtype

    def drain_reload(self) -> list[dict]:
        entries, self.reload = self.reload, []
        return entries

    # ----- parts
    def embed(self, ids: torch.Tensor, capture: Capture | None = None, reload_check: bool = False) -> None:
        B, T = ids.shape  # equal-length sequences, packed request after request
        self._embed(ids.reshape(-1), Batch((T,) * B, (0,) * B), capture, reload_check)

    def embed_requests(self, requests: list[list[int]]) -> None:
        """Requests of any lengths, packed token after token as an engine batches them (self.batch.spans() says
        where each one's rows are): every later part runs them all at once."""
        ids = torch.tensor([token for request in requests for token in request], dtype=torch.int64)
        self._embed(ids, Batch(tuple(map(len, requests)), (0,) * len(requests)), None, False)

    def _embed(self, packed: torch.Tensor, batch: Batch, capture: Capture | None, reload_check: bool) -> None:
        self.batch = batch
        packed = packed.to(self.device)
        part = self.model.embed_tokens
        self.stream, _ = self._run("embed", part, lambda: self.loader.load_embedding(self.model),
                                   lambda cap: self.model.embed(packed, cap), capture, reload_check)  # fmt: skip
        self._free(part)

    def layer(self, i: int, capture: Capture | None = None, reload_check: bool = False, extra=()) -> list[Stream]:
        """Run layer i on this model's stream; `extra`: (input Stream, Capture) pairs the loaded layer also runs on
        (the reference's input state, for layer-local comparisons; a second state of this tier carried end to end,
        e.g. with its own routing). Returns the extra runs' output states, in order."""
        part, stream_in, batch = self.model.layers[i], self.stream, self.batch
        assert stream_in is not None and batch is not None
        routes = capture.routes if capture is not None else {}
        self.stream, outputs = self._run(
            f"layers.{i}", part, lambda: self.loader.load_layer(self.model, i),
            lambda cap: part(stream_in, batch, None, cap if cap is not None else Capture("-", routes=routes)),
            capture, reload_check,
            [lambda s=s, c=c: part(self.cast(s), batch, None, c) for s, c in extra],
        )  # fmt: skip
        self._free(part)
        return outputs

    def cast(self, stream: Stream) -> Stream:
        """Another side's residual state in this tier's dtype and on its device."""
        dtype = self.model.tier.dtype
        return Stream(stream.prefix.to(self.device, dtype), [b.to(self.device, dtype) for b in stream.bank])

    def head(self, capture: Capture | None = None, reload_check: bool = False, extra=()) -> torch.Tensor:
        """Runs the head; returns logits [N, vocab] fp32. `extra` as for `layer`."""
        stream = self.stream
        assert stream is not None
        tied = self.spec.tie_word_embeddings
        parts = [self.model.head, self.model.embed_tokens] if tied else [self.model.head]

        def load() -> None:
            self.loader.load_head(self.model)
            if tied:
                self.loader.load_embedding(self.model)

        def weight() -> torch.Tensor:  # read after loading: the buffer is replaced when the part materialises
            return self.model.embed_tokens.weight

        logits, _ = self._run("head", parts, load, lambda cap: self.model.head(stream, weight(), cap), capture,
                           reload_check, [lambda s=s, c=c: self.model.head(self.cast(s), weight(), c) for s, c in extra])  # fmt: skip
        for part in parts:
            self._free(part)
        return logits

    # ----- machinery
    def _run(self, name: str, parts, load: Callable[[], None], run: Callable, capture, reload_check: bool, extra=()):
        """Load `parts`, run them (and each of `extra`), reload-check; returns (first output, extra outputs)."""
        parts = parts if isinstance(parts, list) else [parts]
        with torch.inference_mode():
            load()
            self.reader.release()  # the weights are copied in: no shard mapping is kept while the part runs
            first = run(capture)
            outputs = [fn() for fn in extra]
            if reload_check:
                noised = self._noise(parts)
                changed = _outputs(run(None))
                load()
                self.reader.release()
                again = _outputs(run(None))
                expected = _outputs(first)
                self.reload.append({
                    "part": name,
                    "tensors": noised,
                    "identical": all(torch.equal(a, b) for a, b in zip(again, expected, strict=True)),
                    "noise_changed_output": not all(torch.equal(a, b) for a, b in zip(changed, expected, strict=True)),
                })  # fmt: skip
        return first, outputs

    @staticmethod
    def _noise(parts: list[SpecModule]) -> int:
        """Overwrite every weight of `parts` with noise and rebuild derived tensors from it; returns the count."""
        gen = torch.Generator().manual_seed(NOISE_SEED)
        count = 0
        for part in parts:
            for buf in part.state_dict().values():
                # in place: no full-size temporary beside a layer's largest weight (MXFP4 bytes: random bytes)
                buf.normal_(generator=gen) if buf.is_floating_point() else buf.random_(0, 256, generator=gen)
                count += 1
            part.refresh_derived()
        return count

    @staticmethod
    def _free(part: SpecModule) -> None:
        part.to_empty(device="meta")  # weights and derived tensors alike; the next load materialises them again
