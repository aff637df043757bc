"""What each output file of an MXFP4 -> BF16 conversion holds, planned from the source headers alone.

Every `X.weight_packed` + `X.weight_scale` pair (compressed-tensors mxfp4-pack-quantized, group 32) becomes
`X.weight` BF16 in the file that holds `X.weight_packed`, at the place of the pair's first tensor in that file's
data order (a scale stored in another file is read from there; sharded writers split pairs at shard boundaries).
Every other tensor is copied unchanged; the file's name and `__metadata__` are kept. Bad input is named by tensor:
a half pair, a pair whose shapes do not fit, an `X.weight` already there.
"""

from __future__ import annotations

from dayone.checkpoint.reader import Checkpoint
from dayone.convert.pieces import Copy, Dequant, Piece
from dayone.core.errors import InputError
from dayone.core.vocabulary import MXFP4_PARTS

PACKED = "." + MXFP4_PARTS["packed"]
SCALE = "." + MXFP4_PARTS["scale"]
GROUP_SIZE = 32  # one E8M0 scale byte per 32 elements (kernels/mxfp4/reference.py)


def owners(ckpt: Checkpoint) -> dict[str, str]:
    """Tensor name -> file, for every MXFP4 half (the only names a plan looks up across files)."""
    return {
        name: file for file, header in ckpt.shards.items() for name in header.entries if name.endswith((PACKED, SCALE))
    }


def plan_file(ckpt: Checkpoint, file: str, owner: dict[str, str] | None = None) -> list[Piece]:
    """The output tensors of `file`, in order, with their sources."""
    owner = owners(ckpt) if owner is None else owner
    header = ckpt.shards[file]
    where = f"{ckpt.source}/{file}"
    entries = header.entries
    ordered = sorted(entries, key=lambda name: entries[name]["data_offsets"][0])
    pieces: list[Piece] = []
    paired: set[str] = set()
    for name in ordered:
        entry = entries[name]
        if name.endswith((PACKED, SCALE)):
            base = name.rsplit(".", 1)[0]
            for have, want in ((base + PACKED, base + SCALE), (base + SCALE, base + PACKED)):
                if name == have and want not in owner:
                    raise InputError(f"{where}: tensor {have!r} has no twin {want!r}")
            if owner[base + PACKED] == file and base not in paired:  # written where its first tensor here was
                paired.add(base)
                pieces.append(_pair(ckpt, file, owner[base + SCALE], base))
            continue
        begin, end = entry["data_offsets"]
        copy = Copy(header.path, header.data_start + begin, header.data_start + end)
        pieces.append(Piece(name, entry["dtype"], tuple(entry["shape"]), copy))
    _no_clash(pieces, where)
    return pieces


def _pair(ckpt: Checkpoint, packed_file: str, scale_file: str, base: str) -> Piece:
    where = f"{ckpt.source}/{packed_file}"
    packed_header, scale_header = ckpt.shards[packed_file], ckpt.shards[scale_file]
    packed, scale = packed_header.entries[base + PACKED], scale_header.entries[base + SCALE]
    for name, entry in ((base + PACKED, packed), (base + SCALE, scale)):
        if entry["dtype"] != "U8" or len(entry["shape"]) != 2:
            raise InputError(f"{where}: tensor {name!r} is {entry['dtype']}{entry['shape']}, MXFP4 needs 2-D U8")
    rows, packed_cols = packed["shape"]
    if scale["shape"] != [rows, 2 * packed_cols // GROUP_SIZE] or (2 * packed_cols) % GROUP_SIZE:
        raise InputError(
            f"{where}: tensor {base + SCALE!r} has shape {scale['shape']}, {base + PACKED!r} "
            f"{packed['shape']} needs [{rows}, {2 * packed_cols // GROUP_SIZE}] (one scale per {GROUP_SIZE} columns)"
        )
    source = Dequant(
        packed_header.path,
        packed_header.data_start + packed["data_offsets"][0],
        scale_header.path,
        scale_header.data_start + scale["data_offsets"][0],
        rows,
        packed_cols,
        scale["shape"][1],
    )
    return Piece(base + ".weight", "BF16", (rows, 2 * packed_cols), source)


def _no_clash(pieces: list[Piece], where: str) -> None:
    seen: set[str] = set()
    for piece in pieces:
        if piece.name in seen:
            raise InputError(f"{where}: tensor {piece.name!r} exists both as MXFP4 and unquantized")
        seen.add(piece.name)


def count_pairs(pieces: list[Piece]) -> int:
    return sum(isinstance(p.source, Dequant) for p in pieces)
