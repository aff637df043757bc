"""The static API check: symbols and keywords resolved by parsing a release's source (a small fake release here,
and the pinned SGLang release for planted mistakes), and the release cache."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from dayone.adapters import pins
from dayone.checks import releases
from dayone.checks.api import FileCheck, SourceTree


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))


@pytest.fixture
def fake_release(tmp_path):
    root = tmp_path / "release"
    _write(root, {
        "sglang/__init__.py": "",
        "sglang/layers/__init__.py": "from .norm import *\n",
        "sglang/layers/norm.py": """
            class Base:
                def __init__(self, size, eps=1e-6, *, dtype=None):
                    pass
            class RMSNorm(Base):
                pass
            def factory(config):
                if config:
                    return RMSNorm
                return Base
        """,
        "sglang/config.py": """
            from dataclasses import dataclass
            @dataclass
            class Core:
                num_layers: int = 1
            @dataclass
            class Provider(Core):
                hidden_size: int = 2
        """,
        "sglang/lazy.py": """
            MODULE_ATTRS = {"Provider": ".config:Provider"}
            def __getattr__(name):
                raise AttributeError(name)
        """,
        "sglang/registry.py": """
            class _Registry:
                def register_model(self, arch, cls):
                    pass
            ModelRegistry = _Registry()
        """,
    })  # fmt: skip
    return SourceTree([root])


def _check(tree: SourceTree, tmp_path: Path, code: str) -> list[str]:
    path = tmp_path / "generated.py"
    path.write_text(textwrap.dedent(code))
    return [p.message for p in FileCheck(path, tree).run()]


def test_resolves_reexports_bases_dataclasses_lazy_names_instances_and_factories(fake_release, tmp_path):
    ok = """
        from sglang.config import Provider
        from sglang.layers import RMSNorm, factory
        from sglang.registry import ModelRegistry
        import sglang.lazy
        RMSNorm(4, eps=1e-5, dtype=None)
        Provider(num_layers=3, hidden_size=4)
        factory(None)(8, eps=0.1)
        ModelRegistry.register_model("A", "m:A")
    """
    assert _check(fake_release, tmp_path, ok) == []


def test_catches_missing_symbols_and_keywords(fake_release, tmp_path):
    bad = """
        from sglang.layers import RMSNorm, LayerNorm, factory
        from sglang.config import Provider
        from sglang.nowhere import X
        RMSNorm(4, 1e-5, None)
        RMSNorm(4, epsilon=1e-5)
        Provider(num_layer=3)
        factory(None)(8, scale=2)
    """
    assert _check(fake_release, tmp_path, bad) == [
        "sglang.layers has no LayerNorm in the pinned release",
        "module sglang.nowhere does not exist in the pinned release",
        "RMSNorm() takes 2 positional arguments, 3 given",
        "RMSNorm() has no parameter 'epsilon' in the pinned release",
        "Provider() has no parameter 'num_layer' in the pinned release",
        "factory(...) -> Base() has no parameter 'scale' in the pinned release",
        "factory(...) -> RMSNorm() has no parameter 'scale' in the pinned release",
    ]


def test_the_cache_is_reused_without_downloading(tmp_path, monkeypatch):
    monkeypatch.setenv("DAYONE_CACHE", str(tmp_path))
    release = pins.Release("fakepkg", "1.0", "wheel", ("fakepkg",))
    calls = []

    def fake_download(rel, into):
        import zipfile

        calls.append(rel.key)
        wheel = into / "fakepkg-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr("fakepkg/__init__.py", "X = 1\n")
            zf.writestr("fakepkg-1.0.dist-info/METADATA", "")
        return wheel

    monkeypatch.setattr(releases, "_download_wheel", fake_download)
    first = releases.sources(release)
    second = releases.sources(release)
    assert first == second and calls == ["fakepkg-1.0"]
    assert (first / "fakepkg/__init__.py").read_text() == "X = 1\n"
    assert not (first / "fakepkg-1.0.dist-info").exists()


def test_planted_mistakes_against_the_pinned_sglang(tmp_path):
    from dayone.adapters.targets import sglang
    from dayone.spec.registry import load_spec

    tree = SourceTree([releases.sources(pins.RELEASES["sglang"])])
    text = sglang.files(load_spec("kimi-linear-48b-a3b"))["dayone_kimi_linear_48b_a3b_sglang/model.py"]
    planted = text.replace("RMSNorm(DIMS.hidden, eps=", "RMSNorm(DIMS.hidden, epsilon=", 1).replace(
        "import StandardTopKOutput", "import StandardTopKOutputs"
    )
    problems = _check(tree, tmp_path, planted)
    assert "sglang.srt.layers.moe.topk has no StandardTopKOutputs in the pinned release" in problems
    assert "RMSNorm() has no parameter 'epsilon' in the pinned release" in problems


def test_model_tree_must_build_every_table_parameter(tmp_path):
    from dayone.adapters.targets import common, sglang
    from dayone.checks.static import _model_names
    from dayone.spec.registry import load_spec

    files = sglang.files(load_spec("kimi-linear-48b-a3b"))
    model = "dayone_kimi_linear_48b_a3b_sglang/model.py"
    files[model] = files[model].replace("self.o_norm = RMSNorm", "self.out_norm = RMSNorm")
    common.write_tree(tmp_path / "sglang", files)
    assert _model_names(tmp_path / "sglang", files) == [
        f"{model}: builds no module 'o_norm' for parameter model.layers.{{i}}.self_attn.o_norm.weight"
    ]
