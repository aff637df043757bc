"""`integrate inspect` on the full-size K3 skeleton against the floor: reading and json.loads of its 96 headers.

Both are timed as fresh processes in the same run (best of --repeat), with peak RSS from the kernel's rusage.
Target: inspect within 2x of the floor's wall time and under 1 GB peak RSS.

    python benchmarks/inspect_k3.py [--skeleton DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = """
import json, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("*.safetensors")):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        json.loads(f.read(n))
"""


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit code) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.read().decode()[-500:]}")
    return wall, usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skeleton", type=Path, help="An existing K3 skeleton (default: write one to a temp dir).")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        skeleton = args.skeleton
        if skeleton is None:
            skeleton = Path(tmp) / "k3"
            subprocess.run(
                [sys.executable, "-m", "dayone", "synth", "kimi-k3", "--skeleton", "-o", str(skeleton)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        inspect_cmd = [sys.executable, "-m", "dayone", "inspect", str(skeleton), "--spec", "kimi-k3", "--json"]
        floor_cmd = [sys.executable, "-c", FLOOR, str(skeleton)]
        floors, runs = [], []
        for _ in range(args.repeat):
            floors.append(timed(floor_cmd))
            runs.append(timed(inspect_cmd))
    floor_wall, floor_rss, _ = min(floors)
    wall, rss, _ = min(runs)
    print(f"floor  (read + json.loads of 96 headers): {floor_wall:6.2f} s  peak RSS {floor_rss:7.0f} MB")
    print(f"integrate inspect (full K3 skeleton)    : {wall:6.2f} s  peak RSS {rss:7.0f} MB")
    print(f"ratio to floor: {wall / floor_wall:.2f}x (target <= 2x); peak RSS {rss / 1024:.2f} GB (target < 1 GB)")


if __name__ == "__main__":
    main()
