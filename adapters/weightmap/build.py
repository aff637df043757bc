"""The weight map: from a spec's manifest, one table per layout (every checkpoint tensor -> a target parameter).

    wm = build_weight_map(spec, "megatron", mxfp4="packed")
    wm.RULES    Rule per checkpoint tensor pattern ({i} layer, {e} expert) with its part, shard id and transform
    wm.PARAMS   Param per target parameter: full shape, fused parts, tensor-parallel rule, expert layout
    wm.DERIVED  tensors recomputed after every load (absorbed MLA, attention-residual vectors, fp32 router bias)
A WeightMap is a table in the sense of `walk.py` (same attribute names as a generated weight_table.py), so the
walker, the checks and the generators all read this one object.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dayone.adapters.weightmap.contracts import split_of
from dayone.adapters.weightmap.layouts import ENGINE_LAYOUTS, LAYOUTS
from dayone.adapters.weightmap.quirks import param_dtype, param_shape, transform_of
from dayone.adapters.weightmap.walk import Derived, Param, Rule
from dayone.core.errors import InputError
from dayone.spec.manifest import ExpertGroup, Tensor, build_manifest
from dayone.spec.schema import ModelSpec

MXFP4_MODES = ("packed", "dequantize")


@dataclass(frozen=True)
class WeightMap:
    spec_name: str
    layout: str
    mxfp4: str
    LAYERS: dict[str, tuple[int, ...]]
    NUM_EXPERTS: int
    PARAMS: tuple[Param, ...]
    RULES: tuple[Rule, ...]
    DERIVED: tuple[Derived, ...]

    def param(self, name: str, layers: str | None = None) -> Param:
        return next(p for p in self.PARAMS if p.name == name and (layers is None or p.layers == layers))


def layer_groups(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    groups: dict[str, list[int]] = {"all": [layer.index for layer in spec.layers]}
    for layer in spec.layers:
        groups.setdefault(layer.attention, []).append(layer.index)
        groups.setdefault(layer.ffn, []).append(layer.index)
    return {name: tuple(indices) for name, indices in groups.items()}


def _patterns(spec: ModelSpec) -> list[tuple[str, str, tuple[int, ...], str, frozenset[int] | None]]:
    """(source pattern, role, shape, dtype, layers) per distinct checkpoint tensor pattern, in manifest order."""
    found: dict[tuple[str, str], list] = {}
    for item in build_manifest(spec).items:
        if isinstance(item, ExpertGroup):
            base = item.prefix.replace(f"layers.{item.layer}.", "layers.{i}.", 1) + "{e}."
            entries = [(base + part.suffix, part.role, part.shape, part.dtype) for part in item.parts]
            layer = item.layer
        else:
            t: Tensor = item
            layer = t.layer
            name = t.name if layer is None else t.name.replace(f"layers.{layer}.", "layers.{i}.", 1)
            entries = [(name, t.role, t.shape, t.dtype)]
        for name, role, shape, dtype in entries:
            key = (name, role)
            if key not in found:
                found[key] = [name, role, tuple(shape), dtype, None if layer is None else set()]
            if layer is not None:
                found[key][4].add(layer)
    return [(n, r, s, d, None if layers is None else frozenset(layers)) for n, r, s, d, layers in found.values()]


def build_weight_map(spec: ModelSpec, layout: str, mxfp4: str = "packed") -> WeightMap:
    """The table of `layout` ("canonical", "inference", "vllm" or "megatron") for `spec`. mxfp4: keep routed
    experts "packed" (weight_packed / weight_scale parameters) or "dequantize" them into float parameters."""
    if layout not in LAYOUTS:
        raise InputError(f"layout {layout!r} is not known (choose from {', '.join(LAYOUTS)})")
    if mxfp4 not in MXFP4_MODES:
        raise InputError(f"mxfp4 mode {mxfp4!r} is not known (choose from {', '.join(MXFP4_MODES)})")
    place_of = LAYOUTS[layout]
    groups = layer_groups(spec)
    by_layers = {layers: name for name, layers in reversed(list(groups.items()))}

    members: dict[str, dict[int, tuple[int, tuple[int, ...], str, str]]] = defaultdict(dict)
    params: dict[str, dict] = {}
    rules: list[Rule] = []
    for source, role, shape, dtype, layers in _patterns(spec):
        group = None if layers is None else by_layers.get(tuple(sorted(layers)))
        if layers is not None and group is None:
            raise InputError(f"{source}: its layers match no layer group of spec {spec.name}")
        transform = transform_of(role, mxfp4)
        if transform is None:
            continue  # an MXFP4 scale, consumed with its weight_packed twin by the mxfp4 rule
        place = place_of(spec, source, role, mxfp4)
        rules.append(Rule(source, place.target, place.part, place.shard, transform, group, shape))
        shape_, dtype_ = param_shape(spec, shape, transform), param_dtype(spec, dtype, transform)
        entry = params.setdefault(
            (place.target, group),
            {"tp": place.tp, "splits": {}, "layers": group, "experts": place.experts, "dtype": dtype_,
             "shape": shape_, "members": place.members, "align": place.align},
        )  # fmt: skip
        entry["splits"][place.part] = split_of(role)
        if place.part is not None:
            members[(place.target, group)][place.part] = (shape_[0], shape_[1:], source, role)
        elif entry["shape"] != shape_:
            raise InputError(f"{source}: shape {list(shape_)} but {place.target} already has {entry['shape']}")

    table = []
    for (name, group), entry in params.items():
        tp, replicated = _tp_rule(entry["tp"], entry["splits"])
        shape, parts = entry["shape"], None
        if entry["members"] is not None:
            got = members[(name, group)]
            if sorted(got) != list(range(len(got))):
                raise InputError(f"{name}: fused parts {sorted(got)} are not 0..{len(got) - 1}")
            parts = tuple(got[k][0] for k in range(len(got)))
            shape = (sum(parts), *got[0][1])
        if entry["experts"] == "stacked":
            shape = (spec.moe.num_experts, *shape)
        table.append(
            Param(name, shape, tp, parts, entry["layers"], entry["experts"], entry["dtype"], replicated, entry["align"])
        )
    return WeightMap(
        spec_name=spec.name,
        layout=layout,
        mxfp4=mxfp4 if spec.quantization is not None else "none",
        LAYERS=groups,
        NUM_EXPERTS=spec.moe.num_experts if spec.moe is not None else 0,
        PARAMS=tuple(table),
        RULES=tuple(rules),
        DERIVED=_derived(spec, layout, {p.name for p in table}),
    )


def _tp_rule(forced: str | None, splits: dict[int | None, str]) -> tuple[str, tuple[int, ...]]:
    """(the parameter's tensor-parallel rule, its replicated parts) from its members' splits: a fusion with a
    column-parallel member is column-parallel, and its replicated members are held whole by every rank."""
    if forced is not None:
        return forced, ()
    if "column" not in splits.values():
        return next(iter(splits.values())), ()
    return "column", tuple(sorted(part for part, split in splits.items() if split == "replicated"))


def _derived(spec: ModelSpec, layout: str, params: set[str]) -> tuple[Derived, ...]:
    """Inference engines keep tensors computed from weights; they must be rebuilt after every load and update.
    Megatron computes everything from its parameters each step, so its layout has none. A part the layout never
    uses (an mla section with no mla layer) has no tensors, so nothing is derived from it."""
    if layout not in ENGINE_LAYOUTS:
        return ()
    out: list[Derived] = []
    p = spec.checkpoint.prefix
    if spec.mla is not None and "mla" in spec.attention_kinds:
        m = spec.mla
        kv_b = f"{p}layers.{{i}}.self_attn.kv_b_proj.weight"
        dims = (m.num_heads, m.qk_nope_head_dim, m.v_head_dim)
        for kind, attr in (("mla_w_kc", "w_kc"), ("mla_w_vc", "w_vc")):
            out.append(Derived(f"{p}layers.{{i}}.self_attn.{attr}", kind, (kv_b,), "mla", dims))
    if spec.residual.kind == "attention":
        for point, stem in (("attn_res", "self_attention_res"), ("mlp_res", "mlp_res")):
            names = (f"{p}layers.{{i}}.{stem}_norm.weight", f"{p}layers.{{i}}.{stem}_proj.weight")
            out.append(Derived(f"{p}layers.{{i}}.{point}_combined", "res_combined", names, "all"))
        names = (f"{p}output_attn_res_norm.weight", f"{p}output_attn_res_proj.weight")
        out.append(Derived(f"{p}output_res_combined", "res_combined", names))
    if spec.moe is not None and "moe" in spec.ffn_kinds and spec.moe.router.correction_bias:
        bias = f"{p}layers.{{i}}.{spec.checkpoint.moe_block}.gate.e_score_correction_bias"
        out.append(Derived(bias + "_fp32", "fp32", (bias,), "moe"))
    missing = [name for d in out for name in d.inputs if name not in params]
    if missing:
        raise InputError(f"derived tensors read {missing[0]}, which is not a parameter of the table")
    return tuple(out)
