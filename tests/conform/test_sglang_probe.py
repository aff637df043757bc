"""SGLang 0.5.23 is the judge of the generated SGLang adapters: the probe (pipeline/conform/probes/sglang_probe.py)
runs in SGLang's own environment (.venv/peers/sglang) and reports discovered / accepted / built / forward; loaded
is judged here from its dumps against dayone's reference reading of the checkpoint.

The reference is the weight map walked over the checkpoint for one tensor-parallel rank (`walk.to_target`), each
tensor in the dtype of the parameter SGLang built (bitwise: a load is a copy and a cast); derived tensors (absorbed
MLA, fp32 router bias, attention-residual weights) must equal `walk.derive` of that reference after the load, and of
the reference of the doubled checkpoint after the probe's second load (a weight update). SGLang's MXFP4 MoE method
also registers zero expert biases the checkpoint does not have: they must stay zero and nothing may write them.
Both shipped specs at tiny widths (expert intermediate 64, so MXFP4 scale groups split over two ranks) and their
first five layers (KDA, MLA, dense and MoE layers).

Every probe run of the SGLang tests (each spec at world size 1 and 2, the planted mistakes, the combined spec
variant) is one job of a single probe batch, run once per session: SGLang is imported once and every job's ranks
are forked from that process (the import is most of a probe run's time).
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
from dayone.spec.registry import load_spec, spec_to_dict
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


@dataclasses.dataclass(frozen=True)
class Case:
    spec: ModelSpec
    checkpoint: Path
    site: Path
    world: int


@dataclasses.dataclass(frozen=True)
class Run:
    case: Case
    out: Path
    levels: dict


def probe_batch(cases: dict[str, Case], root: Path) -> dict[str, Run]:
    """One probe process for every case (the probe's --batch): levels.json and dumps under root/<case>."""
    if not PEER_PYTHON.is_file():
        raise AssertionError(f"{PEER_PYTHON} is missing: run .ci/setup.d/11-sglang.sh")
    jobs = [{"package_site": str(c.site), "checkpoint": str(c.checkpoint), "world_size": c.world,
             "out": str(root / key)} for key, c in cases.items()]  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    (root / "jobs.json").write_text(json.dumps(jobs))
    cmd = [str(PEER_PYTHON), str(PROBE), "--batch", str(root / "jobs.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False)
    runs = {}
    for key, case in cases.items():
        levels = root / key / "levels.json"
        if proc.returncode != 0 or not levels.is_file():
            raise AssertionError(f"probe exited {proc.returncode}, {key}: {proc.stderr[-3000:]}")
        runs[key] = Run(case, root / key, json.loads(levels.read_text()))
    return runs


def checkpoint_tensors(checkpoint: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for path in sorted(checkpoint.glob("*.safetensors")):
        out.update(load_file(path))
    return out


def judge(spec: ModelSpec, checkpoint: Path, out: Path, world: int) -> list[str]:
    """Problems with the load SGLang did, one line each naming the parameter or tensor; [] when every parameter
    equals its reference shard bitwise and was written exactly once, every checkpoint tensor was consumed, and the
    derived tensors equal their recomputation after the load and after the second load (doubled checkpoint)."""
    table = build_weight_map(spec, "inference", mxfp4="packed")
    source = checkpoint_tensors(checkpoint)
    passthrough = spec.passthrough.prefixes if spec.passthrough else ()
    problems: list[str] = []
    for rank in range(world):
        dumped = load_file(out / f"rank{rank}.safetensors")
        writes = json.loads((out / f"rank{rank}.writes.json").read_text())
        par = walk.Parallel(tp_rank=rank, tp_size=world)
        reference = walk.to_target(table, source.__getitem__, par)
        problems += _compare(rank, dumped, writes, reference, passthrough)
        problems += _derived(rank, table, reference, load_file(out / f"rank{rank}.derived.safetensors"), "load")
        doubled = walk.to_target(table, lambda n: _double(source[n]), par)
        problems += _derived(rank, table, doubled, load_file(out / f"rank{rank}.derived2.safetensors"), "update")
        unconsumed = sorted(n for n in set(source) - set(writes["streamed"]) if not n.startswith(passthrough))
        problems += [f"rank {rank}: {name}: checkpoint tensor not consumed" for name in unconsumed]
    return problems


def _double(tensor: torch.Tensor) -> torch.Tensor:
    """The probe's second load: every floating-point checkpoint tensor doubled (MXFP4 codes and scales kept)."""
    return tensor * 2 if tensor.is_floating_point() else tensor


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


def _derived(rank: int, table, reference: dict, derived: dict, when: str) -> list[str]:
    """Each derived tensor of the map this rank holds equals walk.derive of its reference inputs."""
    problems = []
    for name, d, inputs in walk.derived_rows(table):
        if not all(i in reference for i in inputs):
            continue  # a layer this rank does not hold
        if name not in derived:
            problems.append(f"rank {rank}: {name}: derived tensor missing after the {when}")
            continue
        want = walk.derive(d.kind, [reference[i] for i in inputs], d.dims)
        got = derived[name]
        if got.shape != want.shape or not torch.equal(got, want.to(got.dtype)):
            problems.append(f"rank {rank}: {name}: derived tensor stale or wrong after the {when}")
    return problems


SPECS = ("kimi-k3", "kimi-linear-48b-a3b")
WORLDS = (1, 2)
LAYERS = 5
TINY = dataclasses.replace(SCALES["tiny"], expert_intermediate=64)


def tiny_spec(name: str) -> ModelSpec:
    return scaled_spec(load_spec(name), TINY, layers=LAYERS)


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) >= 1, f"the planted mistake matched nothing in {path.name}"
    path.write_text(text.replace(old, new))


def wrong_shard_dimension(package: Path) -> None:
    """f_b_proj split by its input dim (row parallel) instead of its output dim."""
    _replace(package / "model.py", "self.f_b_proj = ColumnParallelLinear(", "self.f_b_proj = RowParallelLinear(")


def dropped_tensor(package: Path) -> None:
    """A checkpoint tensor the table has no rule for."""
    text = (package / "weight_table.py").read_text()
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if 'Rule("model.embed_tokens.weight"' not in line]
    assert len(kept) == len(lines) - 1, "the planted mistake matched no rule"
    (package / "weight_table.py").write_text("".join(kept))


def missing_protocol_method(package: Path) -> None:
    """The model class without load_weights."""
    _replace(package / "model.py", "def load_weights(self", "def load_weights_renamed(self")


RENAMED = "model.layers.{i}.self_attn.kv_b_proj_renamed.weight"


def renamed_parameter(package: Path) -> None:
    """The table's kv_b_proj target (and its declaration) renamed: its checkpoint tensor aims at a parameter the
    model does not have."""
    rule = '"model.layers.{i}.self_attn.kv_b_proj.weight",\n        "model.layers.{i}.self_attn.kv_b_proj.weight",'
    _replace(package / "weight_table.py", rule, rule.rsplit('"model', 1)[0] + f'"{RENAMED}",')
    _replace(package / "weight_table.py", 'Param("model.layers.{i}.self_attn.kv_b_proj.weight"', f'Param("{RENAMED}"')


def stale_after_update(package: Path) -> None:
    """load_weights no longer recomputes the derived tensors (only the post-load hook after the first load does)."""
    _replace(
        package / "loading.py",
        "        self.refresh_derived(touched)\n        return written",
        "        return written",
    )


# Planted mistakes: (spec, world size, edit of the installed package). At world size 1 on one spec, except the
# wrong shard dimension, which only a second rank can show.
PLANTED = {
    "wrong-shard-dimension": ("kimi-k3", 2, wrong_shard_dimension),
    "dropped-tensor": ("kimi-linear-48b-a3b", 1, dropped_tensor),
    "missing-protocol-method": ("kimi-linear-48b-a3b", 1, missing_protocol_method),
    "renamed-parameter": ("kimi-linear-48b-a3b", 1, renamed_parameter),
    "stale-after-update": ("kimi-linear-48b-a3b", 1, stale_after_update),
}
# The honoured spec variants of test_sglang_variants.py together, through SGLang once (world size 1): softmax and
# group-limited routing without correction bias, no q LoRA, no MLA output gate, a gate bound of -3, two dense layers.
COMBINED_VARIANT = {
    "moe": {"router": {"activation": "softmax", "num_groups": 4, "topk_groups": 2, "correction_bias": False}},
    "mla": {"q_lora_rank": None, "output_gate": False},
    "kda": {"gate": {"lower_bound": -3.0}},
    "layout": {"ffn": "[dense dense] + 3 x [moe]"},
}


def variant(changes: dict) -> ModelSpec:
    """The tiny 5-layer K3 with nested fields replaced."""
    data = spec_to_dict(tiny_spec("kimi-k3"))

    def merge(d: dict, u: dict) -> None:
        for k, v in u.items():
            if isinstance(v, dict) and isinstance(d.get(k), dict):
                merge(d[k], v)
            else:
                d[k] = v

    merge(data, changes)
    return ModelSpec.model_validate(data)


_BATCH: dict[str, Run] = {}


def sglang_batch(tmp_path_factory) -> dict[str, Run]:
    """Every SGLang probe run of the session, made by one probe batch on first use (shared by both test files)."""
    if _BATCH:
        return _BATCH
    root = tmp_path_factory.mktemp("sglang")
    cases: dict[str, Case] = {}
    for name in SPECS:
        spec = tiny_spec(name)
        write_synthetic(spec, root / name / "checkpoint", seed=5, num_shards=2)
        site = generate(spec, root / name)
        for world in WORLDS:
            cases[f"{name}-ws{world}"] = Case(spec, root / name / "checkpoint", site, world)
    for key, (name, world, edit) in PLANTED.items():
        base = cases[f"{name}-ws{world}"]
        planted = root / key / "site"
        shutil.copytree(base.site, planted)
        edit(planted / common.package_name(base.spec, "sglang"))
        cases[key] = dataclasses.replace(base, site=planted)
    spec = variant(COMBINED_VARIANT)
    write_synthetic(spec, root / "variants" / "checkpoint", seed=7, num_shards=1)
    cases["variants"] = Case(spec, root / "variants" / "checkpoint", generate(spec, root / "variants"), 1)
    _BATCH.update(probe_batch(cases, root / "runs"))
    return _BATCH


@pytest.fixture(scope="session")
def probed(tmp_path_factory) -> dict[str, Run]:
    return sglang_batch(tmp_path_factory)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("name", SPECS)
def test_levels_a_to_c_pass_and_forward_says_why_not(probed, name, world):
    levels = probed[f"{name}-ws{world}"].levels
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
def test_level_d_loaded_equals_the_reference_shard(probed, name, world):
    run = probed[f"{name}-ws{world}"]
    assert judge(run.case.spec, run.case.checkpoint, run.out, world) == []


@pytest.mark.parametrize("name", SPECS)
def test_derived_tensors_follow_a_weight_update(probed, name):
    """The second load changed every derived tensor of the map (absorbed MLA, fp32 router bias where the spec has
    one, attention-residual weights), so the judge's check after the update compares new values, not stale ones."""
    run = probed[f"{name}-ws1"]
    table = build_weight_map(run.case.spec, "inference", mxfp4="packed")
    first = load_file(run.out / "rank0.derived.safetensors")
    second = load_file(run.out / "rank0.derived2.safetensors")
    names = [n for n, _, _ in walk.derived_rows(table)]
    kinds = {d.kind for _, d, _ in walk.derived_rows(table)}
    assert {"mla_w_kc", "mla_w_vc", "fp32"} <= kinds
    assert names and all(not torch.equal(first[n], second[n]) for n in names)


def test_planted_wrong_shard_dimension(probed):
    """SGLang loads a row-split f_b_proj without a word; the comparison with the reference shard names it."""
    run = probed["wrong-shard-dimension"]
    assert run.levels["levels"]["built"]["status"] == "pass"
    problems = judge(run.case.spec, run.case.checkpoint, run.out, 2)
    assert (
        "rank 0: language_model.model.layers.0.self_attn.f_b_proj.weight: shape [32, 8], reference shard [16, 16]"
        in problems
    )


def test_planted_dropped_tensor(probed):
    """SGLang's load fails naming the checkpoint tensor the table has no rule for."""
    loaded = probed["dropped-tensor"].levels["levels"]["loaded"]
    assert loaded["status"] == "fail"
    assert "model.embed_tokens.weight: not a tensor of this model's weight table" in loaded["detail"], loaded


def test_planted_missing_protocol_method(probed):
    """SGLang cannot load a model class without load_weights, and the level says which method is missing."""
    levels = probed["missing-protocol-method"].levels["levels"]
    assert levels["built"]["status"] == "pass"
    assert levels["loaded"]["status"] == "fail" and "load_weights" in levels["loaded"]["detail"]


def test_planted_renamed_parameter(probed):
    """The checkpoint's kv_b_proj aimed at a parameter the model does not have: loaded fails naming both, and the
    probe wrote no dump that a judge could mistake for a load."""
    run = probed["renamed-parameter"]
    levels = run.levels["levels"]
    assert levels["built"]["status"] == "pass"
    loaded = levels["loaded"]
    assert loaded["status"] == "fail", loaded
    assert "model.layers.3.self_attn.kv_b_proj.weight" in loaded["detail"]
    assert RENAMED.format(i=3) + " is not a parameter of the model" in loaded["detail"], loaded
    assert not (run.out / "rank0.safetensors").exists()


def test_planted_derived_tensors_stale_after_a_weight_update(probed):
    """Derived tensors recomputed after the first load but not by a later load_weights: right after the load, stale
    after the update, and the judge names each one."""
    run = probed["stale-after-update"]
    problems = judge(run.case.spec, run.case.checkpoint, run.out, 1)
    assert problems and all(p.endswith("derived tensor stale or wrong after the update") for p in problems), problems
    assert "rank 0: model.layers.3.self_attn.w_kc: derived tensor stale or wrong after the update" in problems
    assert (
        "rank 0: model.layers.1.block_sparse_moe.gate.e_score_correction_bias_fp32: derived tensor stale or wrong after the update"
        in problems
    )
