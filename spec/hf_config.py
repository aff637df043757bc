"""ModelSpec -> HF config.json with the published fields, so synthetic checkpoints look like the release.

The inverse of derive.py: derive_spec(to_hf_config(spec)) == spec (tested). Every key that carries one spec field
is written from the table both read (spec/hf_keys.py's CONFIG_MAPPING); the rest is code here. Layer lists are written 1-based in
linear_attn_config, as the releases do; kimi_k3 is written as the composite config with text_config and
vision_config, and its quantization_config inside text_config. Spec fields the vendor config has no key for go
into the namespaced `dayone` block (config_block.py), and only when they differ from what derivation assumes: the
config is derived back, and a field that still reads back differently is refused with one line naming it.
"""

from __future__ import annotations

from typing import Any

from dayone.core.errors import InputError
from dayone.spec import hf_keys
from dayone.spec.config_block import FIELDS, KEY
from dayone.spec.hf_keys import key as hf_key
from dayone.spec.hf_keys import section as hf_section
from dayone.spec.layout import to_index_lists
from dayone.spec.schema import ModelSpec


def to_hf_config(spec: ModelSpec) -> dict[str, Any]:
    """The config.json a release of `spec` carries; InputError naming the first spec field it cannot carry."""
    from dayone.spec.derive import derive_spec  # derive does not import this module: no cycle, but keep it local

    config = _vendor_config(spec)
    block: dict[str, Any] = {}
    if spec.conventions is not None:
        block["conventions"] = spec.conventions.model_dump(mode="json", exclude_none=True)
    where = f"spec {spec.name} -> config.json"
    wanted = _used(spec)
    if block:
        config[KEY] = block
    got = _used(derive_spec(config, spec.name, where=where))
    for (section, field), path in FIELDS.items():
        if _at(wanted, path) != _at(got, path) and isinstance(_at(got, path[:-1]), dict):
            block.setdefault(section, {})[field] = _at(wanted, path)
    if block:
        config[KEY] = block
        got = _used(derive_spec(config, spec.name, where=where))
    if got != wanted:
        path, ours, theirs = _first_difference(wanted, got)
        raise InputError(
            f"{where}: {path}={ours!r:.80} cannot be written to config.json (it would read back as {theirs!r:.80})"
        )
    return config


def _used(spec: ModelSpec) -> dict[str, Any]:
    """The spec as data, less what no layer uses (a kda, mla, moe or dense section the layout never names, as in
    the first layers of a model cut short): the config carries the layers, and derivation reads what they use."""
    unused = {"release"}
    unused |= {name for name in ("kda", "mla") if name not in spec.attention_kinds}
    unused |= {"moe"} if "moe" not in spec.ffn_kinds else set()
    unused |= {"dense_intermediate_size"} if "dense" not in spec.ffn_kinds else set()
    data = spec.model_dump(mode="json", exclude=unused)
    # a layout is compared layer by layer: "1 x [kda mla]", "[kda mla]" and index lists are the same layers
    data["layout"] = {"attention": list(spec.attention_kinds), "ffn": list(spec.ffn_kinds)}
    return data


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any]:
    """The first field (dotted path) where two dumped specs differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    return path, a, b


def _vendor_config(spec: ModelSpec) -> dict[str, Any]:
    data = spec.model_dump(mode="json")
    text = _text_config(spec, data)
    if spec.hf.text_model_type is None:
        return {hf_keys.ARCHITECTURES: [spec.hf.architecture], hf_keys.MODEL_TYPE: spec.hf.model_type, **text}
    config: dict[str, Any] = {
        hf_keys.ARCHITECTURES: [spec.hf.architecture],
        hf_keys.MODEL_TYPE: spec.hf.model_type,
        hf_keys.DTYPE_KEYS[0]: spec.checkpoint.dtype,
        **dict(hf_keys.written(data, hf_section("token_ids."))),
        **dict(hf_keys.written(data, (hf_key("tie_word_embeddings"),))),
        hf_keys.TEXT_CONFIG: {
            hf_keys.ARCHITECTURES: [spec.hf.text_architecture],
            hf_keys.MODEL_TYPE: spec.hf.text_model_type,
            **text,
        },
    }
    for path, value in hf_keys.written(data, hf_section("passthrough.vision.")):
        hf_keys.place(config, path, value)
    if hf_keys.VISION in config:
        config[hf_keys.VISION][hf_keys.TEXT_HIDDEN_SIZE] = spec.hidden_size
    return config


def _text_config(spec: ModelSpec, data: dict[str, Any]) -> dict[str, Any]:
    """The text model's keys: every mapped field the spec holds (hf_keys.CONFIG_MAPPING), then what is code."""
    c: dict[str, Any] = {hf_keys.DTYPE_KEYS[0]: spec.checkpoint.dtype}
    # the vision tower's keys go to vision_config, the media placeholder id only to the top of a composite config
    media = hf_key("token_ids.media_placeholder")
    text_keys = tuple(k for k in hf_keys.CONFIG_MAPPING if not k.spec.startswith("passthrough.") and k != media)
    for path, value in hf_keys.written(data, text_keys):
        hf_keys.place(c, path, value)
    # transformers requires attention head counts even for an all-KDA stack
    c.setdefault(hf_key("mla.num_heads").hf, attention_heads(spec))
    c[hf_keys.KV_HEADS] = attention_heads(spec)
    if spec.mla is not None and spec.mla.rope is not None and spec.mla.rope.scaling is not None:
        scaling = spec.mla.rope.scaling.model_dump(exclude={"kind"})
        c[hf_keys.ROPE_SCALING] = {hf_keys.ROPE_KIND_KEYS[0]: "yarn", **scaling}  # as DeepSeek-V3 writes it
    if spec.moe is not None:
        c.update(
            {
                hf_keys.TOPK_METHOD: "noaux_tc" if spec.moe.router.correction_bias else "greedy",
                hf_keys.GROUPED_TOPK: True,
            }
        )
    ffn = spec.ffn_kinds
    first_dense = next((i for i, kind in enumerate(ffn) if kind != "dense"), len(ffn))
    # transformers 5.x writes mlp_layer_types and stores the dense MLP under the MoE block's name; keep that pairing.
    simple = ffn == ("dense",) * first_dense + ("moe",) * (len(ffn) - first_dense)
    if simple and spec.checkpoint.dense_block == "mlp":
        c.update({hf_keys.FIRST_DENSE: first_dense, hf_keys.MOE_FREQ: 1})
    else:
        c[hf_keys.MLP_LAYER_TYPES] = [hf_keys.MLP_LAYER_NAMES[kind] for kind in ffn]
    linear = c.setdefault(hf_keys.LINEAR, {})
    if spec.kda is not None and spec.kda.output_gate.kind == "full_rank":
        linear[hf_keys.FULL_RANK_GATE] = True
    lists = to_index_lists(spec.attention_kinds)
    for kind, name in hf_keys.LAYER_LISTS.items():
        linear[name] = lists.get(kind, [])
    if spec.quantization is not None:
        c[hf_keys.QUANTIZATION] = _quantization_config(spec.quantization)
    return c


def _quantization_config(q: Any) -> dict[str, Any]:
    return {
        hf_keys.QUANT_METHOD: q.method,
        hf_keys.QUANT_FORMAT: q.format,
        "quantization_status": "compressed",
        hf_keys.QUANT_GROUPS: {
            "group_0": {
                hf_keys.QUANT_FORMAT: q.format,
                "targets": ["Linear"],
                hf_keys.QUANT_WEIGHTS: {
                    hf_keys.QUANT_BITS: q.num_bits,
                    "type": "float",
                    hf_keys.QUANT_GROUP_SIZE: q.group_size,
                    "strategy": "group",
                    "symmetric": True,
                    "dynamic": False,
                    "scale_dtype": "torch.uint8",
                },
            }
        },
        hf_keys.QUANT_IGNORE: list(q.ignore),
    }


def attention_heads(spec: ModelSpec) -> int:
    """The config's num_attention_heads: MLA's heads, else KDA's (transformers requires a head count even for an
    all-KDA stack). transformers takes hidden_size // this as the head width its RoPE check wants even."""
    return spec.mla.num_heads if spec.mla is not None else spec.kda.num_heads  # type: ignore[union-attr]
