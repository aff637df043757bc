"""The drill's machinery: variant files into spec files, each through `integrate run --demo` at the faithful scale,
and the table of variant x stage.

A variant file is data only: `about` (one line for the table), `base` (a shipped spec), `spec` (the fields that
differ, merged into the base's), `expect` (green, the default, or `{refused: FRAGMENT}`: exit 2 with one line that
holds FRAGMENT, before any stage runs). The merge is not validated here: whether
the result is a valid spec is for `integrate run` to say, up front, in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml
from dayone.spec.registry import load_spec, spec_to_dict

VARIANTS_DIR = Path(__file__).parent / "variants"
STAGES = ("synth", "spec", "coverage", "plan", "generate", "conform", "compile", "validate", "package")
# What the drill leaves out, to stay within its CI budget (about 3 minutes of 2 cores for all variants):
# - conform runs the real SGLang / vLLM in their peer environments (minutes a run; tests/conform runs it on both
#   shipped families);
# - package builds wheels from the generated files whatever their shapes (tests/package, tests/run);
# - sm_100: kernels are compiled for sm_90 only. The shape classes a variant can break (power-of-two tiles, the
#   shared-memory budget, 227 KiB on both) are the same on both archs; a cold build of one variant's kernels costs
#   ~20 s of CPU per arch. tests/kernels and the README run build both.
# Everything else reads the variant's shapes and runs: the stand-in's synthesis, spec derivation from its
# config.json, coverage, the plan, the four adapters with their checks (Miles / Megatron-Bridge build the Megatron
# model at the stand-in's widths), the kernels at the variant's widths, and validate (fast tier against the reference).
SKIPPED = ("conform", "package")
ARCHS = ("sm_90",)
RUN_ARGS = (
    "--scale", "faithful", *(arg for arch in ARCHS for arg in ("--arch", arch)),
    *(arg for stage in SKIPPED for arg in ("--skip", stage)),
)  # fmt: skip
PARALLEL = 2  # one run per core: each is single-threaded Python around torch with one thread


@dataclass(frozen=True)
class Variant:
    name: str
    about: str
    spec_file: Path
    data: dict  # the merged spec, as written
    refusal: str | None  # the fragment the one-line refusal holds; None: every stage green


@dataclass(frozen=True)
class Outcome:
    variant: Variant
    out: Path
    code: int
    stderr: str
    report: dict | None


def load_variants(folder: Path) -> list[Variant]:
    """Every variant file, written out as a spec file in `folder`."""
    variants = []
    for path in sorted(VARIANTS_DIR.glob("*.yaml")):
        entry = yaml.safe_load(path.read_text())
        data = spec_to_dict(load_spec(entry["base"]))
        _merge(data, entry["spec"])
        spec_file = folder / path.name
        spec_file.write_text(yaml.safe_dump(data, sort_keys=False))
        expect = entry.get("expect", "green")
        refusal = None if expect == "green" else expect["refused"]
        variants.append(Variant(path.stem, entry["about"], spec_file, data, refusal))
    return variants


def _merge(into: dict, updates: dict) -> None:
    """Nested dicts merged key by key, anything else replaced (model_fixtures.with_updates without its validation:
    the run validates)."""
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def run_all(variants: list[Variant], root: Path) -> list[Outcome]:
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda v: run_one(v, root / v.name), variants))


def run_one(variant: Variant, out: Path) -> Outcome:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SOURCE_DATE_EPOCH": "1700000000"}
    for name in ("TRITON_INTERPRET", "VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(name, None)
    args = [sys.executable, "-P", "-m", "dayone", "run", "--demo", "--spec", str(variant.spec_file), *RUN_ARGS,
            "--json"]  # fmt: skip
    proc = subprocess.run([*args, "-o", str(out)], env=env, capture_output=True, text=True, timeout=900, check=False)
    report = json.loads(proc.stdout) if proc.returncode in (0, 1) and proc.stdout.strip() else None
    return Outcome(variant, out, proc.returncode, proc.stderr, report)


def table(outcomes: list[Outcome]) -> str:
    """Markdown: one row per variant, one column per stage (pass / fail / skipped / not run), or the refusal; then
    what each variant is."""
    lines = ["| variant | " + " | ".join(STAGES) + " |", "|---" * (len(STAGES) + 1) + "|"]
    for o in outcomes:
        if o.report is None:
            reason = o.stderr.strip().splitlines()[-1] if o.stderr.strip() else f"exit {o.code}"
            lines.append(f"| {o.variant.name} | refused up front (exit {o.code}): {reason} |")
            continue
        cells = {s["stage"]: s["status"] for s in o.report["stages"]}
        row = [
            "skipped" if name in SKIPPED and cells.get(name) == "not run" else cells.get(name, "-") for name in STAGES
        ]
        lines.append(f"| {o.variant.name} | " + " | ".join(row) + " |")
    lines += ["", *(f"- {o.variant.name}: {o.variant.about}" for o in outcomes)]
    return "\n".join(lines) + "\n"
