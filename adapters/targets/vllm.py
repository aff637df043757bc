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

from dayone.adapters.pins import RELEASES
from dayone.adapters.targets import common
from dayone.adapters.targets.refusals import vllm_refusals
from dayone.adapters.weightmap import TARGET_LAYOUT, build_weight_map
from dayone.core.errors import InputError
from dayone.spec.schema import ModelSpec

TARGET = "vllm"
RELEASE = RELEASES[TARGET].version
# The model types vLLM's own code knows, with the architecture whose config hook (vllm/model_executor/models/
# config.py: MODELS_CONFIG_MAP) applies to their checkpoints; its config registry has a class for each.
VLLM_FAMILIES = {"kimi_k3": "KimiK3ForConditionalGeneration", "kimi_linear": "KimiLinearForCausalLM"}


def family(spec: ModelSpec) -> dict | None:
    """For a model type vLLM does not know whose conventions extend one it does: what register() maps it to."""
    known = common.known_ancestor(spec, VLLM_FAMILIES)
    return {"model_type": known, "architecture": VLLM_FAMILIES[known]} if known else None


def files(spec: ModelSpec) -> dict[str, str]:
    refused = vllm_refusals(spec)
    if refused:
        raise InputError(refused[0])
    package = common.package_name(spec, TARGET)
    wm = build_weight_map(spec, TARGET_LAYOUT[TARGET], mxfp4="packed")
    what = f"vLLM {RELEASE} plugin"
    context = common.engine_context(spec, package, what, RELEASE, (d.kind for d in wm.DERIVED))
    context |= {
        "full_rank": spec.kda is not None and spec.kda.output_gate.kind == "full_rank",
        "family": family(spec),
    }
    plugins = {"vllm.general_plugins": {package: f"{package}:register"}}
    return common.engine_package(spec, TARGET, wm, what, context, plugins)
