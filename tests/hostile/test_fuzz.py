"""Property-based fuzzing of every command that reads a checkpoint, over mutations of a tiny checkpoint's config.json,
index and safetensors headers: the exit code is 0, 1 or 2, never a traceback, exactly one line on stderr for exit 2,
and each example finishes within a time bound (the memory bound is checked once per test, on the process's peak
since the test started: an xdist worker's lifetime peak belongs to whatever tests ran in it before).

Commands run in-process through click's runner (the same Integrate.invoke as `integrate`), so an example costs the
command's work, not a Python start. Examples are derandomized: CI runs the same ones every time; the examples that
failed while this was written are regular tests in test_fuzz_found.py.
"""

from __future__ import annotations

import json
import resource
import shutil
import struct
import tempfile
import time
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner
from dayone.cli import cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_checkpoint import tiny_kimi_linear

SECONDS_PER_EXAMPLE = 30
PEAK_RSS_GB = 6
# Examples per command: what the ~2-3 minutes of CI this file may take allow (see the closing report of issue 14).
EXAMPLES = {"inspect": 800, "spec-derive": 800, "prune": 200, "generate": 40, "golden": 60, "validate": 16}
# inspect again on a two-shard copy: the parallel header scan (worker processes) and an index naming two files
TWO_SHARD_EXAMPLES = 120

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 3, 7, 10**9, 10**18, 2**63, 1.5, -0.0, 1e-30, 1e308]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "93", "abc", "bfloat16", "F32", "K", "../x", "Kimi\"; __import__('os')"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
RAW_TEXTS = st.sampled_from(
    [b"", b"{", b"[]", b"null", b"[" * 50_000 + b"]" * 50_000, b'{"a":' * 20_000 + b"1" + b"}" * 20_000]
    + [b"1" * 5000, b"\xff\xfe\x00", b'{"weight_map": {}}', b"NaN"]
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """Kimi Linear at tiny width, 4 layers, one shard with an index: 151 tensors, 0.6 MB (one shard: inspect reads it
    in-process, the cheapest example; the two-shard fixture below covers the worker processes)."""
    return tiny_kimi_linear(tmp_path_factory, "fuzz", layers=4)


def _paths(node, prefix=()):
    """Every key path in a JSON document, for choosing what to mutate."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:4]):
            yield from _paths(value, (*prefix, i))


def _mutate_json(doc, data) -> object:
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths), label="path")
    action = data.draw(st.sampled_from(["replace", "replace", "delete", "wrap"]), label="action")
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    leaf = path[-1]
    if action == "delete":
        del parent[leaf]
    elif action == "wrap":
        parent[leaf] = data.draw(st.sampled_from([[parent[leaf]], {"x": parent[leaf]}, str(parent[leaf])]))
    else:
        parent[leaf] = data.draw(VALUES, label="value")
    return doc


def _header(path: Path) -> tuple[dict, bytes]:
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + length]), raw[8 + length :]


def mutate(root: Path, data) -> str:
    """One mutation of the checkpoint in root; returns what it did, for the failure message."""
    target = data.draw(st.sampled_from(["config", "config", "index", "header", "header", "raw"]), label="target")
    if target == "raw":
        name = data.draw(st.sampled_from(["config.json", "model.safetensors.index.json"]))
        (root / name).write_bytes(data.draw(RAW_TEXTS))
        return f"raw {name}"
    if target in ("config", "index"):
        name = "config.json" if target == "config" else "model.safetensors.index.json"
        doc = _mutate_json(json.loads((root / name).read_text()), data)
        (root / name).write_text(json.dumps(doc))
        return f"{name}: {json.dumps(doc)[:300]}"
    shard = data.draw(st.sampled_from(sorted(root.glob("*.safetensors"))), label="shard")
    header, rest = _header(shard)
    header = _mutate_json(header, data)
    raw = json.dumps(header).encode()
    length = len(raw) + data.draw(st.sampled_from([0, 0, 0, 1, -1, 1 << 40]), label="length skew")
    shard.write_bytes(struct.pack("<Q", max(length, 0)) + raw + rest)
    return f"{shard.name} header: {raw[:300]!r}"


def command_args(command: str, root: Path, out: Path) -> list[str]:
    return {
        "inspect": ["inspect", root, "--json"],
        "spec-derive": ["spec", "derive", root],
        "prune": ["prune", root, "--layers", "0,1", "-o", out / "pruned"],
        "generate": ["generate", root, "--target", "vllm", "-o", out / "gen"],
        "golden": ["golden", root, "--tokens", "1,2,3,4", "-o", out / "golden.pt", "--device", "cpu"],
        "validate": ["validate", root, "--tokens", "1,2,3,4", "--device", "cpu", "--no-reload-check"],
    }[command]


def check_contract(command: str, root: Path, what: str) -> None:
    with tempfile.TemporaryDirectory() as out:
        start = time.monotonic()
        result = CliRunner().invoke(cli, [str(a) for a in command_args(command, root, Path(out))])
        elapsed = time.monotonic() - start
    context = f"{command} after {what}: exit {result.exit_code}\nstderr: {result.stderr[-2000:]}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        where = "".join(traceback.format_exception(result.exception)[-4:])
        raise AssertionError(f"{context}\nraised {type(result.exception).__name__}: {result.exception}\n{where}")
    assert result.exit_code in (0, 1, 2), context
    assert "Traceback" not in result.stdout + result.stderr, context
    if result.exit_code == 2:
        assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1, context
    assert elapsed < SECONDS_PER_EXAMPLE, context


@pytest.fixture(scope="module")
def tiny_two_shards(tmp_path_factory) -> Path:
    return tiny_kimi_linear(tmp_path_factory, "fuzz2", layers=4, shards=2)


@pytest.mark.parametrize("command", EXAMPLES)
def test_reading_commands_survive_any_mutation(tiny, command):
    fuzz(tiny, command, EXAMPLES[command])


def test_inspect_of_two_shards_survives_any_mutation(tiny_two_shards):
    fuzz(tiny_two_shards, "inspect", TWO_SHARD_EXAMPLES)


def fuzz(tiny: Path, command: str, examples: int) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run_one(data):
        ran.append(1)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "ckpt"
            shutil.copytree(tiny, root)
            what = mutate(root, data)
            check_contract(command, root, what)

    ran: list[int] = []
    reset_peak_rss()
    run_one()
    assert len(ran) >= examples, f"hypothesis ran {len(ran)} examples"
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    assert peak_gb < PEAK_RSS_GB


def reset_peak_rss() -> None:
    """Start the process's peak RSS (ru_maxrss, VmHWM) afresh: Linux resets it when "5" is written to clear_refs."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
