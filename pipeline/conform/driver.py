"""Run a target's probe in its framework's peer environment, per world size, and judge what it loaded.

    report = conform_target("vllm", adapter_folder, checkpoint, spec, world_sizes=(1, 2))
The report is conform.json's content: {"target", "framework", "version", "runs": [levels.json per world size, with
"loaded" filled by the judge]}. A level that could not run is "not run" with its reason, never "pass".
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

from dayone.adapters.weightmap import TARGET_LAYOUT, build_weight_map
from dayone.checks.releases import RELEASES
from dayone.conform import judge, peers
from dayone.spec.schema import ModelSpec

# Targets judged by an inference engine's own release (Miles and Megatron-Bridge are judged by megatron-core).
ENGINE_TARGETS = ("sglang", "vllm")
LEVELS = ("discovered", "accepted", "built", "loaded", "forward")
PROBE_TIMEOUT_S = 900


def _level(status: str, detail: str) -> dict:
    return {"status": status, "detail": detail}


def not_run_report(target: str, world_sizes, reason: str) -> dict:
    runs = [
        {"framework": target, "version": RELEASES[target].version, "world_size": n, "facts": {},
         "levels": {level: _level("not run", reason) for level in LEVELS}}
        for n in world_sizes
    ]  # fmt: skip
    return {"target": target, "framework": target, "version": RELEASES[target].version, "runs": runs}


def conform_target(
    target: str, adapter: Path, checkpoint: Path, spec: ModelSpec, world_sizes=(1, 2), keep: Path | None = None
) -> dict:
    """adapter: the target's generated folder (its pyproject.toml); keep: leave the probes' dumps here."""
    python = peers.peer_python(target)
    if python is None:
        where = peers.peers_root() / target
        return not_run_report(target, world_sizes, f"the {target} peer environment is not installed ({where})")
    report = {"target": target, "framework": target, "version": RELEASES[target].version, "runs": []}
    with tempfile.TemporaryDirectory(prefix=f"dayone-conform-{target}-") as tmp:
        scratch = Path(tmp)
        site = scratch / "site"
        try:
            peers.install_adapter(adapter, python, site, scratch)
        except RuntimeError as err:
            reason = str(err)
            failed = not_run_report(target, world_sizes, "the adapter was not installed")
            for run in failed["runs"]:
                run["levels"]["discovered"] = _level("fail", reason)
            return failed
        table = None
        for world in world_sizes:
            out = (keep or scratch) / f"{target}-ws{world}"
            run = _probe(python, target, site, checkpoint, world, out)
            # The probe fails "loaded" itself when the framework's load raised (the error names the tensor).
            if run["levels"]["built"]["status"] == "pass" and run["levels"]["loaded"]["status"] != "fail":
                table = table or build_weight_map(spec, TARGET_LAYOUT[target], mxfp4="packed")
                run["levels"]["loaded"] = _judge(table, checkpoint, world, out, run)
            report["runs"].append(run)
    return report


def _probe(python: Path, target: str, site: Path, checkpoint: Path, world: int, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [str(python), str(peers.probe_script(target)), "--package-site", str(site), "--checkpoint",
           str(checkpoint), "--world-size", str(world), "--out", str(out)]  # fmt: skip
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
        tail = proc.stderr.strip().splitlines()[-1:] if proc.returncode else []
    except subprocess.TimeoutExpired:
        tail = [f"the probe ran past {PROBE_TIMEOUT_S} s"]
    levels = out / "levels.json"
    if not levels.is_file():
        reason = f"the {target} probe wrote no levels.json: {(tail or ['no output'])[-1]}"
        return {**not_run_report(target, [world], "the probe did not finish")["runs"][0],
                "levels": {"discovered": _level("fail", reason),
                           **{lv: _level("not run", "the probe did not finish") for lv in LEVELS[1:]}}}  # fmt: skip
    run = json.loads(levels.read_text())
    run["seconds"] = round(time.monotonic() - start, 1)
    return run


def _judge(table, checkpoint: Path, world: int, dump: Path, run: dict) -> dict:
    from dayone.checkpoint.reader import open_local

    tensors = _Tensors(open_local(Path(checkpoint)))
    problems: list[str] = []
    for rank in range(world):
        try:
            problems += judge.judge_rank(table, tensors, rank, world, dump)
        except ValueError as err:  # the map cannot shard a tensor over this world size (walk.split)
            return _level("not run", f"the reference reading has no layout for world size {world}: {err}")
        except RuntimeError as err:  # a checkpoint tensor that does not fit its parameter as the spec sizes it
            return _level("fail", f"the checkpoint does not fit the spec's weight map: {err}")
    if problems:
        run["problems"] = problems[: judge.LIMIT]
        return _level("fail", judge.first(problems))
    return _level(
        "pass",
        f"every parameter of {world} rank(s) bitwise equal to the reference reading, each weight loader called once "
        f"per tensor, every checkpoint tensor consumed, derived tensors right after a weight update",
    )


class _Tensors:
    """Checkpoint tensors by name, read when asked (dayone's own reader; nothing unpickled)."""

    def __init__(self, checkpoint) -> None:
        self.checkpoint = checkpoint
        self._cache: dict = {}

    def keys(self):
        return self.checkpoint.names()

    def __getitem__(self, name: str):
        if name not in self._cache:
            self._cache[name] = self.checkpoint.read(name)
        return self._cache[name]


def highest_level(run: dict) -> tuple[str | None, str | None]:
    """(highest level passed in order, "level: reason" of the first level not passed) of one run."""
    best = None
    for level in LEVELS:
        entry = run["levels"].get(level, {})
        if entry.get("status") != "pass":
            return best, f"{level} {entry.get('status', 'not run')}: {entry.get('detail', '')}"
        best = level
    return best, None


def conform_all(adapters: Path, checkpoint: Path, spec: ModelSpec, world_sizes=(1, 2), targets=None) -> list[dict]:
    """Every engine target generated under `adapters` (generate's output folder: adapters/<target>/)."""
    chosen = [t for t in (targets or ENGINE_TARGETS) if (adapters / t / "pyproject.toml").is_file()]
    return [conform_target(t, adapters / t, checkpoint, spec, world_sizes) for t in chosen]


def passed(report: dict) -> bool:
    """No level failed in any run ("not run" is not a failure here; the report says why)."""
    return not any(lv.get("status") == "fail" for run in report["runs"] for lv in run["levels"].values())


def cell_details(report: dict) -> dict:
    """A dashboard cell's details for one target: levels in order, each passed only where it passed at every world
    size, its reason naming the world size where it did not; the full runs beside them."""
    levels = []
    for level in LEVELS:
        entries = [(run["world_size"], run["levels"][level]) for run in report["runs"]]
        failed = [(n, e) for n, e in entries if e["status"] == "fail"]
        missing = failed or [(n, e) for n, e in entries if e["status"] != "pass"]
        if missing:
            n, entry = missing[0]
            levels.append({"level": level, "status": entry["status"], "reason": f"world size {n}: {entry['detail']}"})
        else:
            sizes = ", ".join(str(n) for n, _ in entries)
            levels.append({"level": level, "status": "pass", "reason": f"world size {sizes}"})
    reached = [highest_level(run)[0] or "none" for run in report["runs"]]
    summary = ", ".join(f"ws{run['world_size']} {r}" for run, r in zip(report["runs"], reached))
    status = "pass" if levels[0]["status"] == "pass" else levels[0]["status"]
    return {"status": status, "summary": summary, "levels": levels, "version": report["version"],
            "runs": report["runs"]}  # fmt: skip
