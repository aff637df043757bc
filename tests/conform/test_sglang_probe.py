"""SGLang 0.5.23 is the judge of the generated SGLang adapters. The probe (pipeline/programs/engines/sglang_probe.py)
runs in SGLang's own environment (.venv/peers/sglang) and reports discovered / accepted / built / forward and dumps
what SGLang's load_weights left; loaded is judged by the conformance driver's judge (pipeline/conform/judge.py):
every parameter bitwise equal to the weight map walked over the checkpoint for that rank, each weight loader
called once per tensor and (SGLang's probe counts them) each element written once, every checkpoint tensor
consumed, derived tensors (absorbed MLA, fp32 router bias, attention-residual weights) equal to their recomputation
after the load and after a second load with every floating-point tensor doubled.
Both shipped specs at tiny widths (expert intermediate 64, so MXFP4 scale groups split over two ranks) and their
first five layers (KDA, MLA, dense and MoE layers). kimi-linear goes the whole way users take, through
`conform_target` (wheel built, pip-installed into the peer, one probe per world size); kimi-k3 at world size 1 and 2,
the planted mistakes and the combined spec variant are the jobs of a single probe batch run once per session (SGLang
imported once, every job's ranks forked from that process: the import is most of a probe run's time), their
adapters installed from their wheels the same way.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conform_fixtures import YARN_ROPE
from dayone.adapters.pins import RELEASES
from dayone.adapters.targets import common, sglang
from dayone.adapters.weightmap import TARGET_LAYOUT, build_weight_map, walk
from dayone.conform import judge as conform_judge
from dayone.conform import peers
from dayone.conform.driver import conform_target
from dayone.conform.results import TargetReport
from dayone.spec.registry import load_spec
from dayone.spec.schema import ModelSpec
from dayone.synth.scale import SCALES, scaled_spec
from dayone.synth.write import write_synthetic
from model_fixtures import with_updates
from safetensors.torch import load_file
from safetensors_folder import read_folder

ROOT = Path(__file__).resolve().parents[2]
PEER_PYTHON = ROOT / ".venv" / "peers" / "sglang" / "bin" / "python"
PROBE = ROOT / "pipeline" / "programs" / "engines" / "sglang_probe.py"


def generate(spec: ModelSpec, root: Path) -> Path:
    """The generated SGLang adapter under root/gen, built into a wheel and pip-installed into root/site with the
    peer's pip, as the conformance driver does."""
    common.write_tree(root / "gen", sglang.files(spec))
    peers.install_adapter(root / "gen", PEER_PYTHON, root / "site", root)
    return root / "site"


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
    driven: bool = False  # by conform_target: "loaded" filled by the driver's judge


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


def judge(spec: ModelSpec, checkpoint: Path, out: Path, world: int) -> list[str]:
    """The driver's judge of every rank's dump: one line per problem, naming the tensor; [] when loaded right."""
    table = build_weight_map(spec, TARGET_LAYOUT["sglang"], mxfp4="packed")
    tensors = read_folder(checkpoint)
    return [p for rank in range(world) for p in conform_judge.judge_rank(table, tensors, rank, world, out)]


# The spec that takes the driver's whole way (conform_target); the other runs are jobs of one probe batch.
DRIVEN = "kimi-linear-48b-a3b"
SPECS = ("kimi-k3", "kimi-linear-48b-a3b")
WORLDS = (1, 2)
LAYERS = 5

# Routed experts 64 wide: one 32-element MXFP4 scale group per rank at world size 2 (tiny has one per expert row).
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
# An unscaled rope: SGLang's CPU rotary (get_rope_cpu) refuses it, so SGLang builds it on a GPU only (not run here).
PLAIN_ROPE = {"mla": {"nope": False, "rope": {"theta": 10000.0}}}
# The honoured spec variants of test_sglang_variants.py together, through SGLang once (world size 1): softmax and
# group-limited routing without correction bias, no q LoRA, no MLA output gate, YaRN rope, a gate bound of -3, two
# dense layers.
COMBINED_VARIANT = {
    "moe": {"router": {"activation": "softmax", "num_groups": 4, "topk_groups": 2, "correction_bias": False}},
    "mla": {"q_lora_rank": None, "output_gate": False, "nope": False, "rope": YARN_ROPE},
    "kda": {"gate": {"lower_bound": -3.0}},
    "layout": {"ffn": "[dense dense] + 3 x [moe]"},
}


def variant(changes: dict) -> ModelSpec:
    """The tiny 5-layer K3 with nested fields replaced."""
    return with_updates(tiny_spec("kimi-k3"), changes)


_BATCH: dict[str, Run] = {}
_DRIVEN: dict[str, tuple[ModelSpec, TargetReport]] = {}  # DRIVEN -> (its spec, the driver's report, fp32 forward)


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
    driven = {key: cases.pop(key) for key in [f"{DRIVEN}-ws{world}" for world in WORLDS]}
    for key, (name, world, edit) in PLANTED.items():
        base = cases.get(f"{name}-ws{world}") or driven[f"{name}-ws{world}"]
        planted = root / key / "site"
        shutil.copytree(base.site, planted)
        edit(planted / common.package_name(base.spec, "sglang"))
        cases[key] = dataclasses.replace(base, site=planted)
    spec = variant(COMBINED_VARIANT)
    write_synthetic(spec, root / "variants" / "checkpoint", seed=7, num_shards=1)
    cases["variants"] = Case(spec, root / "variants" / "checkpoint", generate(spec, root / "variants"), 1)
    spec = variant(PLAIN_ROPE)
    write_synthetic(spec, root / "plain-rope" / "checkpoint", seed=9, num_shards=1)
    cases["plain-rope"] = Case(spec, root / "plain-rope" / "checkpoint", generate(spec, root / "plain-rope"), 1)
    _BATCH.update(probe_batch(cases, root / "runs"))
    spec, checkpoint = tiny_spec(DRIVEN), root / DRIVEN / "checkpoint"
    # fp32 only: tests/conform/test_sglang_forward.py judges the forward; here it is the driver's way through
    report = conform_target("sglang", root / DRIVEN / "gen", checkpoint, spec, WORLDS, keep=root / "driven",
                            forward_dtypes=("float32",))  # fmt: skip
    _DRIVEN[DRIVEN] = spec, report
    for run in report.runs:
        key = f"{DRIVEN}-ws{run.world_size}"
        _BATCH[key] = Run(driven[key], root / "driven" / f"sglang-ws{run.world_size}", run.as_dict(), driven=True)
    return _BATCH


def driven_report(tmp_path_factory) -> tuple[ModelSpec, TargetReport]:
    """(spec, report) of the batch's run through the conformance driver at world sizes 1 and 2, forward in fp32
    (tests/conform/test_sglang_forward.py judges it)."""
    sglang_batch(tmp_path_factory)
    return _DRIVEN[DRIVEN]


@pytest.fixture(scope="session")
def probed(tmp_path_factory) -> dict[str, Run]:
    return sglang_batch(tmp_path_factory)


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("name", SPECS)
def test_levels_a_to_c_pass_and_forward_is_the_forward_probes(probed, name, world):
    levels = probed[f"{name}-ws{world}"].levels
    assert levels["framework"] == "sglang" and levels["version"] == RELEASES["sglang"].version
    assert levels["world_size"] == world
    for level in ("discovered", "accepted", "built"):
        assert levels["levels"][level]["status"] == "pass", (level, levels["levels"][level])
    loaded = levels["levels"]["loaded"]
    if probed[f"{name}-ws{world}"].driven:
        assert loaded["status"] == "pass", (loaded, levels.get("problems"))
    else:
        assert loaded["status"] == "not run"  # the probe dumps; the judge is below
    forward = levels["levels"]["forward"]
    if probed[f"{name}-ws{world}"].driven:  # the driver ran sglang_forward.py and judged it
        assert forward["status"] == "pass" and "without its scheduler" in forward["detail"], forward
    else:
        assert forward["status"] == "not run" and "sglang_forward.py" in forward["detail"]
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
    table = build_weight_map(run.case.spec, TARGET_LAYOUT["sglang"], mxfp4="packed")
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
    name = "language_model.model.layers.0.self_attn.f_b_proj.weight"
    assert f"{name}: shape (32, 8) on rank 0, the map gives (16, 16)" in problems, problems


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
    after = "derived tensor differs from its recomputation (after a weight update)"
    assert problems and all(p.endswith(after) for p in problems), problems
    assert f"model.layers.3.self_attn.w_kc: {after}" in problems
    assert f"model.layers.1.block_sparse_moe.gate.e_score_correction_bias_fp32: {after}" in problems
