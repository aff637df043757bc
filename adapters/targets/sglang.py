"""SGLang: an external model package (SGLANG_EXTERNAL_MODEL_PACKAGE) whose model class is named after the
checkpoint's architecture, with `EntryClass`, a table-walking `load_weights` and derived-tensor refresh.

    <out>/sglang/pyproject.toml
    <out>/sglang/<package>/__init__.py      how to use it
    <out>/sglang/<package>/model.py         the model (SGLang layers), EntryClass
    <out>/sglang/<package>/weight_table.py  the inference-layout weight map (MXFP4 experts kept packed)
    <out>/sglang/<package>/loading.py, walk.py, mxfp4.py   the table walker, shipped verbatim
    <out>/sglang/<package>/cpu.py           the paths SGLang has only as GPU kernels (taken without a GPU only),
                                            computing with dayone's references shipped beside it (kda_reference.py, ...)
"""

from __future__ import annotations

import re

from dayone.adapters.pins import RELEASES
from dayone.adapters.targets import common
from dayone.adapters.targets.refusals import sglang_refusals
from dayone.adapters.weightmap import TARGET_LAYOUT, build_weight_map
from dayone.core.errors import InputError
from dayone.spec.schema import ModelSpec

TARGET = "sglang"
RELEASE = RELEASES[TARGET].version
# The model types SGLang's own code knows, with the architecture its model config derives the attention layout for
# (sglang/srt/configs/model_config.py: _derive_model_shapes lists architectures by name).
SGLANG_FAMILIES = {"kimi_k3": "KimiK3ForConditionalGeneration", "kimi_linear": "KimiLinearForCausalLM"}


def family(spec: ModelSpec) -> dict | None:
    """For a model type SGLang does not know whose conventions extend one it does: what register() maps it to."""
    known = common.known_ancestor(spec, SGLANG_FAMILIES)
    if known is None:
        return None
    # transformers' AutoConfig keys its lazy mappings on the class name: the new config class gets its own.
    config_class = re.sub(r"For[A-Za-z]+$", "", spec.hf.architecture) + "Config"
    return {"model_type": known, "architecture": SGLANG_FAMILIES[known], "config_class": config_class}


def files(spec: ModelSpec) -> dict[str, str]:
    refused = sglang_refusals(spec)
    if refused:
        raise InputError(refused[0])
    package = common.package_name(spec, TARGET)
    wm = build_weight_map(spec, TARGET_LAYOUT[TARGET], mxfp4="packed")
    what = f"SGLang {RELEASE} external model package"
    context = common.engine_context(spec, package, what, RELEASE, (d.kind for d in wm.DERIVED))
    context["family"] = family(spec)
    # A family member registers itself as an SGLang general plugin, which SGLang loads first in every process.
    plugins = {"sglang.srt.plugins": {package: f"{package}:register"}} if context["family"] else {}
    return common.engine_package(spec, TARGET, wm, what, context, plugins)
