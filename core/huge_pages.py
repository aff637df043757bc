"""Transparent huge pages for PyTorch's large CPU tensors, in dayone and every process it starts.

PyTorch's CPU allocator backs each allocation of 2 MB or more with transparent huge pages when the environment has
THP_MEM_ALLOC_ENABLE=1 (read once, at the first such allocation: c10/core/alloc_cpu.cpp); otherwise each 4 kB page
of a new tensor is one page fault when it is first written. dayone allocates large tensors one after another
(synthesised weights, each expert matrix read for validation, the engines' own loads), and on the virtual machines CI
runs on a page fault costs about 3 us: `integrate synth kimi-k3 --scale faithful` took 4.8 million faults and 15 s of
system time out of 43 s, and with huge pages 0.4 million and 7 s, writing the same bytes. Where the kernel has huge
pages off (`never`) the allocator's madvise does nothing. A value the user set is kept.
"""

from __future__ import annotations

import os

ENV = "THP_MEM_ALLOC_ENABLE"


def prefer_huge_pages() -> None:
    """Ask for huge pages in this process (before torch allocates) and in its children, unless the user said."""
    os.environ.setdefault(ENV, "1")
