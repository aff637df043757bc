"""A small checkpoint standing in for a named spec: what must agree for the named spec's widths to be the ones the
compile and plan stages use in its place.

A stand-in (`synth --scale tiny|small|faithful`) keeps the named spec's structure and shrinks widths and counts, so
its kernels would compile at the wrong widths; `integrate run` compiles and plans at the named spec's instead. That
is only sound for a stand-in of that spec: a checkpoint of another architecture is refused up front, naming what
differs.
"""

from __future__ import annotations

from dayone.core.errors import InputError
from dayone.spec.schema import ModelSpec


def check_stand_in(spec: ModelSpec, named: ModelSpec) -> ModelSpec:
    """`named` when `spec` (the checkpoint's) has its structure; else an InputError naming the first difference."""
    for field, ours, theirs in _structure(spec, named):
        if ours != theirs:
            raise InputError(
                f"{spec.name} is not a stand-in of {named.name}: {field} is {ours!r}, {named.name} has {theirs!r}"
            )
    return named


def _structure(a: ModelSpec, b: ModelSpec) -> list[tuple[str, object, object]]:
    """What a stand-in keeps: architecture, the kinds of layers, gates and residuals, and which parts exist."""
    pairs = {
        "hf.model_type": (a.hf.model_type, b.hf.model_type),
        "attention kinds": (sorted(set(a.attention_kinds)), sorted(set(b.attention_kinds))),
        "ffn kinds": (sorted(set(a.ffn_kinds)), sorted(set(b.ffn_kinds))),
        "residual.kind": (a.residual.kind, b.residual.kind),
        "activation.kind": (a.activation.kind, b.activation.kind),
        "kda.gate.kind": (a.kda and a.kda.gate.kind, b.kda and b.kda.gate.kind),
        "mla.nope": (a.mla and a.mla.nope, b.mla and b.mla.nope),
        "moe.latent_size is set": (bool(a.moe and a.moe.latent_size), bool(b.moe and b.moe.latent_size)),
        "quantization": (a.quantization is not None, b.quantization is not None),
    }
    return [(field, ours, theirs) for field, (ours, theirs) in pairs.items()]
