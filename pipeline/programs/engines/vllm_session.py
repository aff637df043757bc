"""One vLLM process for a conformance run's jobs at a world size: the probe, then the forward in each dtype, vLLM
imported once.

Run with the vLLM peer environment's python (dayone is not installed there):

    python vllm_session.py --jobs JOBS.json

JOBS.json: [{"kind": "probe" | "forward", "world_size", "out", "argv"}, ...], argv the job's own script's arguments
(vllm_probe.py: OUT/levels.json, vllm_forward.py: OUT/forward.json, each run here by its main(argv)). The probe runs
in a process forked from this one, which has imported vLLM and run no torch operation (no OpenMP pool to inherit):
at world size 1 it sets up vLLM's distributed state in its own process, which an engine started after it here would
meet. The forwards run here, one `vllm.LLM` after another, each shut down before the next
(vllm_forward.forward_job). On 2 cores the fp32 and bf16 forwards of the README run's K3 took 15 s in one process
against 23 s in two, with the same tokens and log-probs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from pathlib import Path

from cores import per_rank  # the sibling programs (this folder is on sys.path)
from probe_levels import probe_passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=Path, required=True, help="a JSON list of probe and forward jobs")
    jobs = json.loads(parser.parse_args(argv).jobs.read_text())
    # Read by torch when it is imported (with vLLM, below): the share of the cores of each of the world's ranks.
    os.environ["OMP_NUM_THREADS"] = str(per_rank(max(int(job["world_size"]) for job in jobs)))
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm  # noqa: F401 -- once, for the probe's fork and the engines here
    import vllm_forward
    import vllm_probe

    for job in jobs:
        if job["kind"] == "probe":
            probe = multiprocessing.get_context("fork").Process(target=vllm_probe.main, args=(job["argv"],))
            probe.start()
            probe.join()
            if not probe_passed(Path(job["out"])):
                break
        else:
            vllm_forward.main(job["argv"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
