"""`generate --check` for SGLang: what its registry, loader and model runner ask of a generated model module
(pipeline/checks/sglang_protocol.py) and the expert parameter names its MXFP4 MoE method registers
(pipeline/checks/protocols.py), both read from the pinned sglang release's source as --check reads it: the
generated adapter passes; each planted mistake is named."""

from __future__ import annotations

from pathlib import Path

import pytest
from dayone.adapters import pins
from dayone.adapters.targets import common, sglang
from dayone.adapters.weightmap import layouts
from dayone.checks import releases
from dayone.checks.api import SourceTree
from dayone.checks.protocols import check_quantized_names
from dayone.checks.sglang_protocol import check_sglang_model, release_wants
from dayone.checks.static import load_generated
from test_sglang_probe import tiny_spec


@pytest.fixture(scope="module")
def tree() -> SourceTree:
    return SourceTree([releases.sources(pins.RELEASES["sglang"])])


@pytest.fixture(scope="module")
def generated() -> tuple[str, str]:
    spec = tiny_spec("kimi-k3")
    text = next(t for path, t in sglang.files(spec).items() if path.endswith("/model.py"))
    return text, spec.hf.architecture


def test_the_release_states_what_it_asks(tree):
    wants = release_wants(tree)
    assert wants.missing == []
    assert wants.entry_attribute == "EntryClass"
    assert {"config", "quant_config"} <= wants.init_keywords
    assert wants.load_weights_args == 1 and wants.forward_args == 3  # forward(input_ids, positions, forward_batch)


def check(tree, tmp_path: Path, text: str, arch: str) -> list[str]:
    path = tmp_path / "model.py"
    path.write_text(text)
    return [str(p) for p in check_sglang_model(path, "model.py", tree, arch)]


def test_generated_model_module_meets_them(tree, generated, tmp_path):
    assert check(tree, tmp_path, *generated) == []


PLANTED = {
    "no EntryClass": (("EntryClass = ", "Entry = "), "assigns no EntryClass naming {arch}"),
    "no load_weights": (("def load_weights(self", "def load_weights_renamed(self"), "{arch} lacks load_weights()"),
    "forward without positions": (
        ("positions: torch.Tensor, forward_batch: ForwardBatch, input_embeds=None)", "forward_batch: ForwardBatch)"),
        "{arch}.forward cannot take the 3 positional arguments",
    ),
    "constructor without quant_config": (
        ("quant_config: QuantizationConfig | None = None, ", ""),
        "{arch}.__init__ takes no quant_config",
    ),
}
IN_CLASS = ("forward without positions", "constructor without quant_config")  # other classes have their own


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_planted_protocol_mistake_is_named(tree, generated, tmp_path, case):
    (old, new), message = PLANTED[case]
    text, arch = generated
    assert old in text, f"the planted mistake matched nothing: {old!r}"
    text = _in_class(text, arch, old, new) if case in IN_CLASS else text.replace(old, new)
    problems = check(tree, tmp_path, text, arch)
    assert any(message.format(arch=arch) in p for p in problems), problems


def _in_class(text: str, arch: str, old: str, new: str) -> str:
    """Replace `old` once, inside the architecture class."""
    head, tail = text.split(f"class {arch}", 1)
    assert old in tail, f"the planted mistake matched nothing in {arch}: {old!r}"
    return head + f"class {arch}" + tail.replace(old, new, 1)


def test_expert_names_the_mxfp4_method_does_not_register_are_named(tree, tmp_path, monkeypatch):
    """SGLang's Mxfp4MoEMethod registers w13_weight / w2_weight (and their scales): the generated table passes; the
    old `weight_packed` suffix, which left the packed experts unloaded, is named."""
    spec = tiny_spec("kimi-k3")
    table_module = f"{common.package_name(spec, 'sglang')}.weight_table"
    common.write_tree(tmp_path / "ok", sglang.files(spec))
    table = load_generated(tmp_path / "ok", table_module)
    assert check_quantized_names(table, tree, "sglang", "mxfp4-pack-quantized", "weight_table.py") == []
    monkeypatch.setattr(layouts, "INFERENCE_MXFP4_SUFFIX", {"packed": "weight_packed", "scale": "weight_scale"})
    common.write_tree(tmp_path / "planted", sglang.files(spec))
    table = load_generated(tmp_path / "planted", table_module)
    problems = check_quantized_names(table, tree, "sglang", "mxfp4-pack-quantized", "weight_table.py")
    assert problems and "registers no parameter 'w13_weight_packed'" in problems[0], problems
