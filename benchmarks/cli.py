"""Whole-process figures of the short commands scripts and CI run most, each as a ratio to its floor, measured in
the same run: the start of a bare `python -c pass` for every command, and for `inspect` of the full-size K3
skeleton also the header-parse floor (read + json.loads of its 96 headers in one process).

    python benchmarks/cli.py [--work DIR] [--repeat 5] [--breakdown] [--only inspect]

Every figure is the median of --repeat rounds; a round runs each command once, in turn, so a ratio is taken between
runs seconds apart (the median of the per-round ratios). Wall time is what a user waits; CPU time (user + sys of
the process and its workers) is what the machine spends, and moves less when other work shares the cores. The load
average is printed before and after: on a shared machine absolute times move with it, ratios much less.

--work keeps the prepared inputs between invocations: the K3 skeleton (13 s), a copy of it as the safetensors library
and transformers write a release (headers in the library's order, index sorted by name: `inspect (K3 sorted)`), a
tiny checkpoint, kernels compiled for sm_90 (minutes on 2 cores) and a finished `run --demo` (many minutes).
--breakdown profiles inspect's work in one process: its steps against json.loads (which inspect skips for headers it
can prove: it compares their bytes with the text the manifest gives, see dayone.checkpoint.scan.proof). --only
inspect measures only the inspect figures and their floors, preparing only the skeleton, its copy as the library
writes it and the tiny checkpoint.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEADER_FLOOR = """
import json, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("*.safetensors")):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        json.loads(f.read(n))
"""
TARGETS = {"help": 0.3, "spec list": 0.3, "compile (cached)": 1.0, "run --demo (cached)": 1.0}  # seconds
INSPECT_TARGET = 1.5  # x the header-parse floor
INSPECT_FIGURES = (
    "python -c pass",
    "header-parse floor",
    "inspect (tiny)",
    "inspect (K3 skeleton)",
    "inspect (K3 sorted)",
)


def integrate() -> list[str]:
    """The console script a user runs, next to this interpreter (else `python -m dayone`)."""
    script = Path(sys.executable).with_name("integrate")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "dayone"]


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s of the process and the children it waited for, peak RSS MB of any of them)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # inspect exits 1 for "not covered": still a measurement, but ours must be covered
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {proc.stderr.read().decode()[-800:]}")
    proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def prepare(work: Path, cli: list[str], only_inspect: bool = False) -> dict[str, Path]:
    paths = {
        "skeleton": work / "k3-skeleton",
        "tiny": work / "k3-tiny",
        "sorted": work / "k3-library-written",  # (k3-sorted, from before: names sorted, data in manifest order)
        "kernels": work / "kernels",
        "demo": work / "demo",
    }
    steps = [
        ("skeleton", [*cli, "synth", "kimi-k3", "--skeleton", "-o", str(paths["skeleton"])]),
        ("tiny", [*cli, "synth", "kimi-k3", "--scale", "tiny", "-o", str(paths["tiny"])]),
        ("kernels", [*cli, "compile", "kimi-k3", "--arch", "sm_90", "-o", str(paths["kernels"])]),
        # Always rerun: a changed source since the last invocation makes stages stale; this makes them current.
        ("demo", [*cli, "run", "--demo", "-o", str(paths["demo"])]),
    ]
    if only_inspect:
        steps = [step for step in steps if step[0] in ("skeleton", "tiny")]
    for name, cmd in steps:
        if name == "demo" or not paths[name].exists():
            print(f"preparing {name}: {' '.join(cmd[len(cli) - 1 :])}", file=sys.stderr, flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    if not paths["sorted"].exists():
        print("preparing sorted: the skeleton as safetensors and transformers write it", file=sys.stderr, flush=True)
        sort_headers(paths["skeleton"], paths["sorted"])
    return paths


def safetensors_header(entries: dict, metadata: dict | None) -> tuple[bytes, int]:
    """(header bytes, data size) as safetensors' `serialize` writes {name: {dtype, shape, data_offsets}} (offsets
    ignored): tensors by dtype alignment descending, then name, data laid out in that order, compact JSON with
    __metadata__ first, padded with spaces to a multiple of 8 bytes. tests/checkpoint compares it with the library."""
    import json

    from dayone.checkpoint.scan.text import SAFETENSORS_DTYPE_ORDER

    rank = {dtype: i for i, dtype in enumerate(SAFETENSORS_DTYPE_ORDER)}
    ordered = sorted(entries.items(), key=lambda item: (-rank[item[1]["dtype"]], item[0]))
    header: dict = {} if metadata is None else {"__metadata__": metadata}
    offset = 0
    for name, entry in ordered:
        size = entry["data_offsets"][1] - entry["data_offsets"][0]
        header[name] = {"dtype": entry["dtype"], "shape": entry["shape"], "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    return text.ljust(-(-len(text) // 8) * 8), offset


def sort_headers(source: Path, target: Path) -> None:
    """A copy of a skeleton as safetensors and transformers write a release: each shard's header in the library's
    order and layout (safetensors_header), the index as `save_pretrained` writes it (keys sorted, indent 2), the
    config copied. The data regions are left holes, as the skeleton's are: the copy takes seconds and no disk."""
    import json
    import shutil

    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if path.suffix != ".safetensors":
            if path.name.endswith(".index.json"):
                index = json.loads(path.read_text())
                (staging / path.name).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
            else:
                shutil.copyfile(path, staging / path.name)
            continue
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
        text, data_size = safetensors_header(header, header.pop("__metadata__", None))
        with open(staging / path.name, "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text)
            f.truncate(8 + len(text) + data_size)
    staging.rename(target)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--work", type=Path, help="Keep prepared inputs here (default: a temporary folder).")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--breakdown", action="store_true", help="Then profile inspect's work in one process.")
    parser.add_argument("--only", choices=["inspect"], help="Measure only inspect and its floors (no compile, run).")
    args = parser.parse_args()
    cli = integrate()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        paths = prepare(work, cli, only_inspect=args.only == "inspect")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "header-parse floor": [sys.executable, "-c", HEADER_FLOOR, str(paths["skeleton"])],
            "help": [*cli, "--help"],
            "spec list": [*cli, "spec", "list"],
            "inspect (tiny)": [*cli, "inspect", str(paths["tiny"])],
            "inspect (K3 skeleton)": [*cli, "inspect", str(paths["skeleton"])],
            "inspect (K3 sorted)": [*cli, "inspect", str(paths["sorted"])],
            "compile (cached)": [*cli, "compile", "kimi-k3", "--arch", "sm_90", "-o", str(paths["kernels"])],
            "run --demo (cached)": [*cli, "run", "--demo", "-o", str(paths["demo"])],
        }
        if args.only == "inspect":
            commands = {k: v for k, v in commands.items() if k in INSPECT_FIGURES}
        load_before = os.getloadavg()
        rounds = [{name: timed(cmd) for name, cmd in commands.items()} for _ in range(args.repeat)]
        load_after = os.getloadavg()
    report(rounds, load_before, load_after, os.cpu_count())
    if args.breakdown:
        breakdown(paths["skeleton"], paths["sorted"])


def report(rounds: list[dict], load_before, load_after, cores) -> None:
    def median(name: str, i: int) -> float:
        return statistics.median(r[name][i] for r in rounds)

    def ratio(name: str, floor: str, i: int = 0) -> float:
        return statistics.median(r[name][i] / r[floor][i] for r in rounds)

    print(f"{len(rounds)} rounds on {cores} cores; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print(f"{'command':<24} {'wall s':>7} {'cpu s':>7} {'RSS MB':>7}  {'x start':>8}  target")
    for name in rounds[0]:
        rss = max(r[name][2] for r in rounds)
        target = TARGETS.get(name)
        line = f"{name:<24} {median(name, 0):7.3f} {median(name, 1):7.3f} {rss:7.0f}  {ratio(name, 'python -c pass'):7.1f}x"
        if target is not None:
            line += f"  < {target} s: {'yes' if median(name, 0) < target else 'NO'}"
        print(line)
    name, floor = "inspect (K3 skeleton)", "header-parse floor"
    wall, cpu = ratio(name, floor), ratio(name, floor, 1)
    rss = max(r[name][2] for r in rounds)
    print(
        f"inspect of the K3 skeleton / header-parse floor: {wall:.2f}x wall (target <= {INSPECT_TARGET}x: "
        f"{'yes' if wall <= INSPECT_TARGET else 'NO'}), {cpu:.2f}x CPU; peak RSS {rss:.0f} MB (target < 300 MB: "
        f"{'yes' if rss < 300 else 'NO'})"
    )
    name = "inspect (K3 sorted)"
    rss = max(r[name][2] for r in rounds)
    print(
        f"inspect of the K3 skeleton as safetensors and transformers write it / header-parse floor: "
        f"{ratio(name, floor):.2f}x wall, {ratio(name, floor, 1):.2f}x CPU; peak RSS {rss:.0f} MB (target < 300 MB: "
        f"{'yes' if rss < 300 else 'NO'})"
    )


def breakdown(skeleton: Path, written_by_the_library: Path) -> None:
    """CPU seconds of inspect's steps, each run alone in this process (no workers): json.loads against the rest."""
    import gc
    import json

    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.safetensors_header import read_header_bytes
    from dayone.checkpoint.scan.index import read_listing
    from dayone.checkpoint.scan.proof import Expected, RunChain, prove_header
    from dayone.checkpoint.scan.runs import ManifestRuns
    from dayone.checkpoint.spec_source import spec_for_checkpoint
    from dayone.spec.manifest import EntryTable, build_manifest

    gc.disable()
    clock = time.process_time
    steps: dict[str, float] = {}
    start = clock()
    checkpoint = open_checkpoint(written_by_the_library, read_headers=False)
    steps["open: config, shard files from the index's naming (not counted)"] = clock() - start
    start = clock()
    manifest = build_manifest(spec_for_checkpoint(checkpoint, None))
    expected = Expected(EntryTable(manifest), ManifestRuns(manifest))
    steps["spec derived, manifest"] = clock() - start
    files = checkpoint.shard_files
    start = clock()
    raws = [read_header_bytes(written_by_the_library / f)[0] for f in files]
    steps["read 96 headers"] = clock() - start
    start = clock()
    for raw in raws:
        json.loads(raw)
    loads = steps["json.loads (the floor's work)"] = clock() - start
    del raws
    proven = {}
    for label, root in (("the library's order", written_by_the_library), ("dayone's writer's order", skeleton)):
        start = clock()
        chain = RunChain()
        headers = [(read_header_bytes(root / f), root / f, f) for f in files]
        proven[label] = [
            prove_header(raw, size - data, path, file, expected, chain) for (raw, data, size), path, file in headers
        ]
        steps[f"read + prove, headers in {label}"] = clock() - start
        del headers
    start = clock()
    read_listing(written_by_the_library / "model.safetensors.index.json")
    steps["the index sorted by name, read once (names per file)"] = clock() - start
    notes = {  # steps that are not the release's work
        "read + prove, headers in dayone": "the K3 skeleton: instead of the row above",
        "the index sorted": "in a process alongside the workers",
    }
    total = sum(v for k, v in steps.items() if not k.startswith(("open", "read 96", "json", *notes)))
    print("\ninspect's work in one process, CPU s (workers split the prove rows between them):")
    for name, seconds in steps.items():
        note = next((f"  ({text})" for start, text in notes.items() if name.startswith(start)), "")
        print(f"  {name:<62} {seconds:6.3f}{note}")
    for label, results in proven.items():
        print(f"  proven, headers in {label}: {sum(p is not None for p in results)} of {len(results)} shards")
    print(f"  inspect's work: {total:.3f} s without start-up and imports; json.loads alone (the floor's) {loads:.3f} s")


if __name__ == "__main__":
    main()
