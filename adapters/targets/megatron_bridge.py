"""Megatron-Bridge: a bridge module registering the architecture (`MegatronModelBridge.register_bridge`) with a
mapping registry built from the megatron weight table (replicated, column-parallel, row-parallel, gated and fused
mappings) and an MLAModelProvider whose `transformer_layer_spec` is the spec's TransformerBlock spec
(`dayone.adapters.megatron`), so `provide()` builds the same GPTModel as Miles' plugin and dayone's checks. The
package's `__init__` imports nothing of Megatron: `register()` imports bridge.py, whose decorator registers the
bridge (Megatron-Bridge discovers bridges by import only).

    <out>/megatron_bridge/<package>/bridge.py, __init__.py, spec_data.py
    <out>/megatron_bridge/<package>/weight_table.py, walk.py, mxfp4.py
"""

from __future__ import annotations

from dayone.adapters.megatron.config import model_fields
from dayone.adapters.pins import RELEASES
from dayone.adapters.targets import common
from dayone.adapters.targets.miles import standalone
from dayone.adapters.weightmap import build_weight_map
from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec

TARGET = "megatron-bridge"
RELEASE = RELEASES[TARGET].version


def provider(spec: ModelSpec) -> list[tuple[str, object]]:
    """MLAModelProvider fields: the spec's TransformerConfig fields (`dayone.adapters.megatron.config`, the ones the
    model is built with) and GPTModelProvider's vocabulary and embedding fields."""
    fields = list(model_fields(spec).items())  # None values too: q_lora_rank=None means no q LoRA (default 512)
    return fields + [
        ("vocab_size", spec.vocab_size),
        ("should_pad_vocab", False),  # the embedding and output layer hold exactly the checkpoint's rows
        ("seq_length", min(spec.max_position_embeddings, 8192)),
        ("share_embeddings_and_output_weights", spec.tie_word_embeddings),
        ("position_embedding_type", "none"),
    ]


def files(spec: ModelSpec) -> dict[str, str]:
    package = common.package_name(spec, TARGET)
    wm = build_weight_map(spec, "megatron", mxfp4="dequantize")
    what = f"Megatron-Bridge {RELEASE} bridge"
    context = {
        "header": common.header(spec, what),
        "spec": spec,
        "package": package,
        "release": RELEASE,
        "arch": spec.hf.architecture,
        "bridge_class": "".join(part.capitalize() for part in common.snake(spec.name).split("_")) + "Bridge",
        "provider": [(name, value) for name, value in provider(spec)],
        "quantized": spec.quantization is not None,
        "full_rank": spec.kda is not None and spec.kda.output_gate.kind == "full_rank",
        "a_log_shape": tuple(spec.kda.a_log_shape) if spec.kda else (),
        "heads": spec.kda.num_heads if spec.kda else 0,
        "spec_data": spec_to_dict(spec),
    }
    out = {
        f"{package}/__init__.py": common.render("megatron_bridge/init.py.j2", **context),
        f"{package}/bridge.py": common.render("megatron_bridge/bridge.py.j2", **context),
        f"{package}/spec_data.py": common.render("common/spec_data.py.j2", **context),
        f"{package}/weight_table.py": common.table_source(spec, wm, f"{what}, weight table"),
    }
    for name in ("walk.py", "mxfp4.py"):
        out[f"{package}/{name}"] = common.shipped_source(name, spec)
    out |= standalone(spec, package, context, TARGET, RELEASE)
    return common.finish(out)
