"""The drill (issue 15.7): family members no one here had seen, each from a variant file (data only, no code change)
through `integrate run --demo --scale faithful`: every stage green, or refused up front in one line.

Each variant moves a different axis: layer ratio and depth, dense prefix, head counts and widths, gate kinds,
router kind and groups, shared experts, latent MoE, residual kind, RoPE / NoPE. The stand-in keeps every per-head and
per-expert width (dayone.synth.faithful), and compile and plan run at the variant's own widths: the kernel builds
are checked against the variant file's numbers, not the run's own.

The table variant x stage goes to drill-table.md in the test's temporary folder, or to $DAYONE_DRILL_TABLE.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from dayone.spec.registry import spec_to_dict
from dayone.spec.schema import ModelSpec
from drill import ARCHS, SKIPPED, STAGES, VARIANTS_DIR, Outcome, load_variants, run_all, table

VARIANT_NAMES = sorted(p.stem for p in VARIANTS_DIR.glob("*.yaml"))


@pytest.fixture(scope="module")
def drill(tmp_path_factory) -> dict[str, Outcome]:
    root = tmp_path_factory.mktemp("drill")
    (root / "specs").mkdir()
    outcomes = run_all(load_variants(root / "specs"), root / "runs")
    text = table(outcomes)
    target = Path(os.environ.get("DAYONE_DRILL_TABLE") or root / "drill-table.md")
    target.write_text(text)
    print(f"\ndrill table ({target}):\n{text}")
    return {o.variant.name: o for o in outcomes}


def test_at_least_six_variants():
    assert len(VARIANT_NAMES) >= 6


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_variant_green_or_refused_up_front(drill, name):
    o = drill[name]
    if o.variant.refusal is not None:
        lines = [line for line in o.stderr.splitlines() if line.strip()]
        assert o.code == 2 and len(lines) == 1 and "Traceback" not in o.stderr, o.stderr[-2000:]
        assert o.variant.refusal in lines[0], lines[0]
        assert not (o.out / "stages").exists() or not any((o.out / "stages").iterdir())  # nothing ran
        return
    assert o.report is not None, f"exit {o.code}: {o.stderr[-2000:]}"
    statuses = {s["stage"]: (s["status"], s["summary"]) for s in o.report["stages"]}
    assert list(statuses) == list(STAGES)
    for stage, (status, summary) in statuses.items():
        expected = "not run" if stage in SKIPPED else "pass"
        assert status == expected, f"{name}: {stage} {status}: {summary}"
    assert o.report["ok"] and o.code == 0
    assert statuses["spec"][1].startswith(f"{name}-faithful:")
    for stage in ("plan", "compile"):
        assert f"at {name}'s widths" in statuses[stage][1]


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_stand_in_keeps_every_width(drill, name):
    """The spec the run derived from the stand-in's config.json has the variant's per-head and per-expert widths,
    fewer experts (at least experts_per_token + 1 in whole groups) and no more layers than the variant."""
    o = drill[name]
    if o.variant.refusal is not None:
        pytest.skip(f"{name} is refused up front: {o.variant.refusal}")
    variant = spec_to_dict(ModelSpec.model_validate(o.variant.data))  # as the schema writes it: defaults left out
    derived = yaml.safe_load((o.out / "stages" / "spec" / "spec.yaml").read_text())
    assert derived["kda"] == variant["kda"] and derived["mla"] == variant["mla"]
    moe, want = derived["moe"], variant["moe"]
    assert {k: v for k, v in moe.items() if k != "num_experts"} == {k: v for k, v in want.items() if k != "num_experts"}
    groups = want["router"]["num_groups"]
    assert want["experts_per_token"] < moe["num_experts"] < want["num_experts"] and moe["num_experts"] % groups == 0
    assert (derived["activation"], derived["residual"]) == (variant["activation"], variant["residual"])
    assert derived.get("quantization") == variant.get("quantization")
    assert 1 < derived["num_layers"] <= variant["num_layers"]


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_kernels_built_at_the_variants_widths(drill, name):
    """The compile stage's constexprs, read against the variant file: KDA head dim, MLA latent and rope dims, the
    MoE's top-k and row block, the attention-residual row block (the stand-in has other hidden and expert counts)."""
    o = drill[name]
    if o.variant.refusal is not None:
        pytest.skip(f"{name} is refused up front: {o.variant.refusal}")
    v = o.variant.data
    resources = json.loads((o.out / "stages" / "compile" / "resources.json").read_text())
    assert resources["spec"] == name
    assert {row["arch"] for row in resources["kernels"]} == set(ARCHS)
    configs = {row["kernel"]: row["config"] for row in resources["kernels"]}
    head_dim = v["kda"]["head_dim"]
    assert f"V={head_dim} " in configs["gated_rmsnorm"]
    assert f"K={head_dim} " in next(c for k, c in configs.items() if k.startswith("kda.decode"))
    assert f"KV_LORA={v['mla']['kv_lora_rank']} " in configs["mla_decode"]
    assert f"ROPE={v['mla']['qk_rope_head_dim']} " in configs["mla_decode"]
    assert f"TOP_K={v['moe']['experts_per_token']} " in configs["moe_combine"]
    row = v["moe"].get("latent_size") or v["hidden_size"]
    assert f"BLOCK_L={1 << (row - 1).bit_length()} " in configs["moe_combine"]
    if v["residual"]["kind"] == "attention":
        assert f"BLOCK_D={1 << (v['hidden_size'] - 1).bit_length()} " in configs["attn_residual.aggregate"]
