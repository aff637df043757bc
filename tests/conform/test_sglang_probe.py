"""SGLang 0.5.23 is the judge of the generated SGLang adapters: the probe (pipeline/conform/probes/sglang_probe.py)
runs in SGLang's own environment (.venv/peers/sglang) and reports discovered / accepted / built / forward; loaded
is judged here from its dumps against dayone's reference reading of the checkpoint.

The reference is the weight map walked over the checkpoint for one tensor-parallel rank (`walk.to_target`), each
tensor in the dtype of the parameter SGLang built (bitwise: a load is a copy and a cast); derived tensors are
recomputed with `walk.derive` from the dumped parameters. SGLang's MXFP4 MoE method also registers zero expert
biases the checkpoint does not have: they must stay zero and nothing may write them.
Both shipped specs at tiny widths (expert intermediate 64, so MXFP4 scale groups split over two ranks) and their
first five layers (KDA, MLA, dense and MoE layers); one probe run per spec and world size, shared by the tests.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from dayone.adapters.targets import common, sglang
from dayone.adapters.weightmap import build_weight_map, walk
from dayone.checks.releases import RELEASES
from dayone.spec.registry import load_spec
from dayone.spec.schema import ModelSpec
from dayone.synth.scale import SCALES, scaled_spec
from dayone.synth.write import write_synthetic
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
PEER_PYTHON = ROOT / ".venv" / "peers" / "sglang" / "bin" / "python"
PROBE = ROOT / "pipeline" / "conform" / "probes" / "sglang_probe.py"
FRAMEWORK_OWNED = ("experts.w13_weight_bias", "experts.w2_weight_bias")  # Mxfp4MoEMethod's zero biases


def generate(spec: ModelSpec, root: Path) -> Path:
    """The generated SGLang package under root/gen, and an install folder root/site holding it (what
    `pip install --target` of its wheel lays out: the package folder)."""
    common.write_tree(root / "gen", sglang.files(spec))
    site = root / "site"
    package = common.package_name(spec, "sglang")
    shutil.copytree(root / "gen" / package, site / package)
    return site


def probe(site: Path, checkpoint: Path, world: int, out: Path) -> dict:
    if not PEER_PYTHON.is_file():
        raise AssertionError(f"{PEER_PYTHON} is missing: run .ci/setup.d/11-sglang.sh")
    cmd = [str(PEER_PYTHON), str(PROBE), "--package-site", str(site), "--checkpoint", str(checkpoint),
           "--world-size", str(world), "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    levels = out / "levels.json"
    if proc.returncode != 0 or not levels.is_file():
        raise AssertionError(f"probe exited {proc.returncode}: {proc.stderr[-3000:]}")
    return json.loads(levels.read_text())


def checkpoint_tensors(checkpoint: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for path in sorted(checkpoint.glob("*.safetensors")):
        out.update(load_file(path))
    return out


def judge(spec: ModelSpec, checkpoint: Path, out: Path, world: int) -> list[str]:
    """Problems with the load SGLang did, one line each naming the parameter or tensor; [] when every parameter
    equals its reference shard bitwise, was written exactly once, and every checkpoint tensor was consumed."""
    table = build_weight_map(spec, "inference", mxfp4="packed")
    source = checkpoint_tensors(checkpoint)
    passthrough = spec.passthrough.prefixes if spec.passthrough else ()
    problems: list[str] = []
    for rank in range(world):
        dumped = load_file(out / f"rank{rank}.safetensors")
        writes = json.loads((out / f"rank{rank}.writes.json").read_text())
        reference = walk.to_target(table, source.__getitem__, walk.Parallel(tp_rank=rank, tp_size=world))
        problems += _compare(rank, dumped, writes, reference, passthrough)
        problems += _derived(rank, table, dumped)
        unconsumed = sorted(n for n in set(source) - set(writes["consumed"]) if not n.startswith(passthrough))
        problems += [f"rank {rank}: {name}: checkpoint tensor not consumed" for name in unconsumed]
    return problems


def _compare(rank: int, dumped: dict, writes: dict, reference: dict, passthrough: tuple[str, ...]) -> list[str]:
    problems = []
    params = writes["params"]
    for name, ref in sorted(reference.items()):
        if name.startswith(passthrough):
            continue  # vision tower and projector: a text-only adapter holds none of them
        if name not in dumped:
            problems.append(f"rank {rank}: {name}: no such parameter in the model SGLang built")
            continue
        got = dumped[name]
        if got.shape != ref.shape and got.squeeze().shape != ref.squeeze().shape:
            problems.append(f"rank {rank}: {name}: shape {list(got.shape)}, reference shard {list(ref.shape)}")
            continue
        if not torch.equal(got.reshape(ref.shape), ref.to(got.dtype)):
            problems.append(f"rank {rank}: {name}: differs from the reference shard")
        count = params.get(name, {})
        if count.get("numel") and not count["min"] == count["max"] == 1:
            problems.append(f"rank {rank}: {name}: written {count['min']}..{count['max']} times per element, not once")
    for name, count in sorted(params.items()):
        if name in reference:
            continue
        if name.endswith(FRAMEWORK_OWNED):
            if count["max"] or bool(dumped[name].any()):
                problems.append(f"rank {rank}: {name}: framework-owned zero bias was written")
        else:
            problems.append(f"rank {rank}: {name}: parameter not in the weight map, written {count['max']} times")
    return problems


def _derived(rank: int, table, dumped: dict) -> list[str]:
    problems = []
    for name, d, inputs in walk.derived_rows(table):
        if not all(i in dumped for i in inputs):
            continue  # a layer this rank does not hold
        if name not in dumped:
            problems.append(f"rank {rank}: {name}: derived tensor missing after load")
            continue
        want = walk.derive(d.kind, [dumped[i] for i in inputs], d.dims)
        if not torch.equal(dumped[name], want):
            problems.append(f"rank {rank}: {name}: derived tensor stale or wrong")
    return problems


SPECS = ("kimi-k3", "kimi-linear-48b-a3b")
WORLDS = (1, 2)
LAYERS = 5
TINY = dataclasses.replace(SCALES["tiny"], expert_intermediate=64)


def tiny_spec(name: str) -> ModelSpec:
    return scaled_spec(load_spec(name), TINY, layers=LAYERS)


@pytest.fixture(scope="session")
def sglang_case(tmp_path_factory):
    """(spec, checkpoint, site) per shipped spec, made once."""
    cases = {}

    def make(name: str):
        if name not in cases:
            spec = tiny_spec(name)
            root = tmp_path_factory.mktemp(f"sglang-{name}")
            write_synthetic(spec, root / "checkpoint", seed=5, num_shards=2)
            cases[name] = (spec, root / "checkpoint", generate(spec, root))
        return cases[name]

    return make


@pytest.fixture(scope="session")
def sglang_run(sglang_case, tmp_path_factory):
    """levels.json and the dump folder of one probe run per (spec, world size)."""
    runs = {}

    def run(name: str, world: int):
        if (name, world) not in runs:
            _, checkpoint, site = sglang_case(name)
            out = tmp_path_factory.mktemp(f"probe-{name}-{world}")
            runs[(name, world)] = (probe(site, checkpoint, world, out), out)
        return runs[(name, world)]

    return run


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("name", SPECS)
def test_levels_a_to_c_pass_and_forward_says_why_not(sglang_run, name, world):
    levels, _ = sglang_run(name, world)
    assert levels["framework"] == "sglang" and levels["version"] == RELEASES["sglang"].version
    assert levels["world_size"] == world
    for level in ("discovered", "accepted", "built"):
        assert levels["levels"][level]["status"] == "pass", (level, levels["levels"][level])
    assert levels["levels"]["loaded"]["status"] == "not run"  # the probe dumps; the judge is below
    forward = levels["levels"]["forward"]
    assert forward["status"] == "not run" and "CUDA" in forward["detail"]
    facts = levels["facts"]
    assert facts["model_class"].startswith(f"dayone_{name.replace('-', '_').replace('.', '_')}")
    assert facts["is_hybrid"] and facts["kda"] and facts["use_mla"]
    spec = tiny_spec(name)
    assert facts["full_attention_layer_ids"] == [i for i, k in enumerate(spec.attention_kinds) if k == "mla"]
    if spec.quantization is not None:
        assert facts["quantization"] == "compressed-tensors" and "Mxfp4MoEMethod" in facts["quant_methods"]


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("name", SPECS)
def test_level_d_loaded_equals_the_reference_shard(sglang_case, sglang_run, name, world):
    spec, checkpoint, _ = sglang_case(name)
    _, out = sglang_run(name, world)
    assert judge(spec, checkpoint, out, world) == []


def _planted(sglang_case, tmp_path, name: str, edit) -> tuple[ModelSpec, Path, Path]:
    spec, checkpoint, site = sglang_case(name)
    planted = tmp_path / "site"
    shutil.copytree(site, planted)
    package = common.package_name(spec, "sglang")
    edit(planted / package)
    return spec, checkpoint, planted


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) >= 1, f"the planted mistake matched nothing in {path.name}"
    path.write_text(text.replace(old, new))


def test_planted_wrong_shard_dimension(sglang_case, tmp_path):
    """f_b_proj split by its input dim (row parallel) instead of its output dim: SGLang loads it without a word,
    and the comparison with the reference shard names it."""

    def edit(package: Path):
        _replace(package / "model.py", "self.f_b_proj = ColumnParallelLinear(", "self.f_b_proj = RowParallelLinear(")

    spec, checkpoint, site = _planted(sglang_case, tmp_path, "kimi-k3", edit)
    probe(site, checkpoint, 2, tmp_path / "out")
    problems = judge(spec, checkpoint, tmp_path / "out", 2)
    assert (
        "rank 0: language_model.model.layers.0.self_attn.f_b_proj.weight: shape [32, 8], reference shard [16, 16]"
        in problems
    )


def test_planted_dropped_tensor(sglang_case, tmp_path):
    """A checkpoint tensor the table has no rule for: SGLang's load fails naming it."""

    def edit(package: Path):
        text = (package / "weight_table.py").read_text()
        lines = text.splitlines(keepends=True)
        kept = [line for line in lines if 'Rule("model.embed_tokens.weight"' not in line]
        assert len(kept) == len(lines) - 1, "the planted mistake matched no rule"
        (package / "weight_table.py").write_text("".join(kept))

    _, checkpoint, site = _planted(sglang_case, tmp_path, "kimi-linear-48b-a3b", edit)
    loaded = probe(site, checkpoint, 1, tmp_path / "out")["levels"]["loaded"]
    assert loaded["status"] == "fail"
    assert "model.embed_tokens.weight: not a tensor of this model's weight table" in loaded["detail"], loaded


def test_planted_missing_protocol_method(sglang_case, tmp_path):
    """The model class without load_weights: SGLang cannot load it, and the level says which method is missing."""

    def edit(package: Path):
        _replace(package / "model.py", "def load_weights(self", "def load_weights_renamed(self")

    _, checkpoint, site = _planted(sglang_case, tmp_path, "kimi-linear-48b-a3b", edit)
    levels = probe(site, checkpoint, 1, tmp_path / "out")["levels"]
    assert levels["built"]["status"] == "pass"
    assert levels["loaded"]["status"] == "fail" and "load_weights" in levels["loaded"]["detail"]
