"""The share of this machine's cores each rank of an engine run computes on (the probes' own helper).

Every rank of a world-size-N run is a process with torch's default thread count, all the cores it may use: on a
small CPU machine N ranks then run N times that many OpenMP threads, which spin-wait for each other in every
operation. vLLM's own thread binding (which the probes leave off, see vllm_forward.peer_environment) gives each rank
its share of the cores instead; so do the probes. On 2 cores, vLLM's forward at world size 2 on the tiny K3: 4.6 s of
generation with two threads a rank, 2.4 s with one.

OMP_NUM_THREADS, where set, is the whole run's share of the machine (a test session gives each of its workers one
core): the ranks divide it, as they divide the cores. Two processes of torch's default thread count on 2 cores cost
far more than twice one: libgomp's threads spin at every parallel region's barrier while the other process holds
the core (one validate of the tiny K3: 11 s alone, 566 s beside a second one; 11 s each with one thread apiece).
"""

from __future__ import annotations

import os


def per_rank(world_size: int) -> int:
    """Cores for each of `world_size` ranks: the cores this process may use (no more than OMP_NUM_THREADS says),
    shared out, at least one."""
    cores = len(os.sched_getaffinity(0))
    limit = os.environ.get("OMP_NUM_THREADS", "")
    if limit.isdigit() and int(limit) > 0:
        cores = min(cores, int(limit))
    return max(1, cores // world_size)
