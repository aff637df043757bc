"""What a validation reads: the checkpoint (headers checked against its spec before any weight is read) and a
tensor getter that keeps a large checkpoint's shards open only while one part of the model loads."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from dayone.checkpoint import check_coverage
from dayone.checkpoint.finite import check_finite
from dayone.checkpoint.reader import Checkpoint
from dayone.core.errors import InputError
from dayone.spec.manifest import Manifest, build_manifest
from dayone.spec.schema import ModelSpec

# Checkpoints up to this size keep their shards open from one part to the next: mapped whole they cost at most
# their size, while reopening a shard parses its header again. The README run's 93-layer K3 (8 MB in three shards of
# 2,350 tensors) reopened them for each of its 95 parts in each pass: 4.4 s of its 61 s of CPU in-process.
KEEP_OPEN_BYTES = 256 << 20


class ShardReader:
    """get(name) -> tensor, reading only that tensor's bytes. Shards stay open until `release()`, which the runner
    calls after each part (a layer, the embedding, the head), so no mapping of a large checkpoint outlives the part
    it served (a small one's shards stay open: KEEP_OPEN_BYTES)."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self._open: dict[str, object] = {}
        self._keep_open = checkpoint.nbytes <= KEEP_OPEN_BYTES

    def __call__(self, name: str) -> torch.Tensor:
        from safetensors import SafetensorError, safe_open

        info = self.checkpoint.tensors.get(name)
        if info is None:
            raise KeyError(name)
        if info.file not in self._open:
            path = self.checkpoint.root / info.file
            try:
                self._open[info.file] = safe_open(path, framework="pt")
            except (SafetensorError, OSError) as err:  # the library refused what the header check let through
                raise InputError(f"{path}: {str(err).splitlines()[0]}") from None
        tensor = self._open[info.file].get_tensor(name)  # type: ignore[attr-defined]
        return check_finite(tensor, name, str(self.checkpoint.root / info.file))  # before a forward, not after

    def release(self) -> None:
        if not self._keep_open:
            self._open.clear()


@dataclass
class Source:
    checkpoint: Checkpoint
    spec: ModelSpec
    manifest: Manifest
    # why validation did not take the reference it would by model type (set by resolve_reference), or None
    reference_note: str | None = None

    @property
    def where(self) -> str:
        return self.checkpoint.source or str(self.checkpoint.root)


def open_source(checkpoint: Checkpoint, spec: ModelSpec) -> Source:
    """An open checkpoint and its spec, as the caller's entry parsed them (a command opens CHECKPOINT and takes its
    spec from --spec or config.json once; `integrate run` hands over its own); a checkpoint that does not hold exactly
    the spec's tensors (names, shapes, dtypes) is bad input, named by its first problem."""
    manifest = build_manifest(spec)
    coverage = check_coverage(manifest, checkpoint)
    if not coverage.ok and not (coverage.missing_count or coverage.mismatched_count):
        # transformers' save_pretrained writes zero-sized tensors for absent parts (n_shared_experts = 0 gives
        # shared_experts weights of shape [0, D]): they hold nothing to validate, so they are not a mismatch.
        expected = manifest.expected()
        extra = [info for name, info in checkpoint.tensors.items() if name not in expected]
        if all(0 in info.shape for info in extra):
            return Source(checkpoint, spec, manifest)
    if not coverage.ok:
        where = checkpoint.source or str(checkpoint.root)
        for label, items in (
            ("wrong shape", coverage.wrong_shape),
            ("wrong dtype", coverage.wrong_dtype),
            ("missing", coverage.missing),
            ("not in the spec", coverage.unexpected),
        ):
            if items:
                more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
                raise InputError(f"{where}: does not match spec {spec.name}: {label}: {items[0]}{more}")
    return Source(checkpoint, spec, manifest)
