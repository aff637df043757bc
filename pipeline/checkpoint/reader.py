"""A checkpoint on disk: config.json, the shard index and every shard's header; tensors are read lazily.

Opening a checkpoint reads headers only. Files are trusted only inside the checkpoint folder: index entries that
are absolute, climb out with '..', or resolve through a symlink to somewhere outside are refused. Pickle checkpoints
(.bin/.pt/.pth) can run code when loaded and are refused unless the caller passes allow_pickle=True.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from dayone.checkpoint.safetensors_header import ShardHeader, TensorInfo, read_header
from dayone.errors import InputError

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


@dataclass
class Checkpoint:
    """What a checkpoint folder holds. `tensors` maps every tensor name to (shard file name, TensorInfo)."""

    root: Path
    config: dict
    shards: dict[str, ShardHeader]
    tensors: dict[str, tuple[str, TensorInfo]]
    source: str = ""  # what the user named: a folder, or repo@revision
    trust_root: Path | None = None  # files may resolve anywhere under this (the HF cache repo folder)
    pickle_files: list[str] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(info.end - info.begin for _, info in self.tensors.values())

    def read(self, name: str):
        """One tensor as a torch.Tensor (reads only its bytes)."""
        import torch
        from safetensors import safe_open

        try:
            file, _ = self.tensors[name]
        except KeyError:
            raise InputError(f"{self.source or self.root}: no tensor {name!r}") from None
        if file.endswith(PICKLE_SUFFIXES):
            return self._pickle_state(file)[name]
        with safe_open(self.root / file, framework="pt") as f:
            tensor = f.get_tensor(name)
        assert isinstance(tensor, torch.Tensor)
        return tensor

    def _pickle_state(self, file: str) -> dict:
        import torch

        # Only reachable when the user passed allow_pickle; weights_only still refuses arbitrary objects.
        return torch.load(self.root / file, map_location="cpu", weights_only=True, mmap=True)


def safe_member(root: Path, relative: str, where: str, trust_root: Path | None = None) -> Path:
    """root/relative, refusing absolute paths, '..' and symlinks that lead outside root (or trust_root)."""
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


def open_local(root: Path, allow_pickle: bool = False, source: str = "", trust_root: Path | None = None) -> Checkpoint:
    """Open a checkpoint folder, reading config.json, the index (if sharded) and every shard header."""
    where = source or str(root)
    if not root.is_dir():
        raise InputError(f"{where}: not a folder")
    config = read_config(root / "config.json")
    index_path = root / INDEX_NAME
    if index_path.is_file():
        weight_map = _read_index(index_path)
        files = sorted(set(weight_map.values()))
    elif (root / SINGLE_NAME).is_file():
        weight_map, files = None, [SINGLE_NAME]
    else:
        singles = sorted(p.name for p in root.glob("*.safetensors"))
        pickles = sorted(p.name for p in root.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if len(singles) == 1:
            weight_map, files = None, singles
        elif pickles:
            if not allow_pickle:
                raise InputError(
                    f"{where}: only pickle weights ({', '.join(pickles[:3])}); loading pickle can run "
                    "code, pass --allow-pickle if you trust this checkpoint"
                )
            return _open_pickle(root, config, pickles, where, trust_root)
        else:
            raise InputError(f"{where}: no {INDEX_NAME}, no {SINGLE_NAME} and no other weights")

    shards: dict[str, ShardHeader] = {}
    for file in files:
        path = safe_member(root, file, f"{where}/{INDEX_NAME}" if weight_map else where, trust_root)
        if not path.is_file():
            raise InputError(f"{where}: {INDEX_NAME} names {file!r}, which does not exist")
        shards[file] = read_header(path)

    tensors: dict[str, tuple[str, TensorInfo]] = {}
    for file, header in shards.items():
        for name, info in header.tensors.items():
            if weight_map is not None and weight_map.get(name) != file:
                listed = weight_map.get(name)
                raise InputError(
                    f"{where}/{file}: tensor {name!r} is not where {INDEX_NAME} says "
                    f"({'not listed' if listed is None else listed})"
                )
            if name in tensors:
                raise InputError(f"{where}: tensor {name!r} is in both {tensors[name][0]} and {file}")
            tensors[name] = (file, info)
    if weight_map is not None:
        lost = [name for name in weight_map if name not in tensors]
        if lost:
            raise InputError(
                f"{where}/{weight_map[lost[0]]}: header lacks tensor {lost[0]!r} that {INDEX_NAME} "
                f"lists there" + (f" (and {len(lost) - 1} more)" if len(lost) > 1 else "")
            )
    return Checkpoint(root, config, shards, tensors, source=where, trust_root=trust_root)


def read_config(path: Path) -> dict:
    if not path.is_file():
        raise InputError(f"{path}: missing (every checkpoint needs its config.json)")
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read: {err}") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(config, dict):
        raise InputError(f"{path}: expected a JSON object")
    return config


def _read_index(path: Path) -> dict[str, str]:
    try:
        index = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not a readable JSON index: {err}") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise InputError(f"{path}: weight_map must map tensor names to file names")
    return weight_map


def _open_pickle(root: Path, config: dict, files: list[str], where: str, trust_root: Path | None) -> Checkpoint:
    import torch

    tensors: dict[str, tuple[str, TensorInfo]] = {}
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
            tensors[name] = (file, TensorInfo(dtype_names[t.dtype], tuple(t.shape), 0, nbytes))
    return Checkpoint(root, config, {}, tensors, source=where, trust_root=trust_root, pickle_files=files)
