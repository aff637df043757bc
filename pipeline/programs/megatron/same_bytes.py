"""Tensors a program got back from a model (a miles weight sync, a bridge round trip) against the checkpoint's, byte
for byte: the only comparison that shows a transposed, re-split or re-rounded tensor."""

from __future__ import annotations

import torch


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def byte_mismatches(
    produced: dict[str, torch.Tensor], checkpoint: dict[str, torch.Tensor], wanted: set[str]
) -> tuple[list[str], list[str]]:
    """(names in only one of `wanted` and `produced`, sorted; names in both whose tensor, cast to the checkpoint's
    dtype, is not the checkpoint's bytes, sorted)."""
    unmatched = sorted(wanted ^ set(produced))
    differing = [
        name
        for name in sorted(wanted & set(produced))
        if not same_bytes(produced[name].to(checkpoint[name].dtype), checkpoint[name])
    ]
    return unmatched, differing


def weight_sync_failures(
    synced: dict[str, torch.Tensor], checkpoint: dict[str, torch.Tensor], expected: set[str]
) -> list[str]:
    """A Miles weight sync (HF-named tensors from the trainer) against the checkpoint the model was loaded from:
    the first five names on one side only, and every synced tensor that is not the checkpoint's bytes."""
    unmatched, differing = byte_mismatches(synced, checkpoint, expected)
    one_side = [f"weight sync: {n} {'missing' if n in expected else 'not in the checkpoint'}" for n in unmatched[:5]]
    return one_side + [f"weight sync: {name} is not the checkpoint's bytes" for name in differing]
