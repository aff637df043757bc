"""The stages of `integrate run`, each a small function over a RunContext writing into its own work folder and
handing the stages after it one typed value (dayone.run.outputs): they read its files through that value only.

Stage files are deterministic: no wall-clock times (report `created` is the run's fixed timestamp), no timings,
no cache-hit flags, no paths of the machine they ran on (a checkpoint is named by its identity, other files relative
to OUT): two runs of one commit into different folders give the same bytes. Scratch (the kernel cache) lives in
OUT/cache, timings in OUT/logs.

A stage's cache key covers the dayone code it runs, read off its function (dayone.run.code.function_modules); a stage
names only the folders no import shows (`code`: templates, scripts a peer runs, kernels imported by name).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path

from dayone.checkpoint.reader import Checkpoint
from dayone.core.vocabulary import ENGINES, FAIL, NOT_RUN, PARTIAL, PASS
from dayone.reports.model import Report
from dayone.run import outputs
from dayone.run.options import Publish
from dayone.run.runner import Stage, StageResult, file_digest
from dayone.spec.registry import spec_to_dict, spec_to_yaml
from dayone.spec.schema import ModelSpec


@dataclass
class RunContext:
    checkpoint: Checkpoint
    spec: ModelSpec
    out: Path
    created: datetime
    targets: tuple[str, ...]
    archs: tuple[str, ...]
    gpu: str = "h200"
    gpus: int | None = None  # None: the smallest count of `gpu` that fits
    # The spec a small stand-in checkpoint stands in for (the demo's synthesised checkpoint: its release spec):
    # kernels are compiled and the serving plan made at its widths, not at the stand-in's. None: the checkpoint's own.
    stands_in_for: ModelSpec | None = None

    @property
    def widths(self) -> ModelSpec:
        """The spec whose dims the compile and plan stages use: the one the checkpoint stands in for, else its own."""
        return self.stands_in_for or self.spec

    def widths_inputs(self) -> dict:
        """What of the named spec decides compile and plan outputs (nothing when the checkpoint is not a stand-in)."""
        return {"stands_in_for": spec_to_yaml(self.stands_in_for)} if self.stands_in_for is not None else {}

    def widths_note(self) -> str:
        return f" at {self.stands_in_for.name}'s widths" if self.stands_in_for is not None else ""

    @cached_property
    def checkpoint_digest(self) -> dict[str, str]:
        """Digest of every checkpoint file, computed once per run (coverage and validate both key on it)."""
        root = self.checkpoint.root
        names = ["config.json", *self.checkpoint.files, *self.checkpoint.pickle_files]
        if self.checkpoint.index_path is not None:
            names.append(self.checkpoint.index_path.name)
        return {name: file_digest(root / name) for name in sorted(set(names))}

    @cached_property
    def checkpoint_identity(self) -> str:
        """The checkpoint as reports and the model card name it: `repo@revision` for a Hub checkpoint, else its
        folder name and content digest (never a local path, which differs between machines and folders)."""
        source = self.checkpoint.source
        if source and not Path(source).exists() and "/" in source:
            return source
        content = hashlib.sha256(json.dumps(self.checkpoint_digest, sort_keys=True).encode()).hexdigest()
        return f"{self.checkpoint.root.name} (content sha256:{content[:16]})"

    def report(self, workdir: Path, stage: str, status: str, details: dict, **where) -> Path:
        """A dashboard report for this stage, written beside its files; its path, for the stage's output."""
        report = Report(stage=stage, spec=self.spec.name, status=status, created=self.created, details=details, **where)
        suffix = "-".join(str(v) for v in where.values() if v)
        path = workdir / f"report-{stage}{'-' + suffix if suffix else ''}.json"
        path.write_text(report.model_dump_json(indent=2) + "\n")
        return path


def _dump(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def spec_stage(ctx: RunContext) -> Stage:
    def run(workdir: Path, upstream: dict) -> StageResult:
        (workdir / "spec.yaml").write_text(spec_to_yaml(ctx.spec))
        # The spec itself goes into the report: the dashboard plans a derived or scaled spec (not shipped) from it;
        # a stand-in's report names the spec it stands in for, the model the dashboard plans, as the plan stage does.
        details = {
            "architecture": ctx.spec.hf.architecture,
            "layers": ctx.spec.num_layers,
            "spec": spec_to_dict(ctx.spec),
        }
        if ctx.stands_in_for is not None:
            details["stands_in_for"] = spec_to_dict(ctx.stands_in_for)
        report = ctx.report(workdir, "spec", PASS, details)
        output = outputs.SpecOutput(spec_file=workdir / "spec.yaml", reports=(report,))
        return StageResult(PASS, f"{ctx.spec.name}: {ctx.spec.num_layers} layers", output)

    return Stage(
        "spec", lambda: {"spec": spec_to_yaml(ctx.spec), **ctx.widths_inputs()}, run, output=outputs.SpecOutput,
    )  # fmt: skip


def coverage_stage(ctx: RunContext) -> Stage:
    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.checkpoint.scan import scan_coverage
        from dayone.spec.manifest import build_manifest

        manifest = build_manifest(ctx.spec)
        coverage, shards = scan_coverage(manifest, ctx.checkpoint)
        details = {
            "ok": coverage.ok,
            "tensors": sum(s.tensors for s in shards) or len(ctx.checkpoint.pickle_tensors),
            "expected_tensors": len(manifest),
            **coverage.as_dict(),
        }
        _dump(workdir / "inspect.json", details)
        status = "pass" if coverage.ok else "fail"
        report = ctx.report(workdir, "coverage", status, details)
        summary = f"{details['tensors']:,} tensors" + ("" if coverage.ok else f", {coverage.missing_count} missing")
        output = outputs.CoverageOutput(ok=coverage.ok, tensors=details["tensors"], missing=coverage.missing_count,
                                        inspect=workdir / "inspect.json", reports=(report,))  # fmt: skip
        return StageResult(status, summary, output)

    return Stage(
        "coverage", lambda: {"checkpoint": ctx.checkpoint_digest}, run, after=("spec",), output=outputs.CoverageOutput,
    )  # fmt: skip


def plan_stage(ctx: RunContext) -> Stage:
    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.spec.planner import make_plan

        # gpus None: the smallest count of ctx.gpu that fits (the run's default); a count given that does not fit
        # fails the stage, naming the smallest count that fits for every GPU kind.
        plan = make_plan(ctx.widths, ctx.gpu, ctx.gpus)
        _dump(workdir / "plan.json", plan.as_dict())
        where = f"{plan.gpus} x {ctx.gpu}{ctx.widths_note()}"
        output = outputs.PlanOutput(fits=plan.fits, plan=workdir / "plan.json")
        if not plan.fits:
            return StageResult(FAIL, f"{where}: does not fit; {plan.smallest_fits()}", output)
        chosen = " (the smallest count that fits)" if ctx.gpus is None else ""
        return StageResult(PASS, f"{where}{chosen}: fits, {plan.decode_bound_tokens_per_s:.0f} tok/s bound", output)

    return Stage(
        "plan", lambda: {"gpu": ctx.gpu, "gpus": ctx.gpus, **ctx.widths_inputs()}, run, after=("spec",),
        output=outputs.PlanOutput,
    )  # fmt: skip


def generate_stage(ctx: RunContext) -> Stage:
    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.adapters.targets import common, generator
        from dayone.checks.static import check_target
        from dayone.programs.megatron.runner import plan_checks

        plan_checks(ctx.spec, ctx.targets)  # the Megatron targets' checks then share one interpreter
        failed, reports, adapters = [], [], {}
        if not common.is_shipped(ctx.spec):  # what the generated headers' command regenerates from
            (workdir / common.SPEC_FILE).write_text(spec_to_yaml(ctx.spec))
        for target in ctx.targets:
            files = generator(target)(ctx.spec)
            root = adapters[target] = workdir / target
            common.write_tree(root, files)
            check = check_target(ctx.spec, target, root, files, lambda t=target: generator(t)(ctx.spec))
            status = PASS if check.ok else FAIL
            if not check.ok:
                failed.append(target)
            details = {"files": sorted(files), "check": check.as_dict()}
            reports.append(ctx.report(workdir, "generate", status, details, target=target))
        status = FAIL if failed else PASS
        summary = f"{', '.join(ctx.targets)}" + (f"; check failed: {', '.join(failed)}" if failed else "; checked")
        return StageResult(
            status, summary, outputs.GenerateOutput(adapters=adapters, failed=tuple(failed), reports=tuple(reports))
        )

    def inputs() -> dict:
        from dayone.adapters.pins import RELEASES, TARGET_RELEASES

        # The framework releases the static checks parse (the pins): a new pin rechecks.
        return {"targets": ctx.targets, "pins": {t: [RELEASES[r].key for r in TARGET_RELEASES[t]] for t in ctx.targets}}

    return Stage("generate", inputs, run, after=("spec",), code=GENERATE_CODE, output=outputs.GenerateOutput)


def conform_stage(ctx: RunContext) -> Stage:
    """The generated engine adapters judged by the pinned SGLang and vLLM themselves, each in its peer environment
    (dayone.conform): the levels reached at world size 1 and 2, and why the first level not reached was not."""

    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.conform.driver import cell_details, conform_target
        from dayone.conform.forward import References

        generated: outputs.GenerateOutput = upstream["generate"]
        statuses, lines, runs, held, reports = [], [], {}, {}, []
        references = References(ctx.checkpoint, ctx.spec)  # computed as the first forward is judged, then shared
        for target in (t for t in ctx.targets if t in ENGINES):
            # Without timings: they vary between runs; the stage's files must not.
            report = conform_target(
                target, generated.adapters[target], ctx.checkpoint.root, ctx.spec, references=references
            ).without_timings()
            runs[target] = workdir / f"conform-{target}.json"
            _dump(runs[target], report.as_dict())
            details = cell_details(report)
            status = FAIL if not report.passed else details.pop("status")
            details.pop("status", None)
            if status == FAIL:
                # A level that ran failed: the release holds the target back (a level not run holds nothing back:
                # the dashboard says it did not run).
                details["first_failure"] = _first_failure(report)
                held[target] = details["first_failure"] or "a level failed"
            reports.append(ctx.report(workdir, "conform", status, details, target=target))
            missing = _levels_not_run(details["levels"]) if status == PASS else ""
            if status == NOT_RUN:  # nothing of it ran: why, in the levels' words (a missing peer: what installs it)
                lines.append(f"{target}: not run: {_why_not_run(report)}")
            else:
                lines.append(f"{target}: {details.get('first_failure') or details['summary'] + missing}")
            statuses.append(PARTIAL if missing else status)
        # Partial where a level was left not run (forward on a CPU): as the dashboard's cell says, never pass.
        if FAIL in statuses:
            status = FAIL
        elif statuses and all(s in (PASS, PARTIAL) for s in statuses):
            status = PARTIAL if PARTIAL in statuses else PASS
        else:
            status = NOT_RUN
        output = outputs.ConformOutput(runs=runs, held=held, reports=tuple(reports))
        return StageResult(status, "; ".join(lines) or "no engine target", output)

    def inputs() -> dict:
        from dayone.adapters.pins import RELEASES

        return {"checkpoint": ctx.checkpoint_digest, "targets": ctx.targets,
                "pins": {t: RELEASES[t].key for t in ("sglang", "vllm")}}  # fmt: skip

    # The probes are scripts the peers run (never imported): their whole folder is code, beside the driver's imports.
    return Stage(
        "conform", inputs, run, after=("generate",), code=("dayone.programs.engines.*",), output=outputs.ConformOutput
    )


def _first_failure(report) -> str:
    """ "LEVEL failed at world size N: its first line" for the first failed level of a target's report."""
    for run in report.runs:
        for level, entry in run.levels.items():
            if entry.status == FAIL:
                return f"{level} failed at world size {run.world_size}: {entry.detail.splitlines()[0]}"
    return ""


def _why_not_run(report) -> str:
    """Why a conform TargetReport's first level did not run: its detail, naming world sizes only where they differ."""
    from dayone.conform.results import LEVELS

    why: dict[str, list[int]] = {}
    for run in report.runs:
        why.setdefault(run.levels[LEVELS[0]].detail, []).append(run.world_size)
    if len(why) == 1:
        return next(iter(why))
    return "; ".join(f"world size {', '.join(map(str, sizes))}: {detail}" for detail, sizes in why.items())


def _levels_not_run(levels: list[dict]) -> str:
    """The summary's note for a target whose first level passed: the first level not passed at every world size,
    as " (partial: LEVEL not run, world size N: why)"; empty when every level passed."""
    missing = next((lv for lv in levels if lv["status"] != PASS), None)
    return f" (partial: {missing['level']} {missing['status']}, {missing['reason']})" if missing else ""


def compile_stage(ctx: RunContext) -> Stage:
    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.compile_stage import kernel_cache, specializations_for
        from dayone.kernels.aot import AotError, compile_specializations
        from dayone.present import step

        cache = kernel_cache(ctx.out / "cache" / "kernels")  # by default each OUT keeps its own
        specs = specializations_for(ctx.widths)
        table = []
        try:
            for i, one in enumerate(specs, 1):  # one at a time, to show each (a cold compile takes minutes)
                step(f"compile: kernel {i} of {len(specs)}: {one.kernel}")
                table.extend(compile_specializations([one], ctx.archs, cache))
        except AotError as err:
            _dump(workdir / "error.json", {"error": str(err)})
            return StageResult(FAIL, str(err), outputs.CompileOutput())
        (workdir / "cubin").mkdir()
        rows = []
        for row in table:
            shutil.copyfile(cache / row.cubin, workdir / "cubin" / row.cubin)
            # Timings and cache hits vary between runs; the stage's files must not.
            rows.append({k: v for k, v in row.as_dict().items() if k not in ("compile_seconds", "cached")})
        resources = {"stage": "compile", "spec": ctx.widths.name, "archs": list(ctx.archs), "ok": True, "kernels": rows}
        _dump(workdir / "resources.json", resources)
        reports = tuple(
            ctx.report(workdir, "compile", PASS, {"resources": [r for r in rows if r["arch"] == arch]}, arch=arch)
            for arch in ctx.archs
        )
        output = outputs.CompileOutput(resources=workdir / "resources.json", cubins=workdir / "cubin", reports=reports)
        return StageResult(PASS, f"{len(rows)} kernel builds for {', '.join(ctx.archs)}{ctx.widths_note()}", output)

    return Stage(
        "compile", lambda: {"archs": ctx.archs, "triton": _version("triton"), **ctx.widths_inputs()}, run,
        after=("spec",),
        code=("dayone.kernels.*",),  # kernels are imported by name
        output=outputs.CompileOutput,
    )  # fmt: skip


def synth_stage(named: ModelSpec, scale: str, seed: int) -> Stage:
    """The demo's checkpoint: a stand-in of `named` (a shipped spec or a spec file) at `scale` (tiny, small or
    faithful), written by `integrate synth`'s code, deterministic by seed. The folder is named <spec>-<scale>, as the
    run names the spec derived from it (its lineage; a checkpoint the run did not make is named after its model)."""

    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.synth.scale import scaled_spec
        from dayone.synth.write import write_synthetic

        spec = scaled_spec(named, scale)
        folder = f"{named.name}-{scale}"
        write_synthetic(spec, workdir / folder, seed=seed, num_shards=3)
        return StageResult(
            PASS, f"{named.name} at scale {scale}, seed {seed}", outputs.SynthOutput(checkpoint=workdir / folder)
        )

    return Stage(
        "synth", lambda: {"spec": spec_to_yaml(named), "scale": scale, "seed": seed}, run, output=outputs.SynthOutput,
    )  # fmt: skip


def validate_stage(ctx: RunContext) -> Stage:
    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.validate import Options, validate

        # The run's checkpoint and spec as they are, not re-read from their files; the Report as validate made it.
        found = validate(ctx.checkpoint, ctx.spec, Options()).report
        assert found is not None  # one process: its only rank holds the report
        # At the run's time, the checkpoint named by its identity (no local path), without timings (they vary
        # between runs; the stage's files must not).
        details = {k: v for k, v in found.details.items() if k != "seconds"} | {"checkpoint": ctx.checkpoint_identity}
        report = Report(**(dict(found) | {"created": ctx.created, "details": details}))  # UTC, redacted, as any report
        verdict = workdir / "report-validate.json"
        verdict.write_text(report.model_dump_json(indent=2) + "\n")
        # The engines' own numerics need their GPU kernels: say so in each engine's cell instead of leaving it blank.
        # Miles and Megatron-Bridge get no validate report: their Megatron model's numerics are generate --check's
        # (log-probs against the reference tier, train/rollout parity), which the dashboard shows as such.
        engines = tuple(
            ctx.report(workdir, "validate", NOT_RUN, {"reason": ENGINE_NUMERICS_REASON}, target=target)
            for target in ctx.targets
            if target in ENGINES
        )
        first = report.details.get("first_failure")
        summary = "every metric within tolerance" if report.status == PASS else f"first failure: {first}"
        return StageResult(report.status, summary, outputs.ValidateOutput(report=verdict, reports=(verdict, *engines)))

    return Stage(
        "validate", lambda: {"checkpoint": ctx.checkpoint_digest, "targets": ctx.targets}, run, after=("spec",),
        output=outputs.ValidateOutput,
    )  # fmt: skip


def package_stage(ctx: RunContext) -> Stage:
    """Wheels, sdists, model card and SHA256SUMS from the generated adapters and the reports of the stages before."""
    after = ("spec", "coverage", "generate", "compile", "validate")

    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.package import package
        from dayone.package.build import BuildError

        generated: outputs.GenerateOutput = upstream["generate"]
        # Conformance, when it ran, decides which engine targets ship (and the model card shows it).
        conformed: outputs.ConformOutput | None = upstream["conform"]
        held = conformed.held if conformed is not None else {}
        inputs = workdir / "inputs"
        for target in (t for t in ctx.targets if t not in held):
            # Only the generated files: not what a build in that folder may have left (build/, *.egg-info).
            shutil.copytree(generated.adapters[target], inputs / target, ignore=_NOT_GENERATED)
        for report in sorted(p for out in upstream.values() if out is not None for p in out.reports):
            shutil.copyfile(report, inputs / report.name)
        if all(t in held for t in ctx.targets):
            return StageResult(FAIL, f"nothing packaged: conform failed for {', '.join(held)}", outputs.PackageOutput())
        try:
            result = package(inputs, workdir / "dist", spec=ctx.spec)
        except BuildError as err:
            return StageResult(FAIL, str(err).splitlines()[0], outputs.PackageOutput())
        finally:
            shutil.rmtree(inputs, ignore_errors=True)
        reports = [
            ctx.report(workdir, "package", PASS, {"wheel": p["wheel"], "sdist": p["sdist"]}, target=p["target"])
            for p in result.packages
        ]
        for target, why in held.items():
            reports.append(ctx.report(workdir, "package", FAIL, {"reason": f"not packaged: conform failed: {why}"},
                                      target=target))  # fmt: skip
        summary = f"{len(result.packages)} wheels + sdists, model card, SHA256SUMS"
        if held:
            summary += f"; not packaged (conform failed): {', '.join(held)}"
        return StageResult(
            FAIL if held else PASS, summary, outputs.PackageOutput(dist=workdir / "dist", reports=tuple(reports))
        )

    def inputs() -> dict:
        # The wheels' bytes depend on the build tools (setuptools writes its version into each wheel).
        return {"targets": ctx.targets, "tools": {name: _version(name) for name in ("build", "setuptools")}}

    return Stage(
        "package", inputs, run, after=after, reads=("conform",),
        code=("dayone.templates.package.*",), output=outputs.PackageOutput,
    )  # fmt: skip


def publish_stage(ctx: RunContext, release: Publish) -> Stage:
    """The GitHub release. Its key holds the package stage's key and output, so a rerun with nothing new uploads
    nothing (and the release itself skips assets already there with the same checksum)."""

    def run(workdir: Path, upstream: dict) -> StageResult:
        from dayone.release import PublishError
        from dayone.release.github import publish

        token = os.environ.get("GITHUB_TOKEN")
        if not token:
            return StageResult(FAIL, "GITHUB_TOKEN is not set")
        repo, tag = release.repo, release.tag
        packaged: outputs.PackageOutput = upstream["package"]
        try:
            result = publish(packaged.dist, repo, tag, token=token, api_url=release.api_url)
        except PublishError as err:
            return StageResult(FAIL, str(err))
        status = FAIL if result.conflicts else PASS
        report = ctx.report(workdir, "publish", status, {"repo": repo, "tag": tag, "release": result.release_url})
        output = outputs.PublishOutput(release=result.release_url, assets=len(result.assets), reports=(report,))
        return StageResult(status, f"{repo}@{tag}: {len(result.assets)} assets", output)

    def inputs() -> dict:
        # The dist's files are in the package stage's key and output (the runner keys on both): a rerun with nothing
        # new uploads nothing.
        return {
            "repo": release.repo, "tag": release.tag, "api": release.api_url,
            "token": bool(os.environ.get("GITHUB_TOKEN")),  # whether one is set, never the token
        }  # fmt: skip

    return Stage("publish", inputs, run, after=("package",), output=outputs.PublishOutput)


_NOT_GENERATED = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
# The templates the generators render, by name (the generators and checks are read off generate's function).
GENERATE_CODE = (
    "dayone.templates.common.*", "dayone.templates.sglang.*", "dayone.templates.vllm.*", "dayone.templates.miles.*",
    "dayone.templates.megatron_bridge.*",
)  # fmt: skip
ENGINE_NUMERICS_REASON = (
    "the engine's own numerics need its GPU kernels; this run checked dayone's fast tier against the reference "
    "(the reference row), on the weights the adapters load through the same weight map"
)


def _version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
