"""Miles: `scripts/models/<name>.py` with `model_args(**kw) -> str`, and a package converting weights between the
checkpoint and Megatron (weight sync into SGLang, HF -> Megatron loading with TP and EP, gate+up fusion, A_log
padding, MXFP4 dequantized for training and requantized for sync).

    <out>/miles/scripts/models/<name>.py
    <out>/miles/<package>/convert.py        convert_<name>_to_hf, load_hf, save_hf
    <out>/miles/<package>/weight_table.py   the megatron-layout weight map (MXFP4 experts dequantized)
    <out>/miles/<package>/walk.py, mxfp4.py   the table walker, shipped verbatim
"""

from __future__ import annotations

import textwrap

from dayone.adapters.targets import common
from dayone.adapters.weightmap import build_weight_map
from dayone.spec.layout import to_expression
from dayone.spec.schema import ModelSpec

TARGET = "miles"
RELEASE = "megatron-core 0.16.1"


def model_args(spec: ModelSpec) -> list[tuple[str, object]]:
    """Megatron arguments (Megatron-Core TransformerConfig names, dashed), in a stable order."""
    args: list[tuple[str, object]] = [
        ("num-layers", spec.num_layers),
        ("hidden-size", spec.hidden_size),
        ("vocab-size", spec.vocab_size),
        ("max-position-embeddings", spec.max_position_embeddings),
        ("normalization", "RMSNorm"),
        ("norm-epsilon", spec.norm_eps),
        ("disable-bias-linear", True),
        ("swiglu", True),  # gated MLPs: linear_fc1 = [gate; up]
        ("untie-embeddings-and-output-weights", not spec.tie_word_embeddings),
        ("position-embedding-type", "none"),
    ]
    if spec.dense_intermediate_size:
        args.append(("ffn-hidden-size", spec.dense_intermediate_size))
    if spec.kda is not None:
        k = spec.kda
        kinds = spec.attention_kinds
        args += [
            ("linear-attention-freq", list_expression(["1" if a == "kda" else "0" for a in kinds])),
            ("linear-conv-kernel-dim", k.conv_kernel_size),
            ("linear-key-head-dim", k.head_dim),
            ("linear-value-head-dim", k.head_dim),
            ("linear-num-key-heads", k.num_heads),
            ("linear-num-value-heads", k.num_heads),
        ]
    if spec.mla is not None:
        m = spec.mla
        args += [
            ("multi-latent-attention", True),
            ("num-attention-heads", m.num_heads),
            ("kv-channels", m.v_head_dim),
            ("q-lora-rank", m.q_lora_rank),
            ("kv-lora-rank", m.kv_lora_rank),
            ("qk-head-dim", m.qk_nope_head_dim),
            ("qk-pos-emb-head-dim", m.qk_rope_head_dim),
            ("v-head-dim", m.v_head_dim),
            ("qk-layernorm", True),
            ("attention-output-gate", m.output_gate),
        ]
    if spec.moe is not None:
        e = spec.moe
        args += [
            ("num-experts", e.num_experts),
            ("moe-router-topk", e.experts_per_token),
            ("moe-ffn-hidden-size", e.expert_intermediate_size),
            ("moe-shared-expert-intermediate-size", e.shared_intermediate_size or None),
            ("moe-layer-freq", list_expression(["1" if f == "moe" else "0" for f in spec.ffn_kinds])),
            ("moe-router-score-function", e.router.activation),
            ("moe-router-enable-expert-bias", e.router.correction_bias),
            ("moe-router-bias-update-rate", 0),
            ("moe-router-topk-scaling-factor", e.router.scaling_factor),
            ("moe-router-num-groups", e.router.num_groups),
            ("moe-router-group-topk", e.router.topk_groups),
            ("moe-router-dtype", "fp32"),
            ("moe-grouped-gemm", True),
            ("moe-aux-loss-coeff", 0),
            ("moe-latent-size", e.latent_size),
        ]
    extras = k3_extras(spec)
    return args + extras


def list_expression(flags: list[str]) -> str:
    """A per-layer 0/1 list as the Python expression Megatron's argument parser evaluates: "([1,1,1,0]*23+[0])"."""
    terms = []
    for term in to_expression(tuple(flags)).split(" + "):
        count, _, block = term.rpartition(" x ")
        body = "[" + ",".join(block.strip("[]").split()) + "]"
        terms.append(f"{body}*{count}" if count else body)
    return "(" + "+".join(terms) + ")"


def k3_extras(spec: ModelSpec) -> list[tuple[str, object]]:
    """Arguments for what stock Megatron-Core lacks (read by the layer spec): KDA gates, SiTU, attention residuals."""
    out: list[tuple[str, object]] = []
    if spec.kda is not None:
        k = spec.kda
        out += [("kda-gate", k.gate.kind), ("kda-gate-lower-bound", k.gate.lower_bound), ("kda-gate-rank", k.gate.rank),
                ("kda-output-gate", k.output_gate.kind), ("kda-output-gate-rank", k.output_gate.rank)]  # fmt: skip
    if spec.activation.kind == "situ":
        out += [("activation", "situ"), ("situ-beta", spec.activation.beta),
                ("situ-linear-beta", spec.activation.linear_beta)]  # fmt: skip
    if spec.residual.kind == "attention":
        out.append(("attention-residual-block-size", spec.residual.block_size))
    if spec.moe is not None and spec.moe.latent_norm:
        out.append(("moe-latent-norm", True))
    return out


def files(spec: ModelSpec) -> dict[str, str]:
    package = common.package_name(spec, TARGET)
    wm = build_weight_map(spec, "megatron", mxfp4="dequantize")
    what = "Miles weight conversion"
    extras = [flag for flag, _ in k3_extras(spec)]
    context = {
        "header": common.header(spec, what),
        "spec": spec,
        "package": package,
        "snake": common.snake(spec.name),
        "quantized": spec.quantization is not None,
        "a_log_shape": list(spec.kda.a_log_shape) if spec.kda else [],
        "args": [(flag, value) for flag, value in model_args(spec) if value is not None and value is not False],
        "k3_extras": textwrap.fill(", ".join(f"--{flag}" for flag in extras), width=116, subsequent_indent=""),
    }
    out = {
        f"scripts/models/{spec.name}.py": common.render(
            "miles/model_args.py.j2", **context | {"header": common.header(spec, "Miles model arguments")}
        ),
        f"{package}/__init__.py": common.render("miles/init.py.j2", **context),
        f"{package}/convert.py": common.render("miles/convert.py.j2", **context),
        f"{package}/weight_table.py": common.table_source(spec, wm, f"{what}, weight table"),
        "pyproject.toml": common.render(
            "common/pyproject.toml.j2", **context, target=TARGET, release=RELEASE, entry_points={}
        ),
    }
    for name in ("walk.py", "mxfp4.py"):
        out[f"{package}/{name}"] = common.shipped_source(name, spec)
    return common.finish(out)
