"""A checkpoint's spec: a shipped name or spec file when one is given, else derived from its config.json (and its
tensor names), named after the model (`model_name`), never after the folder it was read from. Commands,
`integrate run` and validate all take their spec from here."""

from __future__ import annotations

import hashlib
import json

from dayone.checkpoint.reader import Checkpoint, TensorNames
from dayone.spec.derive import derive_spec
from dayone.spec.registry import list_specs, load_spec, spec_to_dict
from dayone.spec.schema import ModelSpec

# Hugging Face's units for parameter counts in model names ("Kimi-Linear-48B-A3B"), lowercase as spec names are.
_UNITS = ((10**12, "t"), (10**9, "b"), (10**6, "m"), (10**3, "k"))


def spec_for_checkpoint(checkpoint: Checkpoint, spec_arg: str | None, release_facts: bool = True) -> ModelSpec:
    """release_facts=False: the derived spec without the release's shard count, for a caller that reads only the
    model from it (inspect): counting the shards reads the whole index, which inspect's scan reads anyway."""
    if spec_arg:
        return load_spec(spec_arg)
    spec = derive_spec(
        checkpoint.config,
        "derived",  # a valid name to validate with; the model's own comes from the spec once it is whole
        tensor_names=TensorNames(checkpoint),
        # from the index: reading every header here would double inspect
        num_shards=(len(checkpoint.files) or None) if release_facts else None,
        where=f"{checkpoint.source}/config.json",
    )
    return named_after_the_model(spec)


def named_after_the_model(spec: ModelSpec) -> ModelSpec:
    return spec.model_copy(update={"name": model_name(spec)})


def model_name(spec: ModelSpec) -> str:
    """The name of a spec derived from a config.json: the package (dayone-<name>-vllm), module (dayone_<name>_vllm)
    and command names of everything generated from it derive from this, so it comes from the model alone.

    - A spec equal to a shipped spec in every field but its name and release facts (repo, shard count) takes that
      spec's name: a release checkpoint is named as its shipped spec.
    - Otherwise `<model type>-<size>`: transformers' model_type with '-' for '_', then the parameter count as Hugging
      Face model names give it, total and, with routed experts, active per token ("48b-a3b"; a tiny K3 stand-in is
      kimi-k3-5.1m-a3.4m). The size is always there: generated code bakes the widths in, so two checkpoints of one
      model type at different sizes must not share a package name, nor take the shipped spec's name (kimi-k3).
    - Should that still be a shipped spec's name (a custom checkpoint of a shipped size), the spec's digest is
      appended: the registry resolves a name to the shipped spec first.
    Checkpoints equal in model type and rounded size but different elsewhere share a name; their generated headers'
    spec digests still tell them apart.
    """
    data = spec_to_dict(spec)
    shipped = list_specs()
    for name in shipped:
        if _architecture(data) == _architecture(spec_to_dict(load_spec(name))):
            return name
    from dayone.spec.manifest import build_manifest
    from dayone.spec.params import count_params

    counts = count_params(spec, build_manifest(spec))
    size = size_label(counts.total) + (f"-a{size_label(counts.activated)}" if spec.moe is not None else "")
    model_type = spec.hf.model_type.replace("_", "-")
    name = _joined(model_type, size)
    if name in shipped:
        digest = hashlib.sha256(json.dumps(data | {"name": ""}, sort_keys=True).encode()).hexdigest()[:8]
        name = _joined(model_type, f"{size}-{digest}")
    return name


def _joined(model_type: str, size: str) -> str:
    """`<model type>-<size>` within the 64 characters a spec name may have: the model type is cut, not the size (as
    dayone.synth's stand-in names are; importing synth would import torch, which `spec derive` does without)."""
    return f"{model_type[: 63 - len(size)].rstrip('.-')}-{size}"


def _architecture(data: dict) -> dict:
    """A spec's data but its name and its release facts (repo, shard count: not architecture, and no config.json
    says them)."""
    return {key: value for key, value in data.items() if key not in ("name", "release")}


def size_label(count: int) -> str:
    """A parameter count as model names write it: 48b, 5.1m, 105b (one decimal below 10, none from 10 up)."""
    for unit, letter in _UNITS:
        if count >= unit:
            value = count / unit
            text = f"{value:.0f}" if value >= 10 else f"{value:.1f}".removesuffix(".0")
            return text + letter
    return str(count)
