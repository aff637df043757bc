"""The share of this machine's cores each rank of an engine run computes on (the probes' own helper).

Every rank of a world-size-N run is a process with torch's default thread count, all the cores it may use: on a
small CPU machine N ranks then run N times that many OpenMP threads, which spin-wait for each other in every
operation. vLLM's own thread binding (which the probes leave off, see vllm_forward.peer_environment) gives each rank
its share of the cores instead; so do the probes. On 2 cores, vLLM's forward at world size 2 on the tiny K3: 4.6 s of
generation with two threads a rank, 2.4 s with one.
"""

from __future__ import annotations

import os


def per_rank(world_size: int) -> int:
    """Cores for each of `world_size` ranks: the cores this process may use, shared out, at least one."""
    return max(1, len(os.sched_getaffinity(0)) // world_size)
