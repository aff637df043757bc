"""vLLM: a plugin package registering the model through the `vllm.general_plugins` entry point, lazily by its
"module:Class" string. KDA layers are vLLM's own KimiGatedDeltaNetAttention, configured from the spec; the weight
table (layout "vllm") names that layer's parameters.

    <out>/vllm/pyproject.toml               [project.entry-points."vllm.general_plugins"]
    <out>/vllm/<package>/__init__.py        register()
    <out>/vllm/<package>/model.py           the model (vLLM layers)
    <out>/vllm/<package>/weight_table.py    the vllm-layout weight map (MXFP4 experts kept packed)
    <out>/vllm/<package>/loading.py, walk.py, mxfp4.py   the table walker, shipped verbatim
    <out>/vllm/<package>/cpu.py             the CPU paths (vLLM's CPU platform only), computing with dayone's
                                            references shipped beside it (kda_reference.py, mla_reference.py, ...)
"""

from __future__ import annotations

from dayone.adapters.targets import common
from dayone.adapters.weightmap import TARGET_LAYOUT, build_weight_map
from dayone.checks.releases import RELEASES
from dayone.core.errors import InputError
from dayone.spec.schema import ModelSpec

TARGET = "vllm"
RELEASE = RELEASES[TARGET].version
# KimiGatedDeltaNetAttention sizes its low-rank gate factors by head_dim and accepts safe-gate lower bounds in
# [KDA_LOWER_BOUND_MIN, 0) (vllm/model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py).
KDA_LOWER_BOUND_MIN = -5.0
# The model types vLLM's own code knows, with the architecture whose config hook (vllm/model_executor/models/
# config.py: MODELS_CONFIG_MAP) applies to their checkpoints; its config registry has a class for each.
VLLM_FAMILIES = {"kimi_k3": "KimiK3ForConditionalGeneration", "kimi_linear": "KimiLinearForCausalLM"}


def family(spec: ModelSpec) -> dict | None:
    """For a model type vLLM does not know whose conventions extend one it does: what register() maps it to."""
    from dayone.spec.family import lineage

    types = lineage(spec.hf.model_type, spec.conventions)
    if types[0] in VLLM_FAMILIES:
        return None
    known = next((t for t in types if t in VLLM_FAMILIES), None)
    return {"model_type": known, "architecture": VLLM_FAMILIES[known]} if known else None


def kda_fits(spec: ModelSpec) -> None:
    """Raise InputError (one line) when vLLM's KDA layer cannot hold the spec's KDA."""
    k = spec.kda
    if k is None:
        return
    ranks = {"kda.gate.rank": k.gate.rank, "kda.output_gate.rank": k.output_gate.rank}
    if k.output_gate.kind != "low_rank":
        del ranks["kda.output_gate.rank"]
    for field, rank in ranks.items():
        if rank is not None and rank != k.head_dim:
            raise InputError(
                f"{spec.name}: {field} = {rank} is not supported by target vllm: vLLM {RELEASE}'s KDA layer needs it "
                f"equal to kda.head_dim ({k.head_dim})"
            )
    lower = k.gate.lower_bound
    if lower is not None and not KDA_LOWER_BOUND_MIN <= lower < 0:
        raise InputError(
            f"{spec.name}: kda.gate.lower_bound = {lower} is not supported by target vllm: vLLM {RELEASE}'s KDA layer "
            f"takes lower bounds in [{KDA_LOWER_BOUND_MIN}, 0)"
        )


def refuse_unsupported(spec: ModelSpec) -> None:
    """Raise InputError (one line naming field, value and target) for a spec field the generated code cannot honour."""
    if (line := common.yarn_positions_refusal(spec, TARGET)) is not None:
        raise InputError(f"{spec.name}: {line}")


def files(spec: ModelSpec) -> dict[str, str]:
    refuse_unsupported(spec)
    kda_fits(spec)
    package = common.package_name(spec, TARGET)
    wm = build_weight_map(spec, TARGET_LAYOUT[TARGET], mxfp4="packed")
    what = f"vLLM {RELEASE} plugin"
    context = common.engine_context(spec, package, what, RELEASE, (d.kind for d in wm.DERIVED))
    context |= {
        "full_rank": spec.kda is not None and spec.kda.output_gate.kind == "full_rank",
        "family": family(spec),
    }
    plugins = {"vllm.general_plugins": {package: f"{package}:register"}}
    out = {
        f"{package}/__init__.py": common.render("vllm/init.py.j2", **context),
        f"{package}/model.py": common.render("vllm/model.py.j2", **context),
        f"{package}/cpu.py": common.render("vllm/cpu.py.j2", **context),
        f"{package}/weight_table.py": common.table_source(spec, wm, f"{what}, weight table"),
        "pyproject.toml": common.render("common/pyproject.toml.j2", **context, target=TARGET, entry_points=plugins),
    }
    for name in common.SHIPPED:
        out[f"{package}/{name}"] = common.shipped_source(name, spec)
    for name, text in common.cpu_references(spec).items():
        out[f"{package}/{name}"] = text
    return common.finish(out)
