"""`integrate generate SPEC|CHECKPOINT --target T -o DIR [--check]`: framework code from the spec, through one weight
map; with --check, everything a CPU machine can verify of it (see dayone.checks.static)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from dayone.core.errors import InputError
from dayone.core.vocabulary import ENGINES, TARGETS
from dayone.present import console, emit_json, shown
from dayone.spec.registry import MODELS_DIR, load_spec
from dayone.spec.schema import ModelSpec

if TYPE_CHECKING:
    from dayone.checks.static import TargetCheck

TARGET_CHOICES = (*TARGETS, "all")


def resolve_spec(source: str, spec_arg: str | None) -> ModelSpec:
    """A shipped spec name, a spec file, or a checkpoint (folder or HF repo id) whose config.json gives the spec."""
    if spec_arg:
        return load_spec(spec_arg)
    path = Path(source)
    if (MODELS_DIR / f"{source}.yaml").is_file() or (path.is_file() and path.suffix in (".yaml", ".yml", ".json")):
        return load_spec(source)
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint

    return spec_for_checkpoint(open_checkpoint(source), None)


@click.command()
@click.argument("source", metavar="SPEC|CHECKPOINT")
@click.option("--target", "targets", type=click.Choice(TARGET_CHOICES), multiple=True, default=("all",),
              show_default=True, help="Framework(s) to generate for (repeatable).")  # fmt: skip
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output folder; each target goes to OUT/<target>/ (replaced as a whole).")  # fmt: skip
@click.option("--spec", "spec_arg", help="Spec NAME or FILE to use instead of deriving one from the checkpoint.")
@click.option("--check", is_flag=True, help="Byte-compile, ruff, API check against the pinned releases, table checks; "
              "from a checkpoint, SGLang / vLLM themselves where their peers are installed.")  # fmt: skip
@click.option("--report", type=click.Path(dir_okay=False, path_type=Path), help="Write dashboard 'generate' reports.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def generate(source, targets, out_dir, spec_arg, check, report, as_json) -> None:
    """Generate SGLang / vLLM / Miles / Megatron-Bridge code for a model. Exit 1 when --check finds problems."""
    from dayone.adapters.targets import TARGETS, common, generator

    spec = resolve_spec(source, spec_arg)
    chosen = TARGETS if "all" in targets else tuple(dict.fromkeys(targets))
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a folder")
    rendered = {target: generator(target)(spec) for target in chosen}  # everything renders before anything is written
    if not common.is_shipped(spec):  # the headers' command regenerates from it (no checkpoint path in the code)
        from dayone.core.atomic import write_atomic
        from dayone.spec.registry import spec_to_yaml

        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(out_dir / common.SPEC_FILE, spec_to_yaml(spec))
    if check:
        from dayone.programs.megatron.runner import plan_checks

        plan_checks(spec, chosen)  # the Megatron targets' checks then share one interpreter
    results = []
    for target, files in rendered.items():
        root = out_dir / target
        common.write_tree(root, files)
        checked = None
        if check:
            from dayone.checks.static import check_target

            checked = check_target(spec, target, root, files, lambda t=target: generator(t)(spec))
            _conform(checked, target, root, source, spec)
        results.append(Generated(target, root, sorted(files), checked))
    ok = all(r.check is None or r.check.ok for r in results)
    if report:
        _write_reports(report, spec, results)
    if as_json:
        emit_json({"spec": spec.name, "ok": ok, "targets": [r.as_dict() for r in results]})
    else:
        _print(spec, results)
    raise SystemExit(0 if ok else 1)


@dataclass
class Generated:
    """One target's generated folder and, with --check, its checks (typed until written out)."""

    target: str
    root: Path
    files: list[str]
    check: TargetCheck | None

    def as_dict(self) -> dict:
        return {"target": self.target, "dir": str(self.root), "files": self.files,
                **({"check": self.check.as_dict()} if self.check is not None else {})}  # fmt: skip


def _conform(check: TargetCheck, target: str, root: Path, source: str, spec: ModelSpec) -> None:
    """Where the source is a checkpoint folder and the target's framework peer is installed, the framework itself
    judges the adapter (dayone.conform, world size 1; `integrate conform` runs more)."""
    from dayone.conform import peers
    from dayone.conform.driver import conform_target

    if target not in ENGINES or not (Path(source) / "config.json").is_file() or peers.peer_python(target) is None:
        return
    report = conform_target(target, root, Path(source), spec, (1,))
    check.conform = report
    if not report.passed:
        check.problems["conform"] = [report.runs[0].first_failure()]  # a problem: the check is no longer ok


def _write_reports(path: Path, spec: ModelSpec, results: list[Generated]) -> None:
    from dayone.core.atomic import write_atomic
    from dayone.reports.model import Report, now

    created = now()
    reports = [
        Report(stage="generate", spec=spec.name, target=r.target, created=created,
               status="pass" if r.check is None or r.check.ok else "fail",
               details={"files": r.files, **({"check": r.check.as_dict()} if r.check is not None else {})})
        for r in results
    ]  # fmt: skip
    write_atomic(path, "[\n" + ",\n".join(r.model_dump_json(indent=2) for r in reports) + "\n]\n")


def _print(spec: ModelSpec, results: list[Generated]) -> None:
    for r in results:
        console.print(f"[bold]{r.target}[/]: {len(r.files)} files in {shown(r.root)}")
        c = r.check
        if c is None:
            continue
        verdict = "[green]ok[/]" if c.ok else "[red]FAIL[/]"
        console.print(
            f"  check {verdict}: {c.symbols} imported symbols and {c.calls} calls against "
            f"{', '.join(c.releases)}; byte-compile, ruff, table + model tree, determinism"
        )
        for kind, problems in c.problems.items():
            for problem in problems[:20]:
                console.print(f"  [red]{shown(kind)}[/] {shown(problem)}")


COMMAND = generate
