"""A checkpoint's spec: a shipped name or spec file when one is given, else derived from its config.json (and its
tensor names). Commands, `integrate run` and validate all take their spec from here."""

from __future__ import annotations

from dayone.checkpoint.reader import Checkpoint, TensorNames
from dayone.spec.derive import derive_spec
from dayone.spec.registry import load_spec
from dayone.spec.schema import ModelSpec


def spec_for_checkpoint(checkpoint: Checkpoint, spec_arg: str | None) -> ModelSpec:
    if spec_arg:
        return load_spec(spec_arg)
    name = _name_from(checkpoint)
    return derive_spec(
        checkpoint.config,
        name,
        tensor_names=TensorNames(checkpoint),
        num_shards=len(checkpoint.files) or None,  # from the index: reading every header here would double inspect
        where=f"{checkpoint.source}/config.json",
    )


def _name_from(checkpoint: Checkpoint) -> str:
    return slug(checkpoint.source.split("@")[0].rstrip("/").split("/")[-1])


def slug(text: str) -> str:
    """A spec name (lowercase letters, digits, '.', '-') made from a folder or file name."""
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in text.lower()).strip("-.") or "model"
