"""`generate --check` catches statically what vLLM itself would refuse: a star import of a name left out of
`__all__`, a protocol method the model registry requires, an expert parameter name the quantization method in use
never registers (read from the pinned vLLM release's source)."""

from __future__ import annotations

import textwrap

import pytest
from dayone.adapters import pins
from dayone.adapters.targets import common, vllm
from dayone.adapters.weightmap import layouts
from dayone.checks import releases
from dayone.checks.api import SourceTree
from dayone.checks.protocols import check_protocols, check_quantized_names
from dayone.checks.static import load_generated
from dayone.spec.registry import load_spec


@pytest.fixture(scope="module")
def release():
    return SourceTree([releases.sources(pins.RELEASES["vllm"])])


def test_star_import_follows_all(tmp_path):
    root = tmp_path / "release"
    (root / "fw").mkdir(parents=True)
    (root / "fw/__init__.py").write_text("from .impl import *\n")
    (root / "fw/impl.py").write_text(
        textwrap.dedent("""
        __all__ = ["public"]
        def public(): pass
        def hidden(): pass
    """)
    )
    tree = SourceTree([root])
    assert tree.lookup("fw", "public") is not None
    assert tree.lookup("fw", "hidden") is None  # `from fw.impl import *` does not bind it


def test_a_missing_protocol_method_is_named(release, tmp_path):
    spec = load_spec("kimi-k3")
    common.write_tree(tmp_path / "vllm", vllm.files(spec))
    (model,) = (tmp_path / "vllm").glob("*/model.py")
    assert check_protocols(model, "model.py", release, "vllm", spec.hf.architecture) == []
    model.write_text(
        model.read_text()
        .replace("def embed_input_ids(", "def embed(")
        .replace("def get_mamba_state_copy_func(", "def state_copy(")
    )
    problems = [p.message for p in check_protocols(model, "model.py", release, "vllm", spec.hf.architecture)]
    assert any("lacks embed_input_ids(), required by VllmModel" in p for p in problems), problems
    assert any("lacks get_mamba_state_copy_func(), required by IsHybrid" in p for p in problems), problems


def test_expert_names_the_mxfp4_method_does_not_register_are_named(release, tmp_path, monkeypatch):
    spec = load_spec("kimi-k3")
    monkeypatch.setattr(layouts, "INFERENCE_MXFP4_SUFFIX", {"packed": "weight_packed", "scale": "weight_scale"})
    common.write_tree(tmp_path / "vllm", vllm.files(spec))
    table = load_generated(tmp_path / "vllm", f"{common.package_name(spec, 'vllm')}.weight_table")
    problems = check_quantized_names(table, release, "vllm", "mxfp4-pack-quantized", "weight_table.py")
    assert problems and "registers no parameter 'w13_weight_packed'" in problems[0]
