"""What scale and widths each check ran at, so that a small stand-in's pass is never read as the model's.

A run of a stand-in checkpoint (`integrate run --demo`, `--stand-in-for SPEC`) carries both specs in its spec
report: the checkpoint's own ("spec") and the one it stands in for ("stands_in_for"). Coverage, generate, conform
and validate check the checkpoint at its own widths; compile and plan work at the named model's widths. Every
numeric field where the two differ is listed, found by walking both specs (no list of fields kept here).

generate --check's Megatron model check (miles, megatron-bridge) builds the model at a tiny scale of the spec, on
its own widths: where its report names a spec other than the checkpoint's, that is said too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dayone.dashboard.matrix import ModelRows

AT_CHECKPOINT = ("coverage", "generate", "conform", "validate", "package")
AT_NAMED = ("compile", "plan")


@dataclass
class Scale:
    checked: str  # the spec the checkpoint is
    named: str | None  # the spec it stands in for, if any
    differences: list[tuple[str, Any, Any]]  # (field path, checkpoint's value, named model's value)
    at_checkpoint: tuple[str, ...] = AT_CHECKPOINT
    at_named: tuple[str, ...] = AT_NAMED
    elsewhere: list[str] = field(default_factory=list)  # checks that ran at another spec, each in words


def _megatron_scales(model: ModelRows, checked: str) -> list[str]:
    """Where the latest Megatron model check of each target ran at a spec other than `checked`: a sentence per spec."""
    latest = {}
    for r in model.reports:  # oldest first: a later report of a target replaces its earlier one
        check = r.drawn.check if r.stage == "generate" and not r.malformed else None
        if check and check.megatron and check.megatron.model:
            latest[str(r.target)] = check.megatron.model
    by_spec: dict[str, list[str]] = {}
    for target, ran in latest.items():
        if ran.spec and ran.spec != checked:
            by_spec.setdefault(ran.spec, []).append(target)
    return [
        f"generate --check's Megatron model check ({', '.join(targets)}) ran at {spec}: "
        f"{latest[targets[0]].layers} layers, TP {latest[targets[0]].tp} x EP {latest[targets[0]].ep}"
        for spec, targets in by_spec.items()
    ]


def scale_of(model: ModelRows) -> Scale | None:
    """From the latest spec report that carries the spec; None when none does."""
    carried = [r for r in model.reports if r.stage == "spec" and not r.malformed and r.drawn.spec]
    if not carried:
        return None
    drawn = carried[-1].drawn
    own, named = drawn.spec or {}, drawn.stands_in_for
    checked = str(own.get("name", model.spec))
    elsewhere = _megatron_scales(model, checked)
    if not named:
        return Scale(checked, None, [], elsewhere=elsewhere)
    return Scale(checked, str(named.get("name", "?")), _differences(own, named), elsewhere=elsewhere)


def _differences(own: Any, named: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(own, dict) and isinstance(named, dict):
        return [
            d
            for key in own
            if key in named
            for d in _differences(own[key], named[key], f"{path}.{key}" if path else key)
        ]
    numbers = (int, float)
    if isinstance(own, numbers) and isinstance(named, numbers) and not isinstance(own, bool) and own != named:
        return [(path, own, named)]
    if path.startswith("layout") and own != named:  # the layer pattern: its length is the depth
        return [(path, own, named)]
    return []
