"""Stage reports on disk: written atomically, read back from files and folders as untrusted JSON.
A report file holds one report or a list of them. Two stage outputs that predate this format are read as reports,
with created = the file's modification time: `integrate inspect --json` output (a coverage report) and
`integrate compile`'s resources.json (a compile report per arch).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from dayone.core import untrusted_json
from dayone.core.atomic import write_atomic
from dayone.core.errors import InputError
from dayone.reports.model import Report
from pydantic import ValidationError

# Keys that identify the documents stage commands write in their own formats, read here as reports:
# `integrate inspect --json` (dayone.commands.inspect_cmd) and `integrate compile`'s resources.json (compile_cmd).
INSPECT_KEYS = frozenset({"ok", "checkpoint", "spec", "expected_tensors", "missing"})
COMPILE_KEYS = frozenset({"stage", "spec", "archs", "ok", "kernels"})


def write_report(path: Path, report: Report) -> None:
    write_atomic(Path(path), report.model_dump_json(indent=2) + "\n")


def coverage_from_inspect(data: dict, created: datetime) -> Report:
    """Wrap `integrate inspect --json` output as a coverage report."""
    return Report(
        stage="coverage", spec=data["spec"], status="pass" if data["ok"] else "fail", created=created, details=data
    )


def compile_from_resources(data: dict, created: datetime) -> list[Report]:
    """Wrap `integrate compile`'s resources.json as one compile report per arch."""
    return [
        Report(
            stage="compile",
            spec=data["spec"],
            arch=arch,
            status="pass" if data["ok"] else "fail",
            created=created,
            details={
                "resources": [k for k in data["kernels"] if k.get("arch") == arch],
                "seconds": data.get("seconds"),
            },
        )
        for arch in data["archs"]
    ]


def load_reports(paths: list[Path]) -> list[Report]:
    """Every report in the given files and folders (folders: their *.json files, recursively)."""
    reports: list[Report] = []
    for path in map(Path, paths):
        if path.is_dir():
            files = sorted(path.rglob("*.json"))
        elif path.is_file():
            files = [path]
        else:
            raise InputError(f"{path}: no such file or folder")
        for file in files:
            reports.extend(_read(file))
    return reports


def _read(file: Path) -> list[Report]:
    reports = _parse(file)
    for r in reports:
        r._source = file.name
    return reports


def _parse(file: Path) -> list[Report]:
    data = untrusted_json.read(file)
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        where = f"{file}" if not isinstance(data, list) else f"{file}[{i}]"
        if not isinstance(item, dict):
            raise InputError(f"{where}: a report is a JSON object, got {type(item).__name__}")
        created = datetime.fromtimestamp(file.stat().st_mtime, UTC).replace(microsecond=0)
        try:
            if INSPECT_KEYS <= item.keys():
                out.append(coverage_from_inspect(item, created))
            elif COMPILE_KEYS <= item.keys() and "status" not in item:
                out.extend(compile_from_resources(item, created))
            else:
                out.append(Report.model_validate(item))
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "report"
            raise InputError(f"{where}: {loc}: {first['msg']}") from None
    return out
