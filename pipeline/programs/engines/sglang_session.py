"""One SGLang process for a conformance run's jobs at every world size: the probes' levels up to "loaded", then the
forwards in each dtype, SGLang imported once (sglang_probe.warm) and each job's ranks forked from this process.

Run with the SGLang peer environment's python (dayone is not installed there):

    python sglang_session.py --jobs JOBS.json

JOBS.json: [{"kind": "probe" | "forward", "run", "world_size", "out", "argv"}, ...], argv the job's own script's
arguments (sglang_probe.py: OUT/levels.json, sglang_forward.py: OUT/forward.json, each run here by its main(argv)).
Importing SGLang takes about 6 s of one core, as long as a tiny model's whole forward: the driver's five engine
processes of a run at world sizes 1 and 2 were mostly imports. The probes run first, then the forwards of each run
(one adapter at one world size) whose probe failed no level (session_jobs.run_jobs: the driver judges none after a
failed level), and the driver, which judges "loaded" from the probe's dump, discards a forward that followed a load
it found wrong.
"""

from __future__ import annotations

import sys

import sglang_forward as forward  # the sibling programs (this folder is on sys.path)
import sglang_probe as probe
from session_jobs import read_jobs, run_jobs


def main(argv: list[str] | None = None) -> int:
    jobs = read_jobs(argv, __doc__.split("\n")[0])
    return run_jobs(jobs, probe.main, forward.main)  # each main() warms SGLang: an import only the first pays


if __name__ == "__main__":
    sys.exit(main())
