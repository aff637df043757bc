"""One vLLM process for a conformance run's jobs at every world size: the probes, then the forwards in each dtype,
vLLM imported once.

Run with the vLLM peer environment's python (dayone is not installed there):

    python vllm_session.py --jobs JOBS.json

JOBS.json: [{"kind": "probe" | "forward", "world_size", "out", "argv"}, ...], argv the job's own script's arguments
(vllm_probe.py: OUT/levels.json, vllm_forward.py: OUT/forward.json, each run here by its main(argv)). The probe runs
in a process forked from this one, which has imported vLLM and run no torch operation (no OpenMP pool to inherit):
at world size 1 it sets up vLLM's distributed state in its own process, which an engine started after it here would
meet. So every probe runs before the first forward (session_jobs.run_jobs). The forwards run here, one `vllm.LLM`
after another, each shut down before the next (vllm_forward.forward_job); at world size 2 its workers are processes of
their own. On 2 cores the fp32 and bf16 forwards of the README run's K3 took 15 s in one process
against 23 s in two, with the same tokens and log-probs.
"""

from __future__ import annotations

import multiprocessing
import os
import sys

from cores import per_rank  # the sibling programs (this folder is on sys.path)
from session_jobs import read_jobs, run_jobs


def main(argv: list[str] | None = None) -> int:
    jobs = read_jobs(argv, __doc__.split("\n")[0])
    # Read by torch when it is imported (with vLLM, below): the threads of the forwards that run in this process, those
    # of the smallest world size (a larger one's ranks are processes of their own, which read their share from
    # OMP_NUM_THREADS as each forward sets it; the probes fork theirs and set it there).
    os.environ["OMP_NUM_THREADS"] = str(per_rank(min(int(job["world_size"]) for job in jobs)))
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm  # noqa: F401 -- once, for the probe's fork and the engines here
    import vllm_forward
    import vllm_probe

    def probe_in_a_fork(argv: list[str]) -> None:
        process = multiprocessing.get_context("fork").Process(target=vllm_probe.main, args=(argv,))
        process.start()
        process.join()

    return run_jobs(jobs, probe_in_a_fork, vllm_forward.main)


if __name__ == "__main__":
    sys.exit(main())
