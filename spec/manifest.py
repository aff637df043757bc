"""The tensor manifest: every tensor a checkpoint of a spec holds, with shape, dtype and role.

This is the single source of truth for every later loader, converter and coverage check. Names are the
checkpoint's own (prefixes, `block_sparse_moe`, w1/w2/w3, MXFP4 `weight_packed` / `weight_scale` pairs).

Roles are dotted ("kda.q_proj", "moe.expert.down.scale"); `checkpoint.float32` in the spec lists role prefixes
that are stored in float32 whatever the checkpoint dtype. A K3 manifest has ~500k entries, so entries are plain
tuples built in one pass, not pydantic objects.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from itertools import repeat
from typing import TYPE_CHECKING, NamedTuple

from dayone.core.vocabulary import EXPERT_PROJECTIONS, MXFP4_PARTS, SAFETENSORS_DTYPE

if TYPE_CHECKING:  # header readers import DTYPE_BYTES from here; they need no pydantic
    from dayone.spec.schema import ModelSpec

DTYPE_BYTES = {
    "BF16": 2,
    "F16": 2,
    "F32": 4,
    "U8": 1,
    "I8": 1,
    "F64": 8,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "F8_E8M0": 1,
    "F4": 1,
}


class Tensor(NamedTuple):
    """One checkpoint tensor. layer is the 0-based layer index (None for global and passthrough tensors);
    expert is the routed expert index (None elsewhere)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # safetensors dtype string: BF16, F32, U8, ...
    role: str
    layer: int | None = None
    expert: int | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


class ExpertPart(NamedTuple):
    """One tensor of every routed expert of a layer: experts.{e}.<suffix>."""

    suffix: str  # e.g. "w1.weight_packed"
    shape: tuple[int, ...]
    dtype: str
    role: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]


class ExpertGroup(NamedTuple):
    """The routed experts of one MoE layer, kept folded: 896 x 6 tensors per K3 layer are one entry until asked."""

    prefix: str  # "<...>.block_sparse_moe.experts."
    layer: int
    num_experts: int
    parts: tuple[ExpertPart, ...]

    def expand(self) -> list[Tensor]:
        new, prefix, layer = tuple.__new__, self.prefix, self.layer
        return [
            new(Tensor, (f"{prefix}{e}.{p.suffix}", p.shape, p.dtype, p.role, layer, e))
            for e in range(self.num_experts)
            for p in self.parts
        ]


class Summary(NamedTuple):
    """`count` tensors of one shape and role: what totals (bytes, parameters) need without expanding experts."""

    role: str
    shape: tuple[int, ...]
    dtype: str
    count: int
    layer: int | None
    routed_expert: bool


@dataclass(frozen=True)
class Manifest:
    """Every tensor of a checkpoint in order. `items` holds plain tensors and folded expert groups."""

    spec_name: str
    items: tuple[Tensor | ExpertGroup, ...]

    @cached_property
    def tensors(self) -> tuple[Tensor, ...]:
        out: list[Tensor] = []
        for item in self.items:
            if isinstance(item, ExpertGroup):
                out.extend(item.expand())
            else:
                out.append(item)
        return tuple(out)

    def summaries(self) -> list[Summary]:
        rows = []
        for item in self.items:
            if isinstance(item, ExpertGroup):
                rows.extend(Summary(p.role, p.shape, p.dtype, item.num_experts, item.layer, True) for p in item.parts)
            else:
                rows.append(Summary(item.role, item.shape, item.dtype, 1, item.layer, False))
        return rows

    def __len__(self) -> int:
        return sum(row.count for row in self.summaries())

    @property
    def nbytes(self) -> int:
        return sum(row.count * math.prod(row.shape) * DTYPE_BYTES[row.dtype] for row in self.summaries())

    def bytes_by_dtype(self) -> dict[str, int]:
        totals: Counter[str] = Counter()
        for row in self.summaries():
            totals[row.dtype] += row.count * math.prod(row.shape) * DTYPE_BYTES[row.dtype]
        return dict(totals)

    def by_name(self) -> dict[str, Tensor]:
        return {t.name: t for t in self.tensors}

    def expected(self) -> dict[str, tuple[list[int], str]]:
        """name -> (shape as a list, dtype) for every tensor, built without creating Tensor objects: coverage's hot
        path compares it with header JSON, whose shapes are lists."""
        table: dict[str, tuple[list[int], str]] = {}
        for item in self.items:
            if isinstance(item, ExpertGroup):
                keyed = [(p.suffix, (list(p.shape), p.dtype)) for p in item.parts]
                prefix = item.prefix
                table.update(
                    (f"{prefix}{e}.{suffix}", value) for e in range(item.num_experts) for suffix, value in keyed
                )
            else:
                table[item.name] = (list(item.shape), item.dtype)
        return table


Entry = tuple[list[int], str, int]  # (shape as a list, dtype, bytes): a header entry's fields as JSON parses them


class EntryTable:
    """name -> Entry for every tensor of a manifest, the way coverage asks: a shard's names all at once.

    A K3 has 497k names, 99% of them routed experts; building them all costs more than parsing a tenth of the
    headers. So only plain tensors are in the table at first, and an expert group's names are added (joined by C-level
    string concatenation) when a lookup first meets one of them: each worker process builds only the groups its
    shards hold, in parallel, instead of the parent building all of them up front."""

    def __init__(self, manifest: Manifest) -> None:
        self.table: dict[str, Entry] = {}
        self.groups: dict[str, ExpertGroup] = {}  # by prefix "<...>.experts.", until expanded
        self.count = 0
        for item in manifest.items:
            if isinstance(item, ExpertGroup):
                self.groups[item.prefix] = item
                self.count += item.num_experts * len(item.parts)
            else:
                self.table[item.name] = (list(item.shape), item.dtype, item.nbytes)
                self.count += 1
        self._numbered: dict[int, list[str]] = {}

    def lookup(self, names: list[str]) -> list[Entry | None]:
        """The entry of each name (None where the manifest has no such tensor), expanding groups as they are met."""
        found = list(map(self.table.get, names))
        start = 0
        while True:
            try:
                start = found.index(None, start)
            except ValueError:
                return found
            if self._expand_group_of(names[start]):
                # A shard holds one or two groups: the rest of the list is looked up again, in C.
                found[start:] = map(self.table.get, names[start:])
            else:
                start += 1

    def get(self, name: str) -> Entry | None:
        hit = self.table.get(name)
        if hit is None and self._expand_group_of(name):
            hit = self.table.get(name)
        return hit

    def keys(self):
        for prefix in list(self.groups):
            self._expand(self.groups.pop(prefix))
        return self.table.keys()

    def __len__(self) -> int:
        return self.count

    def _expand_group_of(self, name: str) -> bool:
        head, sep, _ = name.rpartition(".experts.")
        group = self.groups.pop(head + sep, None) if sep else None
        if group is not None:
            self._expand(group)
        return group is not None

    def _expand(self, group: ExpertGroup) -> None:
        numbered = self._numbered.get(group.num_experts)
        if numbered is None:
            numbered = self._numbered[group.num_experts] = [f"{e}." for e in range(group.num_experts)]
        heads = list(map(group.prefix.__add__, numbered))
        for part in group.parts:
            entry = (list(part.shape), part.dtype, part.nbytes)
            self.table.update(dict.fromkeys(map(str.__add__, heads, repeat(part.suffix)), entry))


def build_manifest(spec: ModelSpec) -> Manifest:
    """Every tensor of a checkpoint of `spec`, in checkpoint order (globals, layers in order, passthrough)."""
    out: list[Tensor | ExpertGroup] = []
    store = SAFETENSORS_DTYPE[spec.checkpoint.dtype]
    fp32_roles = tuple(spec.checkpoint.float32)

    def dtype_of(role: str) -> str:
        for prefix in fp32_roles:
            if role == prefix or role.startswith(prefix + "."):
                return "F32"
        return store

    def add(name: str, shape: tuple[int, ...], role: str, layer: int | None = None, dtype: str | None = None) -> None:
        out.append(Tensor(name, shape, dtype or dtype_of(role), role, layer))

    p, D = spec.checkpoint.prefix, spec.hidden_size
    add(f"{p}embed_tokens.weight", (spec.vocab_size, D), "embed")
    add(f"{p}norm.weight", (D,), "final_norm")
    if spec.residual.kind == "attention":
        add(f"{p}output_attn_res_norm.weight", (D,), "output_res.norm")
        add(f"{p}output_attn_res_proj.weight", (1, D), "output_res.proj")
    if not spec.tie_word_embeddings:
        add(spec.checkpoint.lm_head, (spec.vocab_size, D), "lm_head")

    for layer in spec.layers:
        i = layer.index
        lp = f"{p}layers.{i}."
        add(f"{lp}input_layernorm.weight", (D,), "input_norm", i)
        add(f"{lp}post_attention_layernorm.weight", (D,), "post_attention_norm", i)
        if spec.residual.kind == "attention":
            add(f"{lp}self_attention_res_norm.weight", (D,), "attn_res.norm", i)
            add(f"{lp}mlp_res_norm.weight", (D,), "mlp_res.norm", i)
            add(f"{lp}self_attention_res_proj.weight", (1, D), "attn_res.proj", i)
            add(f"{lp}mlp_res_proj.weight", (1, D), "mlp_res.proj", i)
        if layer.attention == "kda":
            _kda(spec, f"{lp}self_attn.", i, add)
        else:
            _mla(spec, f"{lp}self_attn.", i, add)
        if layer.ffn == "dense":
            _mlp(f"{lp}{spec.checkpoint.dense_block}.", spec.dense_intermediate_size, D, "mlp", i, add)  # type: ignore[arg-type]
        else:
            _moe(spec, f"{lp}{spec.checkpoint.moe_block}.", i, add, out)

    if spec.passthrough is not None and spec.passthrough.vision is not None:
        _vision(spec, add)
    return Manifest(spec.name, tuple(out))


def _kda(spec: ModelSpec, ap: str, i: int, add) -> None:
    kda, D = spec.kda, spec.hidden_size
    assert kda is not None
    HK = kda.num_heads * kda.head_dim
    for x in ("q", "k", "v"):
        add(f"{ap}{x}_proj.weight", (HK, D), f"kda.{x}_proj", i)
    for x in ("q", "k", "v"):
        add(f"{ap}{x}_conv1d.weight", (HK, 1, kda.conv_kernel_size), f"kda.conv.{x}", i)
    add(f"{ap}f_a_proj.weight", (kda.gate.rank, D), "kda.f_a", i)
    add(f"{ap}f_b_proj.weight", (HK, kda.gate.rank), "kda.f_b", i)
    add(f"{ap}b_proj.weight", (kda.num_heads, D), "kda.b_proj", i)
    add(f"{ap}A_log", tuple(kda.a_log_shape), "kda.a_log", i)
    add(f"{ap}dt_bias", (HK,), "kda.dt_bias", i)
    if kda.output_gate.kind == "low_rank":
        add(f"{ap}g_a_proj.weight", (kda.output_gate.rank, D), "kda.g_a", i)
        add(f"{ap}g_b_proj.weight", (HK, kda.output_gate.rank), "kda.g_b", i)
    else:
        add(f"{ap}g_proj.weight", (HK, D), "kda.g_proj", i)
    add(f"{ap}o_norm.weight", (kda.head_dim,), "kda.o_norm", i)
    add(f"{ap}o_proj.weight", (D, HK), "kda.o_proj", i)


def _mla(spec: ModelSpec, ap: str, i: int, add) -> None:
    mla, D = spec.mla, spec.hidden_size
    assert mla is not None
    H = mla.num_heads
    if mla.q_lora_rank is not None:
        add(f"{ap}q_a_proj.weight", (mla.q_lora_rank, D), "mla.q_a", i)
        add(f"{ap}q_a_layernorm.weight", (mla.q_lora_rank,), "mla.q_a_norm", i)
        add(f"{ap}q_b_proj.weight", (H * mla.qk_head_dim, mla.q_lora_rank), "mla.q_b", i)
    else:
        add(f"{ap}q_proj.weight", (H * mla.qk_head_dim, D), "mla.q_proj", i)
    add(f"{ap}kv_a_proj_with_mqa.weight", (mla.kv_lora_rank + mla.qk_rope_head_dim, D), "mla.kv_a", i)
    add(f"{ap}kv_a_layernorm.weight", (mla.kv_lora_rank,), "mla.kv_a_norm", i)
    add(f"{ap}kv_b_proj.weight", (H * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank), "mla.kv_b", i)
    if mla.output_gate:
        add(f"{ap}g_proj.weight", (H * mla.v_head_dim, D), "mla.g_proj", i)
    add(f"{ap}o_proj.weight", (D, H * mla.v_head_dim), "mla.o_proj", i)


def _mlp(mp: str, intermediate: int, width: int, role: str, i: int, add) -> None:
    add(f"{mp}gate_proj.weight", (intermediate, width), f"{role}.gate", i)
    add(f"{mp}up_proj.weight", (intermediate, width), f"{role}.up", i)
    add(f"{mp}down_proj.weight", (width, intermediate), f"{role}.down", i)


def _moe(spec: ModelSpec, mp: str, i: int, add, out: list) -> None:
    moe, D = spec.moe, spec.hidden_size
    assert moe is not None
    add(f"{mp}gate.weight", (moe.num_experts, D), "moe.router", i)
    if moe.router.correction_bias:
        add(f"{mp}gate.e_score_correction_bias", (moe.num_experts,), "moe.correction_bias", i)
    W = spec.moe_width
    if moe.latent_size is not None:
        add(f"{mp}routed_expert_down_proj.weight", (W, D), "moe.latent_down", i)
        if moe.latent_norm:
            add(f"{mp}routed_expert_norm.weight", (W,), "moe.latent_norm", i)
        add(f"{mp}routed_expert_up_proj.weight", (D, W), "moe.latent_up", i)
    if moe.num_shared_experts:
        _mlp(f"{mp}shared_experts.", moe.shared_intermediate_size, D, "moe.shared", i, add)

    # Experts dominate the count (896 x 6 per K3 layer): kept as one folded group per layer.
    I, names = moe.expert_intermediate_size, spec.checkpoint.experts
    shapes = {"gate": (I, W), "up": (I, W), "down": (W, I)}
    q = spec.quantization
    if q is None:
        dtype = SAFETENSORS_DTYPE[spec.checkpoint.dtype]
        parts = [
            (getattr(names, proj), ".weight", shapes[proj], dtype, f"moe.expert.{proj}") for proj in EXPERT_PROJECTIONS
        ]
    else:
        parts = []
        for proj in EXPERT_PROJECTIONS:
            rows, cols = shapes[proj]
            for part, shape in (("packed", (rows, cols // 2)), ("scale", (rows, cols // q.group_size))):
                parts.append((getattr(names, proj), f".{MXFP4_PARTS[part]}", shape, "U8", f"moe.expert.{proj}.{part}"))
    # w1, w2, w3 order as the release lists them (gate, down, up by the default names).
    parts.sort(key=lambda part: part[0])
    folded = tuple(ExpertPart(f"{proj}{suffix}", shape, dtype, role) for proj, suffix, shape, dtype, role in parts)
    out.append(ExpertGroup(f"{mp}experts.", i, moe.num_experts, folded))


def _vision(spec: ModelSpec, add) -> None:
    """MoonViT and its patch-merger projector, named as the K3 release names them."""
    v = spec.passthrough.vision  # type: ignore[union-attr]
    assert v is not None
    dtype = SAFETENSORS_DTYPE[spec.checkpoint.dtype]
    d = v.hidden_size

    def pt(name: str, shape: tuple[int, ...]) -> None:
        add(name, shape, "passthrough.vision", None, dtype)

    pt("vision_tower.patch_embed.proj.weight", (d, 3, v.patch_size, v.patch_size))
    pt("vision_tower.patch_embed.pos_emb.weight", (v.pos_emb_height, v.pos_emb_width, d))
    for b in range(v.num_layers):
        bp = f"vision_tower.encoder.blocks.{b}."
        pt(f"{bp}wqkv.weight", (3 * v.qkv_hidden_size, d))
        pt(f"{bp}wo.weight", (d, v.qkv_hidden_size))
        pt(f"{bp}norm0.weight", (d,))
        pt(f"{bp}norm1.weight", (d,))
        pt(f"{bp}mlp.fc0.weight", (v.intermediate_size, d))
        pt(f"{bp}mlp.fc1.weight", (d, v.intermediate_size))
    pt("vision_tower.encoder.final_layernorm.weight", (d,))
    merged = v.mm_hidden_size * v.merge_kernel_size[0] * v.merge_kernel_size[1]
    pt("mm_projector.proj.0.weight", (merged, merged))
    pt("mm_projector.proj.2.weight", (spec.hidden_size, merged))
    pt("mm_projector.post_norm.weight", (spec.hidden_size,))
