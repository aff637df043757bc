"""A prepared set of stage reports over three runs and two models, and the matrix state each cell must show.

kimi-k3 is pre-release (spec and synthetic checkpoint only): validate waits for weights. kimi-linear-48b-a3b has
weights: numerics for two targets (one failing) and a compile that regressed on the latest run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dayone.conform.results import Level

RUN = [datetime(2026, 5, 1, 12, tzinfo=UTC) + timedelta(days=d) for d in range(3)]
K3, LINEAR = "kimi-k3", "kimi-linear-48b-a3b"
CAPTURES = ("attn_out", "mlp_out", "residual")
LAYERS = 4
KERNELS = ("kda_chunk_fwd", "mla_decode", "gated_rmsnorm", "moe_combine")


def report(stage, spec, status, run, target=None, arch=None, **details) -> dict:
    return {
        "stage": stage,
        "spec": spec,
        "target": target,
        "arch": arch,
        "status": status,
        "created": RUN[run].isoformat(),
        "details": details,
    }


def numerics(captures, layers, worst=None) -> list[dict]:
    rows = [
        {"capture": c, "layer": layer, "rel_rms": 1e-6 * (1 + i) * (1 + layer)}
        for i, c in enumerate(captures)
        for layer in range(layers)
    ]
    if worst is not None:
        rows[-1]["rel_rms"] = worst
    return rows


def resources(arch: str, spill: int = 0) -> list[dict]:
    return [
        {
            "kernel": k,
            "config": "BT=64,num_warps=4",
            "arch": arch,
            "registers": 96 + 8 * i,
            "shared_bytes": 49152 * (i + 1),
            "spill_bytes": spill if i == 0 else 0,
            "compile_seconds": 1.5,
            "cubin": f"{k}.cubin",
            "cached": False,
        }
        for i, k in enumerate(KERNELS)
    ]


CONFORM_LEVELS = ("discovered", "accepted", "built", "loaded", "forward")
# What forward measured where it ran (the figures a level carries besides status and detail, as the probes add them).
FORWARD_FIGURES = {"logprob_max_abs": 0.0123, "greedy_token_agreement": 1.0, "tokens_per_s": 812.5}


def conform_run(world_size: int, reached: int, framework: str, stop: str = "not run", **figures) -> dict:
    """A probe run (levels.json as dayone.conform writes it) that passed the first `reached` levels; the next one is
    `stop` with its detail, and any after it not run."""
    levels = {}
    for i, name in enumerate(CONFORM_LEVELS):
        if i < reached:
            # written by conform's own Level (figures nested under "figures"), so the dashboard reads what runs write
            level = Level(
                status="pass", detail=f"{name} ok", figures=figures if name == "forward" and figures else None
            )
            levels[name] = level.as_dict()
        elif i == reached:
            levels[name] = {"status": stop, "detail": f"{name} {stop} at world size {world_size}: needs a GPU"}
        else:
            levels[name] = {"status": "not run", "detail": f"needs {CONFORM_LEVELS[i - 1]}"}
    return {"framework": framework, "version": "1.0", "world_size": world_size, "facts": {}, "levels": levels}


def conform_reports(run: int) -> list[dict]:
    """kimi-linear's conformance: vLLM reached forward at both world sizes (with figures); SGLang stopped before
    forward at world size 1 and failed loaded at world size 2."""
    vllm = [conform_run(n, 5, "vllm", **FORWARD_FIGURES) for n in (1, 2)]
    sglang = [conform_run(1, 4, "sglang"), conform_run(2, 3, "sglang", stop="fail")]
    return [
        report("conform", LINEAR, "pass", run, target="vllm", runs=vllm),
        report("conform", LINEAR, "fail", run, target="sglang", runs=sglang),
    ]


def write_sample_reports(folder: Path, coverage_json: Path | None = None) -> dict:
    """Write the reports under folder (some as lists, one per stage file) and return the expected cell states,
    keyed by (spec, stage, target or None). coverage_json, when given, is real `integrate inspect --json` output."""
    folder.mkdir(parents=True, exist_ok=True)
    reports = [
        # kimi-k3, pre-release: everything that runs without weights.
        report("spec", K3, "fail", 0),
        report("spec", K3, "pass", 1),
        report("spec", K3, "pass", 2),
        report("coverage", K3, "pass", 2, synthetic=True),
        report("generate", K3, "pass", 2, target="sglang"),
        report("generate", K3, "fail", 2, target="vllm"),
        report("compile", K3, "pass", 2, arch="sm_90", resources=resources("sm_90")),
        report("compile", K3, "pass", 2, arch="sm_100", resources=resources("sm_100")),
        report("package", K3, "pass", 2, target="sglang"),
        # kimi-linear: weights exist.
        report("spec", LINEAR, "pass", 0),
        report("spec", LINEAR, "pass", 1),
        report("spec", LINEAR, "pass", 2),
        report(
            "validate",
            LINEAR,
            "pass",
            1,
            target="reference",
            numerics=numerics(CAPTURES, LAYERS),
            tolerance={"rel_rms": 1e-4},
        ),
        report(
            "validate",
            LINEAR,
            "fail",
            2,
            target="sglang",
            numerics=numerics(CAPTURES[:2], LAYERS, worst=3e-2),
            tolerance={"rel_rms": 5e-2 / 10},
        ),
        report("compile", LINEAR, "pass", 1, arch="sm_90", resources=resources("sm_90")),
        report("compile", LINEAR, "fail", 2, arch="sm_90", resources=resources("sm_90", spill=512)),
        report("publish", LINEAR, "pass", 2),
    ]
    reports += conform_reports(2)
    for i, r in enumerate(reports):
        (folder / f"{i:02d}-{r['spec']}-{r['stage']}.json").write_text(json.dumps(r))
    (folder / "batch.json").write_text(
        json.dumps([report("generate", LINEAR, "pass", 2, target=t) for t in ("sglang", "vllm")])
    )
    if coverage_json is not None:
        (folder / "inspect-kimi-linear.json").write_text(coverage_json.read_text())
    return {
        (K3, "spec", None): "pass",
        (K3, "coverage", None): "pass",
        (K3, "generate", "sglang"): "pass",
        (K3, "generate", "vllm"): "fail",
        (K3, "conform", "vllm"): "no report",
        (K3, "compile", None): "pass",
        (K3, "validate", "sglang"): "waiting for weights",
        (K3, "validate", "reference"): "waiting for weights",
        (K3, "package", "sglang"): "pass",
        (K3, "publish", None): "no report",  # a column (kimi-linear published), but no evidence for kimi-k3
        (LINEAR, "spec", None): "pass",
        (LINEAR, "coverage", None): "pass" if coverage_json is not None else "no report",
        (LINEAR, "generate", "vllm"): "pass",
        (LINEAR, "validate", "reference"): "pass",
        (LINEAR, "validate", "sglang"): "fail",
        (LINEAR, "validate", "vllm"): "no report",
        (LINEAR, "conform", "vllm"): "pass",
        (LINEAR, "conform", "sglang"): "fail",
        (LINEAR, "compile", None): "fail",
        (LINEAR, "publish", None): "pass",
    }


# Rows with evidence (no report names miles or megatron-bridge: they are not shown).
SHOWN_TARGETS = ["sglang", "vllm", "reference"]
# Points each model page's charts must draw, per target.
CHART_POINTS = {LINEAR: {"reference": len(CAPTURES) * LAYERS, "sglang": 2 * LAYERS}, K3: {}}
# Runs shown as marks: kimi-k3's spec cell ran three times (fail, pass, pass).
K3_SPEC_MARKS = ["fail", "pass", "pass"]
