"""ModelSpec -> HF config.json with the published fields, so synthetic checkpoints look like the release.

The inverse of derive.py: derive_spec(to_hf_config(spec)) == spec (tested). Layer lists are written 1-based in
linear_attn_config, as the releases do; kimi_k3 is written as the composite config with text_config and
vision_config, and its quantization_config inside text_config. Spec fields the vendor config has no key for go
into the namespaced `dayone` block (config_block.py), and only when they differ from what derivation assumes: the
config is derived back, and a field that still reads back differently is refused with one line naming it.
"""

from __future__ import annotations

from typing import Any

from dayone.core.errors import InputError
from dayone.spec.config_block import FIELDS, KEY
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
    text = _text_config(spec)
    if spec.hf.text_model_type is None:
        return {"architectures": [spec.hf.architecture], "model_type": spec.hf.model_type, **text}
    config: dict[str, Any] = {
        "architectures": [spec.hf.architecture],
        "model_type": spec.hf.model_type,
        "dtype": spec.checkpoint.dtype,
        **_token_fields(spec),
        "tie_word_embeddings": spec.tie_word_embeddings,
        "text_config": {"architectures": [spec.hf.text_architecture], "model_type": spec.hf.text_model_type, **text},
    }
    if spec.passthrough is not None and spec.passthrough.vision is not None:
        config["vision_config"] = _vision_config(spec)
    return config


def _token_fields(spec: ModelSpec) -> dict[str, int]:
    ids = spec.token_ids
    fields = {
        "bos_token_id": ids.bos,
        "eos_token_id": ids.eos,
        "pad_token_id": ids.pad,
        "media_placeholder_token_id": ids.media_placeholder,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _text_config(spec: ModelSpec) -> dict[str, Any]:
    c: dict[str, Any] = {
        "dtype": spec.checkpoint.dtype,
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_layers,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "rms_norm_eps": spec.norm_eps,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "hidden_act": spec.activation.kind,
    }
    if spec.activation.kind == "situ":
        c["activation_situ_beta"] = spec.activation.beta
        c["activation_situ_linear_beta"] = spec.activation.linear_beta
    if spec.residual.kind == "attention":
        c["attn_res_block_size"] = spec.residual.block_size
    if spec.dense_intermediate_size is not None:
        c["intermediate_size"] = spec.dense_intermediate_size
    if spec.mla is not None:
        m = spec.mla
        c.update(
            num_attention_heads=m.num_heads,
            num_key_value_heads=m.num_heads,
            q_lora_rank=m.q_lora_rank,
            kv_lora_rank=m.kv_lora_rank,
            qk_nope_head_dim=m.qk_nope_head_dim,
            qk_rope_head_dim=m.qk_rope_head_dim,
            v_head_dim=m.v_head_dim,
            mla_use_nope=m.nope,
        )
        if m.output_gate:
            c["mla_use_output_gate"] = True
        if m.rope is not None:  # as DeepSeek-V3's config.json writes them
            c.update(rope_theta=m.rope.theta, rope_interleave=m.rope.interleave)
            if m.rope.scaling is not None:
                c["rope_scaling"] = {"type": "yarn", **m.rope.scaling.model_dump(exclude={"kind"})}
    else:
        # transformers requires attention head counts even for an all-KDA stack.
        c.update(num_attention_heads=spec.kda.num_heads, num_key_value_heads=spec.kda.num_heads)  # type: ignore[union-attr]
    if spec.moe is not None:
        moe, r = spec.moe, spec.moe.router
        c.update(
            num_experts=moe.num_experts,
            num_experts_per_token=moe.experts_per_token,
            num_shared_experts=moe.num_shared_experts,
            moe_intermediate_size=moe.expert_intermediate_size,
        )
        if moe.latent_size is not None:
            c["routed_expert_hidden_size"] = moe.latent_size
            c["latent_moe_use_norm"] = moe.latent_norm
        c.update(
            moe_router_activation_func=r.activation,
            topk_method="noaux_tc" if r.correction_bias else "greedy",
            use_grouped_topk=True,
            num_expert_group=r.num_groups,
            topk_group=r.topk_groups,
            moe_renormalize=r.renormalize,
            routed_scaling_factor=r.scaling_factor,
        )
    ffn = spec.ffn_kinds
    first_dense = next((i for i, kind in enumerate(ffn) if kind != "dense"), len(ffn))
    # transformers 5.x writes mlp_layer_types and stores the dense MLP under the MoE block's name; keep that pairing.
    simple = ffn == ("dense",) * first_dense + ("moe",) * (len(ffn) - first_dense)
    if simple and spec.checkpoint.dense_block == "mlp":
        c.update(first_k_dense_replace=first_dense, moe_layer_freq=1)
    else:
        c["mlp_layer_types"] = ["sparse" if kind == "moe" else "dense" for kind in ffn]
    lists = to_index_lists(spec.attention_kinds)
    linear: dict[str, Any] = {}
    if spec.kda is not None:
        k = spec.kda
        linear.update(num_heads=k.num_heads, head_dim=k.head_dim, short_conv_kernel_size=k.conv_kernel_size)
        if k.gate.kind == "safe":
            linear["gate_lower_bound"] = k.gate.lower_bound
        if k.output_gate.kind == "full_rank":
            linear["use_full_rank_gate"] = True
    linear["full_attn_layers"] = lists.get("mla", [])
    linear["kda_layers"] = lists.get("kda", [])
    c["linear_attn_config"] = linear
    if spec.quantization is not None:
        q = spec.quantization
        c["quantization_config"] = {
            "quant_method": q.method,
            "format": q.format,
            "quantization_status": "compressed",
            "config_groups": {
                "group_0": {
                    "format": q.format,
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": q.num_bits,
                        "type": "float",
                        "group_size": q.group_size,
                        "strategy": "group",
                        "symmetric": True,
                        "dynamic": False,
                        "scale_dtype": "torch.uint8",
                    },
                }
            },
            "ignore": list(q.ignore),
        }
    c.update(_token_fields(spec))
    c.pop("media_placeholder_token_id", None)
    return c


def _vision_config(spec: ModelSpec) -> dict[str, Any]:
    v = spec.passthrough.vision  # type: ignore[union-attr]
    assert v is not None
    return {
        "patch_size": v.patch_size,
        "vt_hidden_size": v.hidden_size,
        "vt_intermediate_size": v.intermediate_size,
        "vt_num_attention_heads": v.num_heads,
        "vt_num_hidden_layers": v.num_layers,
        "qkv_hidden_size": v.qkv_hidden_size,
        "init_pos_emb_height": v.pos_emb_height,
        "init_pos_emb_width": v.pos_emb_width,
        "init_pos_emb_time": v.pos_emb_time,
        "merge_kernel_size": list(v.merge_kernel_size),
        "mm_hidden_size": v.mm_hidden_size,
        "text_hidden_size": spec.hidden_size,
    }
