"""`integrate compile`: real sm_90 / sm_100 cubins for every kernel both shipped specs need, on a CPU-only machine."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from cli_runner import PROGRESS, assert_bad_input, integrate
from dayone.compile_stage import KERNEL_CACHE_ENV, KERNEL_PACKAGES


def test_k3_builds_every_kernel_for_both_archs(k3_build):
    out, report = k3_build.out, k3_build.report
    rows = report["kernels"]
    families = {row["kernel"].split(".")[0] for row in rows}
    # Every kernel package the K3 spec needs is in the table (SiTU is "situ.*", MXFP4 "mxfp4.*", ...).
    assert families == set(KERNEL_PACKAGES)
    for arch in ("sm_90", "sm_100"):
        assert {r["kernel"] for r in rows if r["arch"] == arch} == {r["kernel"] for r in rows}
    for row in rows:
        cubin = out / "cubin" / row["cubin"]
        assert cubin.stat().st_size > 0 and cubin.read_bytes()[:4] == b"\x7fELF"
        assert 0 < row["registers"] <= 255
        # ptxas -v spills: only the KDA chunk kernels spill at K3's widths, within their stated measured figure
        assert row["spill_bytes"] <= row["known_spill_bytes"]
        assert (row["spill_bytes"] > 0) == row["kernel"].startswith("kda.chunk_"), row
        assert row["shared_bytes"] <= 227 * 1024
    assert json.loads((out / "resources.json").read_text()) == report


def test_off_a_terminal_each_kernel_is_a_timestamped_line_on_stderr(k3_build):
    """The build takes minutes and rich draws no bar off a terminal: a line as each kernel starts, in table order,
    on stderr (stdout holds only the --json document)."""
    said = [line.split(" ", 2)[2] for line in k3_build.err.splitlines() if PROGRESS.match(line)]
    kernels = list(dict.fromkeys(row["kernel"] for row in k3_build.report["kernels"]))
    assert said == [f"compile: kernel {i} of {len(kernels)}: {kernel}" for i, kernel in enumerate(kernels, 1)]


def gate_kernels(kernels: set[str]) -> dict[str, set[str]]:
    """The gate-specific KDA kernels by gate form: kda.chunk_prepare.<gate>, kda.decode.<gate>[.verify]."""
    return {gate: {k for k in kernels if k.startswith("kda.") and f".{gate}" in k} for gate in ("plain", "safe")}


def test_k3_compiles_only_the_safe_gate(k3_build):
    report = k3_build.report
    kernels = {row["kernel"] for row in report["kernels"]}
    by_gate = gate_kernels(kernels)
    assert by_gate["plain"] == set()
    assert by_gate["safe"] == {"kda.chunk_prepare.safe", "kda.decode.safe", "kda.decode.safe.verify"}
    assert {"short_conv.update", "short_conv.update.verify"} <= kernels


def test_recompiling_unchanged_is_a_cache_lookup(k3_build):
    again = integrate(*k3_build.args, "--json")
    report = json.loads(again.out)
    assert all(row["cached"] for row in report["kernels"])
    assert report["seconds"] < 1.0
    assert [r["cubin"] for r in report["kernels"]] == [r["cubin"] for r in k3_build.report["kernels"]]
    assert json.loads((k3_build.out / "resources.json").read_text()) == report


def test_a_shared_cache_serves_a_compile_into_another_folder(k3_build, tmp_path):
    """With $DAYONE_KERNEL_CACHE set (the test session sets it), the cubins live in that cache and OUT/cubin holds
    copies: a compile of the same spec into a new folder builds nothing and leaves the same cubins there."""
    shared = Path(os.environ[KERNEL_CACHE_ENV])
    args = [tmp_path / "other" if a == k3_build.out else a for a in k3_build.args]
    report = json.loads(integrate(*args, "--json").out)
    assert report["kernels"] and all(row["cached"] for row in report["kernels"])
    for row in report["kernels"]:
        built = (k3_build.out / "cubin" / row["cubin"]).read_bytes()
        assert (
            (tmp_path / "other" / "cubin" / row["cubin"]).read_bytes() == built == (shared / row["cubin"]).read_bytes()
        )


def test_a_lost_cubin_is_rebuilt_not_looked_up(k3_build, tmp_path):
    """The whole-compile lookup vouches for its cubins only while every one of them is on disk (OUT/cubin as the
    cache: no shared one)."""
    out = tmp_path / "out"
    shutil.copytree(k3_build.out, out)
    first = k3_build.report["kernels"][0]
    (out / "cubin" / first["cubin"]).unlink()
    args = [out if a == k3_build.out else a for a in k3_build.args]
    report = json.loads(integrate(*args, "--json", env={KERNEL_CACHE_ENV: ""}).out)
    rebuilt = [row for row in report["kernels"] if not row["cached"]]
    assert [(r["kernel"], r["arch"]) for r in rebuilt] == [(first["kernel"], first["arch"])]
    assert (out / "cubin" / first["cubin"]).read_bytes()[:4] == b"\x7fELF"


def test_kimi_linear_needs_no_k3_only_kernels(tmp_path):
    result = integrate("compile", "kimi-linear-48b-a3b", "--arch", "sm_90", "-o", tmp_path, "--json")
    assert result.code == 0, result.err
    kernels = {row["kernel"] for row in json.loads(result.out)["kernels"]}
    assert not any(k.startswith(("attn_residual", "mxfp4")) for k in kernels)
    assert any(k.startswith("kda.") for k in kernels) and any(k.startswith("mla_decode") for k in kernels)
    by_gate = gate_kernels(kernels)
    assert by_gate["safe"] == set()
    assert by_gate["plain"] == {"kda.chunk_prepare.plain", "kda.decode.plain", "kda.decode.plain.verify"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine --autotune runs")
def test_autotune_without_a_gpu_is_one_line_and_builds_nothing(tmp_path):
    result = integrate("compile", "kimi-k3", "--arch", "sm_90", "--autotune", "-o", tmp_path / "out")
    line = assert_bad_input(result, "--autotune needs a CUDA GPU; compile without it here")
    assert line.startswith("error: ")
    assert not (tmp_path / "out").exists()
