"""The parts of an output file: each tensor's name, dtype, shape and where its bytes come from (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dayone.spec.manifest import Tensor


@dataclass(frozen=True, slots=True)
class Copy:
    """Bytes [begin, end) of a source file (absolute offsets), copied unchanged."""

    path: Path
    begin: int
    end: int

    @property
    def nbytes_in(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True, slots=True)
class Dequant:
    """An MXFP4 pair: weight_packed [rows, cols/2] at packed_begin of `path`, weight_scale [rows, cols/32] at
    scale_begin of `scale_path` (absolute offsets; usually the same file), written as BF16 [rows, cols]."""

    path: Path
    packed_begin: int
    scale_path: Path
    scale_begin: int
    rows: int
    packed_cols: int
    scale_cols: int

    @property
    def nbytes_in(self) -> int:
        return self.rows * (self.packed_cols + self.scale_cols)


@dataclass(frozen=True, slots=True)
class Piece:
    """One tensor of the output file and where its bytes come from."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    source: Copy | Dequant

    def as_tensor(self) -> Tensor:
        return Tensor(self.name, self.shape, self.dtype, "")
