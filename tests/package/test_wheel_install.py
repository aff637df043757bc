"""Each built wheel installs into a fresh venv and imports there, without its framework.

One plain venv (`python -m venv --without-pip`, no system site-packages) gets all four wheels through this
environment's pip (`pip --python`, `--no-deps`). Two checks run in it:

1. Nothing but the wheels: torch, sglang, vllm and megatron are absent; the packages of all four targets import
   (their `__init__` imports no framework; Megatron-Bridge registers its bridge only when `register()` is called),
   the vLLM plugin's entry point is listed by importlib.metadata and loads, and the Miles model-args script is found
   as package data.
2. The wheels plus torch, their one declared requirement: torch's import closure (torch, numpy, ...) is linked from
   this environment into a folder on PYTHONPATH, since installing torch into the venv would download ~200 MB. Every
   module that needs only torch imports (weight_table, walk, mxfp4, loading, Miles' convert). The framework
   modules (SGLang's and vLLM's model.py, Megatron-Bridge's bridge.py) fail with ModuleNotFoundError naming exactly
   their framework: nothing else is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from conftest import REVISION
from dayone.adapters.targets.common import dayone_version, spec_digest
from dayone.package.version import package_version
from dayone.spec.registry import load_spec

CHECK = textwrap.dedent(
    """
    import importlib, importlib.metadata as md, importlib.resources, importlib.util, json, sys
    with_torch = sys.argv[1] == "torch"
    out = {"absent": [m for m in ("torch", "sglang", "vllm", "megatron") if importlib.util.find_spec(m) is None]}
    out["versions"] = {d: md.version(d) for d in ("dayone-kimi-k3-sglang", "dayone-kimi-k3-vllm",
                                                    "dayone-kimi-k3-miles", "dayone-kimi-k3-megatron-bridge")}
    eps = md.entry_points(group="vllm.general_plugins")
    out["plugins"] = {ep.name: ep.value for ep in eps}
    out["plugin_loads"] = all(callable(ep.load()) for ep in eps)
    script = importlib.resources.files("dayone_kimi_k3_miles") / "scripts/models/kimi-k3.py"
    out["miles_script"] = script.is_file()
    out["imports"] = {}
    modules = ["dayone_kimi_k3_sglang", "dayone_kimi_k3_vllm", "dayone_kimi_k3_miles", "dayone_kimi_k3_megatron_bridge"]
    if with_torch:
        for p in ("sglang", "vllm"):
            modules += [f"dayone_kimi_k3_{p}.{m}" for m in ("weight_table", "walk", "mxfp4", "loading", "model")]
        modules += [f"dayone_kimi_k3_miles.{m}" for m in ("weight_table", "walk", "mxfp4", "convert")]
        modules += [f"dayone_kimi_k3_megatron_bridge.{m}" for m in ("weight_table", "walk", "mxfp4", "bridge")]
    for name in modules:
        try:
            importlib.import_module(name)
            out["imports"][name] = "ok"
        except ModuleNotFoundError as err:
            out["imports"][name] = f"missing {err.name}"
    out["from_venv"] = all(m.__file__.startswith(sys.prefix) for n, m in sys.modules.items()
                           if n.startswith("dayone_kimi_k3_") and getattr(m, "__file__", None))
    print(json.dumps(out))
    """
)


CLOSURE = textwrap.dedent(
    """
    import sys
    before = set(sys.modules)
    import torch
    for name in sorted({n.split(".")[0] for n in set(sys.modules) - before}):
        module = sys.modules.get(name)
        path = list(getattr(module, "__path__", None) or []) or [getattr(module, "__file__", None)]
        if path[0]:
            print(path[0])
    """
)


def torch_closure(dest: Path) -> Path:
    """Links to the top-level modules `import torch` loads from this environment's site-packages."""
    paths = subprocess.run(
        [sys.executable, "-P", "-c", CLOSURE], capture_output=True, text=True, check=True
    ).stdout.split()
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    dest.mkdir()
    for origin in map(Path, paths):
        if not origin.resolve().is_relative_to(site):
            continue  # the standard library
        (dest / origin.name).symlink_to(origin)
        libs = origin.parent / f"{origin.name.split('.')[0]}.libs"  # shared libraries beside some (numpy.libs)
        if libs.is_dir() and not (dest / libs.name).exists():
            (dest / libs.name).symlink_to(libs)
    return dest


@pytest.fixture(scope="module")
def venv(packaged, tmp_path_factory):
    dist, _, _ = packaged
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root / "env"], check=True)
    python = root / "env" / "bin" / "python"
    wheels = sorted(map(str, dist.glob("*.whl")))
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q"]
    proc = subprocess.run([*install, *wheels], check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return python, root


def run_check(python: Path, mode: str, env_extra: dict, cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | env_extra
    proc = subprocess.run([python, "-c", CHECK, mode], check=False, capture_output=True, text=True, env=env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_wheels_import_in_a_fresh_venv(venv):
    python, root = venv
    out = run_check(python, "bare", {}, root)
    assert out["absent"] == ["torch", "sglang", "vllm", "megatron"]
    expected = package_version(dayone_version(), spec_digest(load_spec("kimi-k3")), REVISION, public=False)
    assert set(out["versions"].values()) == {expected}
    assert expected.endswith(".rev.0123456789ab")
    assert out["plugins"] == {"dayone_kimi_k3_vllm": "dayone_kimi_k3_vllm:register"}
    assert out["plugin_loads"] and out["miles_script"]
    assert out["imports"] == {
        "dayone_kimi_k3_sglang": "ok",
        "dayone_kimi_k3_vllm": "ok",
        "dayone_kimi_k3_miles": "ok",
        "dayone_kimi_k3_megatron_bridge": "ok",
    }
    assert out["from_venv"]  # imported from the venv, not from a source tree


def test_wheel_modules_need_only_torch_besides_the_framework(venv):
    python, root = venv
    deps = torch_closure(root / "torch-only")
    out = run_check(python, "torch", {"PYTHONPATH": str(deps)}, root)
    assert out["absent"] == ["sglang", "vllm", "megatron"]
    imports = out["imports"]
    expected = {name: "ok" for name in imports}
    expected |= {
        "dayone_kimi_k3_sglang.model": "missing sglang",
        "dayone_kimi_k3_vllm.model": "missing vllm",
        "dayone_kimi_k3_megatron_bridge.bridge": "missing megatron",
    }
    assert imports == expected
    assert len(imports) == 4 + 2 * 5 + 4 + 4
