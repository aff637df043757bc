"""vLLM: a plugin package registering the model through the `vllm.general_plugins` entry point, lazily by its
"module:Class" string.

    <out>/vllm/pyproject.toml               [project.entry-points."vllm.general_plugins"]
    <out>/vllm/<package>/__init__.py        register()
    <out>/vllm/<package>/model.py           the model (vLLM layers)
    <out>/vllm/<package>/weight_table.py    the inference-layout weight map (MXFP4 experts kept packed)
    <out>/vllm/<package>/loading.py, walk.py, mxfp4.py   the table walker, shipped verbatim
"""

from __future__ import annotations

from dayone.adapters.targets import common
from dayone.adapters.weightmap import build_weight_map
from dayone.spec.schema import ModelSpec

TARGET = "vllm"
RELEASE = "0.33.0"


def files(spec: ModelSpec) -> dict[str, str]:
    package = common.package_name(spec, TARGET)
    wm = build_weight_map(spec, "inference", mxfp4="packed")
    what = f"vLLM {RELEASE} plugin"
    context = {
        "header": common.header(spec, what),
        "spec": spec,
        "package": package,
        "release": RELEASE,
        "arch": spec.hf.architecture,
        "dims": common.dims(spec),
        "residual": spec.residual.kind == "attention",
        "quantized": spec.quantization is not None,
        "lm_attr": common.lm_attribute(spec),
        "derived_text": ", ".join(sorted({d.kind for d in wm.DERIVED})) or "(none)",
        **common.describe(spec),
    }
    plugins = {"vllm.general_plugins": {package: f"{package}:register"}}
    out = {
        f"{package}/__init__.py": common.render("vllm/init.py.j2", **context),
        f"{package}/model.py": common.render("vllm/model.py.j2", **context),
        f"{package}/weight_table.py": common.table_source(spec, wm, f"{what}, weight table"),
        "pyproject.toml": common.render("common/pyproject.toml.j2", **context, target=TARGET, entry_points=plugins),
    }
    for name in common.SHIPPED:
        out[f"{package}/{name}"] = common.shipped_source(name, spec)
    return common.finish(out)
