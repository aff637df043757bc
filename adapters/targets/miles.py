"""Miles: what Miles consumes for a new model, found in Miles' K3 support (radixark/miles, K3 branch).

    <out>/miles/scripts/models/<name>.sh       MODEL_ARGS=(...) as Miles' scripts/models/*.sh, --spec on the plugin
    <out>/miles/scripts/models/<name>.py       the same arguments as `model_args(**kw) -> str`
    <out>/miles/<package>/plugin.py            get_<name>_spec(args, config, vp_stage): the `--spec` function Miles'
                                               model provider calls; returns the TransformerBlock spec of the model
                                               (`dayone.adapters.megatron`) for megatron-core's GPTModel
    <out>/miles/<package>/spec_data.py         the spec the plugin builds the layers from, as data
    <out>/miles/<package>/convert.py           convert_<name>_to_hf (weight sync), load_hf, save_hf
    <out>/miles/<package>/weight_table.py, walk.py, mxfp4.py
    <out>/miles/miles_megatron_to_hf.patch     Miles dispatches its Megatron->HF converters by model name in a fixed
                                               if/elif (megatron_to_hf/__init__.py): the smallest patch calling ours
Only arguments Megatron accepts are passed: megatron-core TransformerConfig fields (dashed) and the Megatron-LM
training flags Miles' own K3 script passes (`MEGATRON_LM_FLAGS`). What Megatron has no argument for (KDA, attention
residuals, SiTU, the latent MoE and its norm) the plugin reads from the spec.
"""

from __future__ import annotations

from dayone.adapters.megatron import vendor
from dayone.adapters.megatron.config import model_fields
from dayone.adapters.pins import RELEASES, TARGET_RELEASES
from dayone.adapters.targets import common
from dayone.adapters.weightmap import build_weight_map
from dayone.spec.layout import to_expression
from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec

TARGET = "miles"
RELEASE = f"megatron-core {RELEASES['megatron-core'].version}"
# The Miles commit (its K3 branch) whose megatron_to_hf/__init__.py the patch is written against, and that file's
# git blob: the patch applies to exactly this content.
MILES_COMMIT = "c7969ad1f64980688cd1530426dde42851b86d5c"
MILES_DISPATCH = "miles/backends/megatron_utils/megatron_to_hf/__init__.py"
MILES_DISPATCH_BLOB = "5f50ce493b69838c8ba6127f9299644b172818b3"
# The model arguments, in the order Miles' K3 script passes them, by their Megatron-LM names (argparse dests, as
# Python spells them): a megatron-core TransformerConfig field (its value from `model_fields`, the fields the model
# is built with; the rest of them are the plugin's to set) or one of MEGATRON_LM_FLAGS. Miles spells each with dashes
# (`flag`); None and False values are dropped.
ARGUMENTS = (
    "num_layers", "hidden_size", "vocab_size", "max_position_embeddings", "spec", "normalization", "norm_epsilon",
    "disable_bias_linear", "swiglu", "untie_embeddings_and_output_weights", "position_embedding_type",
    "linear_attention_freq", "num_experts", "ffn_hidden_size", "num_attention_heads", "kv_channels", "hidden_dropout",
    "attention_dropout", "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim",
    "qk_pos_emb_head_dim", "v_head_dim", "qk_layernorm", "moe_layer_freq", "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size", "moe_router_topk", "moe_router_score_function", "moe_router_pre_softmax",
    "moe_router_enable_expert_bias", "moe_router_bias_update_rate", "moe_router_topk_scaling_factor",
    "moe_router_num_groups", "moe_router_group_topk", "moe_router_dtype", "moe_router_load_balancing_type",
    "moe_aux_loss_coeff",
)  # fmt: skip
# Megatron-LM training flags that name no TransformerConfig field, each as Miles' K3 script passes it
# (radixark/miles@c7969ad scripts/models/kimi-k3.sh): the config field it sets and how (a bool: the field's value
# when the bare flag is given; None: the flag's value), or None when it sets no config field.
MEGATRON_LM_FLAGS = {
    "spec": None,
    "vocab_size": None,
    "max_position_embeddings": None,
    "make_vocab_size_divisible_by": None,
    "position_embedding_type": None,
    "linear_attention_freq": None,  # megatron-core's hybrid-pattern field (1 = linear attention); the plugin checks it
    "untie_embeddings_and_output_weights": ("share_embeddings_and_output_weights", False),
    "disable_bias_linear": ("add_bias_linear", False),
    "swiglu": ("gated_linear_unit", True),
    "norm_epsilon": ("layernorm_epsilon", None),
    "num_experts": ("num_moe_experts", None),
}


def flag(name: str) -> str:
    """Miles' (Megatron-LM's command-line) spelling of an argument: `moe_router_topk` -> `moe-router-topk`."""
    return name.replace("_", "-")


def arguments(spec: ModelSpec) -> list[tuple[str, object]]:
    """ARGUMENTS with their values for the spec (None and False included: the scripts drop them)."""
    package = common.package_name(spec, TARGET)
    fields = model_fields(spec) | {"share_embeddings_and_output_weights": spec.tie_word_embeddings}
    own = {
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "spec": f"{package}.plugin get_{common.snake(spec.name)}_spec",
        "position_embedding_type": "none",
        "linear_attention_freq": (
            [1 if a == "kda" else 0 for a in spec.attention_kinds] if spec.kda is not None else None
        ),
    }
    out = []
    for name in ARGUMENTS:
        sets = MEGATRON_LM_FLAGS.get(name)
        if name in own:
            value = own[name]
        elif sets is None:
            value = fields.get(name)
        else:
            field, given = sets
            value = fields.get(field) if given is None else fields.get(field) == given
        if name.endswith("_freq") and value is not None:
            value = list_expression([str(v) for v in value])
        out.append((name, value))
    return out


def model_args(spec: ModelSpec) -> list[tuple[str, object]]:
    """The arguments as Miles passes them (dashed flags), in ARGUMENTS' order."""
    return [(flag(name), value) for name, value in arguments(spec)]


def list_expression(flags: list[str]) -> str:
    """A per-layer 0/1 list as the Python expression Megatron's argument parser evaluates: "([1,1,1,0]*23+[0])"."""
    terms = []
    for term in to_expression(tuple(flags)).split(" + "):
        count, _, block = term.rpartition(" x ")
        body = "[" + ",".join(block.strip("[]").split()) + "]"
        terms.append(f"{body}*{count}" if count else body)
    return "(" + "+".join(terms) + ")"


def unknown_arguments(flags: list[str], config_fields: set[str]) -> list[str]:
    """The (dashed) flags neither a TransformerConfig field (`config_fields`) nor a known Megatron-LM flag."""
    lm_flags = {flag(name) for name in MEGATRON_LM_FLAGS}
    return [f for f in flags if f not in lm_flags and f.replace("-", "_") not in config_fields]


def shell_args(args: list[tuple[str, object]]) -> list[str]:
    """The MODEL_ARGS lines of the .sh script: `--flag value`, values quoted for bash."""
    lines = []
    for flag, value in args:
        if value is True:
            lines.append(f"--{flag}")
        elif flag == "spec":
            module, function = str(value).split()
            lines.append(f'--spec "{module}" "{function}"')
        else:
            lines.append(f'--{flag} "{value}"')
    return lines


def model_name(spec: ModelSpec) -> str:
    """Miles' `--model-name` for the model, the one name its converter dispatch knows ours by: the package's name
    (Miles lower-cases it and matches its own converters by substring, so it must be lower-case and must not be
    mistaken for theirs; the patch compares it whole, first)."""
    return common.package_name(spec, TARGET)


def dispatch_patch(name: str, package: str, snake: str) -> str:
    """The unified diff that sends Miles' converter dispatch to ours when --model-name is the package's name (the one
    converter name: `model_name`): first in the chain, since Miles' own branches match by substring ("kimi_k3" in
    model_name). Its first line, which `git apply` skips, names the Miles commit and file blob it applies to."""
    return (
        f"Written against radixark/miles@{MILES_COMMIT} ({MILES_DISPATCH}, blob {MILES_DISPATCH_BLOB}).\n"
        f"--- a/{MILES_DISPATCH}\n+++ b/{MILES_DISPATCH}\n"
        "@@ -33,6 +33,9 @@\n"
        " def _convert_to_hf_core(args, model_name, name, param):\n"
        "     model_name = model_name.lower()\n"
        f'+    if model_name == "{name}":\n'
        f"+        from {package}.convert import convert_{snake}_to_hf\n"
        f"+        return convert_{snake}_to_hf(args, name, param)\n"
        "     if (\n"
        '         "glm4moelite" in model_name\n'
        '         or "deepseekv3" in model_name\n'
        '         or "glmmoedsa" in model_name\n'
    )


def files(spec: ModelSpec) -> dict[str, str]:
    package = common.package_name(spec, TARGET)
    snake = common.snake(spec.name)
    wm = build_weight_map(spec, "megatron", mxfp4="dequantize")
    what = "Miles weight conversion"
    args = [(name, value) for name, value in model_args(spec) if value is not None and value is not False]
    context = {
        "header": common.header(spec, what),
        "spec": spec,
        "package": package,
        "snake": snake,
        "quantized": spec.quantization is not None,
        "a_log_shape": list(spec.kda.a_log_shape) if spec.kda else [],
        "args": args,
        "shell_args": shell_args(args),
        "miles_commit": MILES_COMMIT,
        "model_name": model_name(spec),
        "dispatch_file": MILES_DISPATCH,
        "spec_data": spec_to_dict(spec),
    }
    out = {
        f"scripts/models/{spec.name}.py": common.render(
            "miles/model_args.py.j2", **context | {"header": common.header(spec, "Miles model arguments")}
        ),
        f"scripts/models/{spec.name}.sh": common.render(
            "miles/model_args.sh.j2", **context | {"header": common.header(spec, "Miles model arguments")}
        ),
        f"{package}/__init__.py": common.render("miles/init.py.j2", **context),
        f"{package}/convert.py": common.render("miles/convert.py.j2", **context),
        f"{package}/plugin.py": common.render("miles/plugin.py.j2", **context),
        f"{package}/spec_data.py": common.render("common/spec_data.py.j2", **context),
        "miles_megatron_to_hf.patch": dispatch_patch(model_name(spec), package, snake),
        f"{package}/weight_table.py": common.table_source(spec, wm, f"{what}, weight table"),
    }
    for name in ("walk.py", "mxfp4.py"):
        out[f"{package}/{name}"] = common.shipped_source(name, spec)
    out |= standalone(spec, package, context, TARGET, RELEASE)
    return common.finish(out)


def standalone(spec: ModelSpec, package: str, context: dict, target: str, release: str) -> dict[str, str]:
    """The copies of dayone's Megatron model the package runs (`vendor`) and the pyproject declaring what they
    import: Miles' and Megatron-Bridge's packages (both generators call this) run in a trainer's environment, which
    has no dayone."""
    copies = vendor.vendored_files(lambda what: common.header(spec, what))
    # the framework as an extra pinned to the checked releases, as `integrate package` declares it: a trainer's
    # environment has its own (often CUDA-specific) build, which a hard requirement would let pip replace
    releases = [RELEASES[name] for name in TARGET_RELEASES[target]]
    extras = {releases[0].name: [f"{r.name}=={r.version}" for r in releases]}
    pyproject = common.render(
        "common/pyproject.toml.j2", **context | {"release": release}, target=target, entry_points={}, dependencies=vendor.REQUIREMENTS, extras=extras, packages=vendor.packages(package, copies),
    )  # fmt: skip
    return {f"{package}/{rel}": text for rel, text in copies.items()} | {"pyproject.toml": pyproject}
