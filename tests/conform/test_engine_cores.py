"""The engines' ranks divide the cores a run may use, OMP_NUM_THREADS included (dayone.programs.engines.cores)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import dayone.programs
import pytest

CORES = Path(dayone.programs.__file__).parent / "engines" / "cores.py"


@pytest.fixture
def cores(monkeypatch):
    spec = importlib.util.spec_from_file_location("engine_cores", CORES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    return module


def test_ranks_share_the_cores_at_least_one_each(cores):
    assert [cores.per_rank(world) for world in (1, 2, 3, 16)] == [8, 4, 2, 1]


@pytest.mark.parametrize(("limit", "expected"), [("2", [2, 1, 1]), ("6", [6, 3, 2]), ("32", [8, 4, 2])])
def test_omp_num_threads_bounds_the_share(cores, monkeypatch, limit, expected):
    monkeypatch.setenv("OMP_NUM_THREADS", limit)
    assert [cores.per_rank(world) for world in (1, 2, 3)] == expected


@pytest.mark.parametrize("limit", ["", "0", "four", "-2"])
def test_an_unusable_limit_is_ignored(cores, monkeypatch, limit):
    monkeypatch.setenv("OMP_NUM_THREADS", limit)
    assert cores.per_rank(2) == 4
