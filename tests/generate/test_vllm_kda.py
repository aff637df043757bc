"""The generated vLLM model's KDA layers are vLLM's own KimiGatedDeltaNetAttention: the vllm-layout table names the
parameters that layer builds, with the shard ids vLLM's own Kimi loader uses (both read from the pinned vLLM source),
the generated code raises nothing unimplemented, and a planted mistake in the KDA code is caught statically."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from dayone.adapters.pins import RELEASES
from dayone.adapters.targets import vllm
from dayone.adapters.weightmap import build_weight_map
from dayone.checks.api import FileCheck, SourceTree
from dayone.checks.releases import sources
from dayone.core.errors import InputError
from dayone.spec.registry import load_spec
from generate_fixtures import parallel_k3_spec
from model_fixtures import with_updates

KDA_LAYER = "vllm/model_executor/layers/mamba/gdn/kimi_gdn_linear_attn.py"
KIMI_LOADER = "vllm/models/kimi_k3/nvidia/model.py"  # KimiLinearModel.load_weights: vLLM's stacked mapping
SPECS = ["kimi-k3", "kimi-linear-48b-a3b"]


@pytest.fixture(scope="module")
def release() -> Path:
    return sources(RELEASES["vllm"])


def _method(root: Path, rel: str, cls: str, name: str) -> ast.FunctionDef:
    tree = ast.parse((root / rel).read_text())
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _kda_params(spec) -> dict[str, list]:
    """Leaf module (or parameter) under a KDA layer's self_attn -> the vllm table's rules filling it."""
    table = build_weight_map(spec, "vllm", "packed")
    out: dict[str, list] = {}
    for rule in table.RULES:
        if rule.layers == "kda":
            out.setdefault(rule.target.split(".self_attn.")[1].split(".")[0], []).append(rule)
    return out


@pytest.mark.parametrize("name", SPECS)
def test_table_names_what_vllms_kda_layer_builds(release, name):
    init = _method(release, KDA_LAYER, "KimiGatedDeltaNetAttention", "__init__")
    built = {
        t.attr
        for node in ast.walk(init)
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
    assert set(_kda_params(load_spec(name))) <= built


@pytest.mark.parametrize("name", SPECS)
def test_fused_parts_are_vllms_shard_ids(release, name):
    """(checkpoint leaf -> shard id) of in_proj_qkvgfab and conv1d, as vLLM's own Kimi loader has them."""
    spec = load_spec(name)
    full_rank = spec.kda.output_gate.kind == "full_rank"
    loader = _method(release, KIMI_LOADER, "KimiLinearModel", "load_weights")
    names = {}
    for node in ast.walk(loader):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.IfExp):  # beta_shard_id = 5 if ... else 3
            names[node.targets[0].id] = (node.value.body if full_rank else node.value.orelse).value
    vllm_ids: dict[str, dict[str, int]] = {}
    for node in ast.walk(loader):
        if isinstance(node, ast.Tuple) and len(node.elts) == 3 and isinstance(node.elts[0], ast.Constant):
            param, leaf, shard = node.elts
            if param.value in (".in_proj_qkvgfab", ".conv1d"):
                shard_id = shard.value if isinstance(shard, ast.Constant) else names[shard.id]
                vllm_ids.setdefault(param.value[1:], {})[leaf.value[1:]] = shard_id
    assert sorted(vllm_ids) == ["conv1d", "in_proj_qkvgfab"]
    if not full_rank:
        del vllm_ids["in_proj_qkvgfab"]["g_proj"]  # appended only with the full-rank gate
    params = _kda_params(spec)
    for fused, ids in vllm_ids.items():
        table_ids = {r.source.split(".self_attn.")[1].split(".")[0]: r.shard for r in params[fused]}
        assert table_ids == ids, fused


@pytest.mark.parametrize("name", SPECS)
def test_generated_kda_is_vllms_layer(name):
    spec = load_spec(name)
    files = vllm.files(spec)
    assert not any("NotImplementedError" in text for text in files.values())
    model = next(text for path, text in files.items() if path.endswith("/model.py"))
    tree = ast.parse(model)
    kda = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KimiDeltaAttention")
    assert [ast.unparse(b) for b in kda.bases] == ["KimiGatedDeltaNetAttention"]
    # vLLM's forward and kernels; on vLLM's CPU platform only, _forward takes cpu.py's path (its kernels are Triton)
    assert [n.name for n in kda.body if isinstance(n, ast.FunctionDef)] == ["__init__", "_forward"]
    forward = ast.unparse(next(n for n in kda.body if isinstance(n, ast.FunctionDef) and n.name == "_forward"))
    assert "if current_platform.is_cpu():" in forward and "super()._forward(" in forward
    lower = spec.kda.gate.lower_bound
    assert f'"gate_lower_bound": {lower},' in model
    assert f'"use_full_rank_gate": {spec.kda.output_gate.kind == "full_rank"},' in model


def test_a_planted_kda_mistake_is_caught(release, tmp_path):
    model = next(text for path, text in vllm.files(load_spec("kimi-k3")).items() if path.endswith("/model.py"))
    planted = model.replace('activation="sigmoid")', 'act="sigmoid")').replace(
        "import KimiGatedDeltaNetAttention", "import KimiDeltaAttention"
    )
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(planted))
    problems = [p.message for p in FileCheck(path, SourceTree([release])).run()]
    assert (
        "vllm.model_executor.layers.mamba.gdn.kimi_gdn_linear_attn has no KimiDeltaAttention in the pinned release"
        in problems
    )
    assert "FusedRMSNormGated() has no parameter 'act' in the pinned release" in problems


def test_a_gate_rank_vllm_cannot_hold_is_refused():
    spec = with_updates(parallel_k3_spec(), {"kda": {"gate": {"rank": 16}}})
    with pytest.raises(
        InputError, match=r"kda.gate.rank = 16 is not supported by target vllm: .* equal to kda.head_dim \(8\)$"
    ):
        vllm.files(spec)
