"""Golden outputs: what a model produced on fixed tokens, in one safetensors file a vendor can ship with weights.

input_ids                 int64 [B, T]
logits                    fp32  [B, T, vocab]
logprobs                  fp32  [B, T, vocab]   (log_softmax of logits)
routes.layers.{i}.topk_ids int64 [B*T, k]        the experts each MoE layer chose (tokens packed request after
                                                request), so a candidate can replay the golden run's routing
metadata                  dayone_golden "1", tier, spec, model_type, vocab_size, dayone_version
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch
from dayone.core.atomic import refuse_special
from dayone.core.errors import InputError, as_os_error

FORMAT = "1"


def dayone_version() -> str:
    try:
        return version("dayone")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class Golden:
    path: Path
    input_ids: torch.Tensor
    logits: torch.Tensor
    logprobs: torch.Tensor
    metadata: dict[str, str]
    routes: dict[str, torch.Tensor]  # "layers.{i}.topk_ids" -> [B*T, k]

    @property
    def tier(self) -> str:
        return self.metadata.get("tier", "reference")


def write_golden(
    path: Path, input_ids: torch.Tensor, logits: torch.Tensor, metadata: dict[str, str], routes: dict | None = None
) -> None:
    """Write atomically (a temporary sibling, then a rename). routes: "layers.{i}.topk_ids" -> [B*T, k]."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    path = Path(path)
    refuse_special(path)  # the rename would replace a device node named as the output
    path.parent.mkdir(parents=True, exist_ok=True)
    logits = logits.float().contiguous()
    tensors = {
        "input_ids": input_ids.to(torch.int64).contiguous(),
        "logits": logits,
        "logprobs": torch.log_softmax(logits, -1).contiguous(),
        **{f"routes.{name}": ids.to(torch.int64).cpu().contiguous() for name, ids in (routes or {}).items()},
    }
    meta = {"format": "pt", "dayone_golden": FORMAT, "dayone_version": dayone_version(), **metadata}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        try:
            save_file(tensors, str(tmp), metadata=meta)
        except SafetensorError as err:  # a full disk: the OS's error is in its text
            raise as_os_error(err, path) from None
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_golden(path: Path, vocab_size: int) -> Golden:
    """Read and check a golden file against the checkpoint's vocabulary; any mismatch is one line naming the file."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such golden file")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            names = set(f.keys())
            missing = sorted({"input_ids", "logits", "logprobs"} - names)
            if missing:
                raise InputError(f"{path}: not a golden file (no {', '.join(missing)})")
            ids, logits, logprobs = (f.get_tensor(n) for n in ("input_ids", "logits", "logprobs"))
            routes = {n.removeprefix("routes."): f.get_tensor(n) for n in names if n.startswith("routes.")}
    except (SafetensorError, OSError) as err:
        raise InputError(f"{path}: not a readable safetensors file: {err}") from None
    if ids.dtype != torch.int64 or ids.dim() != 2 or ids.numel() == 0:
        raise InputError(f"{path}: input_ids must be int64 [B, T], got {str(ids.dtype)[6:]} {list(ids.shape)}")
    B, T = ids.shape
    for name, t in (("logits", logits), ("logprobs", logprobs)):
        if t.dtype != torch.float32 or t.dim() != 3 or tuple(t.shape[:2]) != (B, T):
            raise InputError(
                f"{path}: {name} must be float32 [{B}, {T}, vocab], got {str(t.dtype)[6:]} {list(t.shape)}"
            )
    if logits.shape[-1] != vocab_size or logprobs.shape[-1] != vocab_size:
        raise InputError(
            f"{path}: golden outputs for a vocabulary of {logits.shape[-1]}, the checkpoint's is {vocab_size}"
        )
    bad = (ids < 0) | (ids >= vocab_size)
    if bool(bad.any()):
        raise InputError(f"{path}: input_ids hold ids outside the vocabulary (0..{vocab_size - 1})")
    if not bool(torch.isfinite(logits).all()):
        raise InputError(f"{path}: logits contain NaN or Inf")
    for name, r in routes.items():
        if r.dtype != torch.int64 or r.dim() != 2 or r.shape[0] != B * T:
            raise InputError(
                f"{path}: routes.{name} must be int64 [{B * T}, k], got {str(r.dtype)[6:]} {list(r.shape)}"
            )
    return Golden(path, ids, logits, logprobs, dict(meta), routes)
