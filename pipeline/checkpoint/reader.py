"""A checkpoint on disk: config.json, the shard index and every shard's header; tensors are read lazily.

Opening a checkpoint reads headers only. Files are trusted only inside the checkpoint folder: index entries that
are absolute, climb out with '..', or resolve through a symlink to somewhere outside are refused. Pickle checkpoints
(.bin/.pt/.pth) can run code when loaded and are refused unless the caller passes allow_pickle=True.
"""

from __future__ import annotations

import mmap
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath

from dayone.checkpoint.names import check_name, check_names
from dayone.checkpoint.safetensors_header import ShardHeader, TensorInfo, read_header
from dayone.core import untrusted_json
from dayone.core.errors import InputError

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
# Sizes refused from the file's size, unread: a 200 MB config.json took 23 s and 1.2 GB to parse. Real configs are a
# few KiB (multimodal ones tens); the K3 index maps ~500k names in 60 MB.
MAX_CONFIG_BYTES = 16 << 20
MAX_INDEX_BYTES = 1 << 30


@dataclass(eq=False)
class Checkpoint:
    """What a checkpoint folder holds: its config, its shard files (paths already checked), and, read on first use,
    every shard's checked header. `tensors` maps every tensor name to its TensorInfo (file, dtype, shape)."""

    root: Path
    config: dict
    # Shard file names, in order, each resolved inside the checkpoint folder: the index's own, or (files_inferred)
    # those its shard naming implies, until the index is counted or the header scan proves it. Read `files`, which
    # is always the index's own; only the scan that proves the index reads the guess.
    shard_files: list[str]
    source: str = ""  # what the user named: a folder, or repo@revision
    trust_root: Path | None = None  # files may resolve anywhere under this (the HF cache repo folder)
    index_path: Path | None = None
    counted: dict[str, int] | None = None  # tensors per file as the index says, once known (see index_counts)
    # `shard_files` inferred from the index's shard naming (_named_sequence), not yet checked against the index.
    files_inferred: bool = False
    pickle_files: list[str] = field(default_factory=list)
    pickle_tensors: dict[str, TensorInfo] = field(default_factory=dict)
    # safetensors handles by shard file, opened on first read and kept: opening one parses the shard's whole header,
    # a third of the tiny K3's 7,044 entries, 1.7 ms that a read per tensor paid again each time (14 s of
    # conformance's 14.6 s judging one world size).
    _open_shards: dict = field(default_factory=dict, init=False, repr=False)

    @property
    def files(self) -> list[str]:
        """The shard files the index lists (counted first where they were only inferred from its naming: an index
        may also name a shard outside the numbered sequence)."""
        if self.files_inferred:
            self.index_counts  # noqa: B018 - counting makes shard_files the index's own
        return self.shard_files

    @property
    def index_counts(self) -> dict[str, int] | None:
        """Tensors per file as the index says (None without an index), counted on first use: 0.2 s for the K3
        index, which `integrate inspect` does not pay where its scan proves the index (dayone.checkpoint.scan
        calls `index_proven`). Where `shard_files` were inferred and the index names others, they become the
        index's own, each checked as at open (a file it names that is missing or outside the folder is an InputError)."""
        if self.counted is None and self.index_path is not None:
            self.counted = _index_file_counts(self.index_path)
            listed = sorted(self.counted)
            if self.files_inferred and listed != self.shard_files:
                check_members(self.root, listed, f"{self.source}/{INDEX_NAME}", self.source, self.trust_root)
                self.shard_files = listed
            self.files_inferred = False
        return self.counted

    def index_proven(self, counts: dict[str, int]) -> None:
        """The header scan proved that the index lists exactly `counts` tensors in each of `files` and nothing else."""
        self.counted, self.files_inferred = counts, False

    @cached_property
    def shards(self) -> dict[str, ShardHeader]:
        """Every shard header, checked, and checked against each other and the index."""
        shards = {file: read_header(self.root / file) for file in self.files}
        names = set()
        for header in shards.values():
            names.update(header.entries)
        if len(names) != sum(len(header.entries) for header in shards.values()):
            _name_duplicate(shards, self.source)
        if self.index_counts is not None and any(len(shards[f].entries) != n for f, n in self.index_counts.items()):
            _explain_index_mismatch(self.index_path, shards, self.source)
        return shards

    def has_tensor(self, name: str) -> bool:
        """Whether the checkpoint holds `name`, answered from the index text when there is one (no header read)."""
        if self.index_path is not None:
            return _file_holds(self.index_path, f'"{name}"'.encode())
        return name in self.names()

    @cached_property
    def tensors(self) -> dict[str, TensorInfo]:
        """Every tensor name -> TensorInfo (file, dtype, shape, byte range)."""
        if self.pickle_files:
            return self.pickle_tensors
        merged: dict[str, TensorInfo] = {}
        for header in self.shards.values():
            merged.update(header.tensors)
        return merged

    def names(self) -> set[str]:
        names: set[str] = set()
        for header in self.shards.values():
            names.update(header.entries)
        return names or set(self.pickle_tensors)

    @property
    def nbytes(self) -> int:
        return sum(info.end - info.begin for info in self.tensors.values())

    def read(self, name: str):
        """One tensor as a torch.Tensor (reads only its bytes), scanned for NaN and Inf as it is read."""
        import torch
        from dayone.checkpoint.finite import check_finite
        from safetensors import safe_open

        try:
            file = self.tensors[name].file
        except KeyError:
            raise InputError(f"{self.source or self.root}: no tensor {name!r}") from None
        if file.endswith(PICKLE_SUFFIXES):
            return self._pickle_state(file)[name]
        if file not in self._open_shards:
            self._open_shards[file] = safe_open(self.root / file, framework="pt")
        tensor = self._open_shards[file].get_tensor(name)
        assert isinstance(tensor, torch.Tensor)
        return check_finite(tensor, name, f"{self.source or self.root}/{file}")

    def _pickle_state(self, file: str) -> dict:
        import torch

        # Only reachable when the user passed allow_pickle; weights_only still refuses arbitrary objects.
        return torch.load(self.root / file, map_location="cpu", weights_only=True, mmap=True)


def _file_holds(path: Path, needle: bytes) -> bool:
    """Whether the file's bytes hold `needle`, searched in place (a K3 index is 60 MB: no copy of it is made)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return view.find(needle) >= 0
    except (OSError, ValueError):  # an empty file cannot be mapped
        return needle in path.read_bytes()


class TensorNames:
    """`name in TensorNames(checkpoint)`: membership without reading every header (derive_spec's naming probes)."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.checkpoint.has_tensor(name)


def safe_member(root: Path, relative: str, where: str, trust_root: Path | None = None) -> Path:
    """root/relative, refusing names no writer produces (control characters, NUL, lone surrogates, over 255
    characters), absolute paths, '..' and symlinks that lead outside root (or trust_root)."""
    check_name(relative, where, "file name")
    pure = PurePosixPath(relative)
    if pure.is_absolute() or relative.startswith(("/", "\\")) or (len(relative) > 1 and relative[1] == ":"):
        raise InputError(f"{where}: file {relative!r} is an absolute path; checkpoint files must stay in the folder")
    if ".." in pure.parts or "\\" in relative:
        raise InputError(f"{where}: file {relative!r} climbs out of the checkpoint folder")
    candidate = root / pure
    real = Path(os.path.realpath(candidate))
    fence = Path(os.path.realpath(trust_root or root))
    if real != fence and fence not in real.parents:
        raise InputError(f"{where}: file {relative!r} resolves to {real}, outside the checkpoint folder")
    return candidate


def open_local(
    root: Path, allow_pickle: bool = False, source: str = "", trust_root: Path | None = None, read_headers: bool = True
) -> Checkpoint:
    """Open a checkpoint folder: config.json, the index (if sharded), the shard paths, and (unless read_headers is
    False, for callers that scan headers themselves) every shard header."""
    where = source or str(root)
    if not root.is_dir():
        raise InputError(f"{where}: not a folder")
    config = read_config(safe_member(root, "config.json", where, trust_root))
    index_path = root / INDEX_NAME
    inferred = False
    if index_path.is_file():
        safe_member(root, INDEX_NAME, where, trust_root)  # a link to a file outside the folder is not read
        _bounded(index_path, MAX_INDEX_BYTES)
        index_counts = None
        files = _named_sequence(index_path)
        inferred = files is not None and all((root / file).is_file() for file in files)
        if not inferred:
            index_counts = _index_file_counts(index_path)
            files = sorted(index_counts)
    elif (root / SINGLE_NAME).is_file():
        index_counts, files = None, [SINGLE_NAME]
    else:
        singles = sorted(p.name for p in root.glob("*.safetensors"))
        pickles = sorted(p.name for p in root.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if len(singles) == 1:
            index_counts, files = None, singles
        elif pickles:
            if not allow_pickle:
                raise InputError(
                    f"{where}: only pickle weights ({', '.join(pickles[:3])}); loading pickle can run "
                    "code, pass --allow-pickle if you trust this checkpoint"
                )
            return _open_pickle(root, config, pickles, where, trust_root)
        else:
            raise InputError(f"{where}: no {INDEX_NAME}, no {SINGLE_NAME} and no other weights")

    indexed = index_counts is not None or inferred
    check_members(root, files, f"{where}/{INDEX_NAME}" if indexed else where, where, trust_root)
    checkpoint = Checkpoint(
        root,
        config,
        files,
        source=where,
        trust_root=trust_root,
        index_path=index_path if indexed else None,
        counted=index_counts,
        files_inferred=inferred,
    )
    if read_headers:
        checkpoint.shards  # noqa: B018 - reading them is the check
    return checkpoint


def check_members(root: Path, files: list[str], listing: str, where: str, trust_root: Path | None) -> None:
    """Every file (`listing` names them: the index, or the folder) is inside the folder (or trust_root) and exists."""
    for file in files:
        if not safe_member(root, file, listing, trust_root).is_file():
            raise InputError(f"{where}: {INDEX_NAME} names {file!r}, which does not exist")


def _named_sequence(path: Path) -> list[str] | None:
    """The shard files an index's naming implies, from its first and last entries alone: where both name files of
    one sequence as Hugging Face names shards (`model-00001-of-00096.safetensors`, huggingface_hub's and dayone's
    writers), every file of that sequence; None otherwise. Only a guess at the files to scan: the scan proves the
    index lists exactly these (dayone.checkpoint.scan), or the index is counted and its own files taken."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 14)
            f.seek(max(0, f.seek(0, os.SEEK_END) - (1 << 12)))
            tail = f.read()
    except OSError:
        return None
    first, last = _FIRST_VALUE.search(head), _LAST_VALUE.search(tail)
    if first is None or last is None:
        return None
    try:
        named = [_SHARD_NAME.fullmatch(m.group(1).decode()) for m in (first, last)]
    except UnicodeDecodeError:
        return None
    if None in named or named[0].group("prefix", "n", "ext") != named[1].group("prefix", "n", "ext"):
        return None
    prefix, n, ext = named[0].group("prefix", "n", "ext")
    width, count = len(named[0].group("i")), int(n)
    if not 0 < count <= _MOST_SHARDS or any(len(m.group("i")) != width for m in named):
        return None
    return [f"{prefix}-{i:0{width}d}-of-{n}{ext}" for i in range(1, count + 1)]


_FIRST_VALUE = re.compile(
    rb'"weight_map"[ \t\n\r]*+:[ \t\n\r]*+\{[ \t\n\r]*+"[^"\\]*+"[ \t\n\r]*+:[ \t\n\r]*+"([^"\\]*+)"'
)
_LAST_VALUE = re.compile(rb'"([^"\\]*+)"[ \t\n\r]*+\}[ \t\n\r]*+\}[ \t\n\r]*+\Z')
_SHARD_NAME = re.compile(r"(?P<prefix>[^/\\]*)-(?P<i>[0-9]+)-of-(?P<n>[0-9]+)(?P<ext>\.safetensors)")
_MOST_SHARDS = 100_000  # a guess beyond this is no guess: count the index


def _name_duplicate(shards: dict[str, ShardHeader], where: str) -> None:
    seen: dict[str, str] = {}
    for file, header in shards.items():
        for name in header.entries:
            if name in seen:
                raise InputError(f"{where}: tensor {name!r} is in both {seen[name]} and {file}")
            seen[name] = file


def _index_file_counts(path: Path) -> dict[str, int]:
    """How many tensors the index places in each file.

    A K3 index maps ~500k names; a regex over its text counts them in a fraction of json.loads' time. Anything the
    regex cannot vouch for (escaped quotes, other value types) falls back to the full parse.
    """
    _bounded(path, MAX_INDEX_BYTES)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    start = raw.find(b'"weight_map"')
    open_brace = raw.find(b"{", start) if start >= 0 else -1
    close_brace = raw.find(b"}", open_brace) if open_brace >= 0 else -1
    # Positions into the 60 MB text, never slices of it: each copy costs as much as the count itself.
    if close_brace > open_brace + 1 and raw.find(b"\\", open_brace, close_brace) < 0:
        values = _INDEX_VALUE.findall(raw, open_brace, close_brace)
        if values and len(values) == raw.count(b",", open_brace, close_brace) + 1:  # only "name": "file" pairs
            try:
                return {file.decode(): n for file, n in Counter(values).items()}
            except UnicodeDecodeError:
                pass
    return dict(Counter(_read_index(path).values()))


# Possessive (*+): the same matches (each class is disjoint from what follows it), no backtracking state kept.
_INDEX_VALUE = re.compile(rb'"[^"]*+"\s*+:\s*+"([^"]*+)"')


def _explain_index_mismatch(index_path: Path, shards: dict[str, ShardHeader], where: str) -> None:
    """The quick per-file counts disagree with the headers: parse the index fully and name the tensor that differs."""
    name_index_disagreement(_read_index(index_path), shards, where)
    # The full parse found them consistent: the quick count was fooled by an unusual name; nothing is wrong.


def name_index_disagreement(weight_map: dict[str, str], shards: dict[str, ShardHeader], where: str) -> None:
    """Raise the InputError naming the first tensor where the headers and the index's weight_map differ; return
    when they agree exactly."""
    tensors = {name: file for file, header in shards.items() for name in header.entries}
    for name, file in weight_map.items():
        hit = tensors.get(name)
        if hit is None:
            raise InputError(f"{where}/{file}: header lacks tensor {name!r} that {INDEX_NAME} lists there")
        if hit != file:
            raise InputError(f"{where}/{hit}: tensor {name!r} is not where {INDEX_NAME} says ({file})")
    for name, file in tensors.items():
        if name not in weight_map:
            raise InputError(f"{where}/{file}: tensor {name!r} is not listed in {INDEX_NAME}")


def read_config(path: Path) -> dict:
    if not path.is_file():
        raise InputError(f"{path}: missing (every checkpoint needs its config.json)")
    config = untrusted_json.read(path, max_bytes=MAX_CONFIG_BYTES)
    if not isinstance(config, dict):
        raise InputError(f"{path}: expected a JSON object")
    return config


def _read_index(path: Path) -> dict[str, str]:
    index = untrusted_json.read(path, max_bytes=MAX_INDEX_BYTES)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise InputError(f"{path}: weight_map must map tensor names to file names")
    if not weight_map:
        raise InputError(f"{path}: weight_map is empty (a corrupt or unfinished index)")
    check_names(weight_map, str(path))
    return weight_map


def _bounded(path: Path, limit: int) -> None:
    """InputError when the file at path is larger than limit, from its size alone."""
    try:
        size = path.stat().st_size
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    if size > limit:
        raise InputError(
            f"{path}: {size} bytes, more than the {limit >> 20} MiB an index or config can be; refused unread"
        )


def _open_pickle(root: Path, config: dict, files: list[str], where: str, trust_root: Path | None) -> Checkpoint:
    import torch

    tensors: dict[str, TensorInfo] = {}
    dtype_names = {
        torch.bfloat16: "BF16",
        torch.float16: "F16",
        torch.float32: "F32",
        torch.uint8: "U8",
        torch.int8: "I8",
        torch.int32: "I32",
        torch.int64: "I64",
        torch.float64: "F64",
        torch.bool: "BOOL",
    }
    for file in files:
        path = safe_member(root, file, where, trust_root)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception as err:  # noqa: BLE001 - any unpickling failure is bad input
            raise InputError(f"{path}: cannot load pickle weights: {str(err).splitlines()[0]}") from None
        for name, t in state.items():
            if t.dtype not in dtype_names:
                raise InputError(f"{path}: tensor {name!r}: unsupported dtype {t.dtype}")
            nbytes = t.numel() * t.element_size()
            tensors[name] = TensorInfo(dtype_names[t.dtype], tuple(t.shape), 0, nbytes, file)
    return Checkpoint(root, config, [], source=where, trust_root=trust_root, pickle_files=files, pickle_tensors=tensors)
