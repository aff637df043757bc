"""AOT compilation to cubins without a GPU. Compilation needs TRITON_INTERPRET unset, so it runs in a subprocess."""

import json
import os
import subprocess
import sys

import pytest
from dayone.kernels.aot import AotError, compile_specializations, parse_ptxas_report
from dayone.kernels.gated_rmsnorm import aot as gated_rmsnorm
from dayone.kernels.specialization import KernelDims

SCRIPT = """
import dataclasses, json, sys, time
from dayone.kernels.gated_rmsnorm import aot as gated_rmsnorm
from dayone.kernels.kda import aot as kda
from dayone.kernels.aot import AotError, compile_specializations
from dayone.kernels.specialization import KernelDims

cache = sys.argv[1]
spec = gated_rmsnorm.specializations(KernelDims(hidden_size=64, kda_num_heads=2, kda_head_dim=32))
first = compile_specializations(spec, archs=("sm_90",), cache_dir=cache)
start = time.perf_counter()
second = compile_specializations(spec, archs=("sm_90",), cache_dir=cache)
again = time.perf_counter() - start

# Two pipeline stages of the K = 128 chunk output kernel need ~288 KiB of shared memory: must be refused.
out = [s for s in kda.specializations(KernelDims(hidden_size=64, kda_num_heads=1, kda_head_dim=128))
       if s.kernel == "kda.chunk_output"][0]
try:
    compile_specializations([dataclasses.replace(out, num_stages=2)], archs=("sm_90",), cache_dir=cache)
    refused = ""
except AotError as exc:
    refused = str(exc)
print(json.dumps({"first": [r.as_dict() for r in first], "second": [r.as_dict() for r in second],
                  "again": again, "refused": refused}))
"""


def test_compile_cache_and_budget(tmp_path):
    # the compile stage asks for FP fusion itself: with the variable unset, Triton 3.9 has no default to warn about
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITON_DEFAULT_FP_FUSION")}
    run = subprocess.run(
        [sys.executable, "-P", "-c", SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "TRITON_DEFAULT_FP_FUSION" not in run.stderr, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    (row,) = result["first"]
    assert row["arch"] == "sm_90" and not row["cached"]
    assert (tmp_path / row["cubin"]).stat().st_size > 0
    assert row["registers"] > 0 and row["stack_bytes"] == row["spill_store_bytes"] == row["spill_load_bytes"] == 0
    assert row["spill_bytes"] == 0
    (hit,) = result["second"]
    assert hit["cached"] and hit["cubin"] == row["cubin"]
    assert result["again"] < 1.0
    assert "kda.chunk_output" in result["refused"] and "shared memory" in result["refused"]


def test_refuses_interpreted_functions(tmp_path):
    assert os.environ.get("TRITON_INTERPRET") == "1"  # set by conftest for the kernel tests
    spec = gated_rmsnorm.specializations(KernelDims(hidden_size=64, kda_num_heads=2, kda_head_dim=32))
    with pytest.raises(AotError, match="TRITON_INTERPRET"):
        compile_specializations(spec, archs=("sm_90",), cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


TRAP_SCRIPT = """
import json, sys
import triton
import triton.language as tl
from dayone.kernels.kda import aot as kda
from dayone.kernels.aot import AotError, compile_specializations
from dayone.kernels.specialization import KernelDims, Specialization

@triton.jit
def stores_nothing(x, n):
    tl.load(x + tl.arange(0, 16))

cache = sys.argv[1]
try:
    compile_specializations([Specialization("noop", stores_nothing, {"x": "*fp32", "n": "i32"})], ("sm_90",), cache)
    refused = ""
except AotError as exc:
    refused = str(exc)
# K = V = 192 pads to 256: with the w and u products both live, sm_100 compiled the prepare kernel to a trap.
prepare = [s for s in kda.specializations(KernelDims(hidden_size=64, kda_num_heads=1, kda_head_dim=192, kda_gate="safe"))
           if s.kernel == "kda.chunk_prepare.safe"]
(row,) = compile_specializations(prepare, ("sm_100",), cache)
print(json.dumps({"refused": refused, "prepare": row.as_dict()}))
"""


def test_a_kernel_compiled_to_a_trap_is_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    script = tmp_path / "trap.py"  # @triton.jit reads its source from a file
    script.write_text(TRAP_SCRIPT)
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert "noop" in result["refused"] and "trap" in result["refused"] and "sm_90" in result["refused"]
    assert not list(tmp_path.glob("noop-*.cubin"))
    prepare = result["prepare"]
    assert prepare["arch"] == "sm_100" and "K=192" in prepare["config"] and "BK=256" in prepare["config"]
    assert prepare["registers"] > 16 and 0 < prepare["shared_bytes"] <= 227 * 1024


SPILL_SCRIPT = """
import dataclasses, json, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from dayone.kernels.aot import AotError, compile_specializations, ptxas_report
from dayone.kernels.specialization import Specialization

@triton.jit
def normalise(x, y, BLOCK: tl.constexpr):
    v = tl.load(x + tl.arange(0, BLOCK))
    tl.store(y + tl.arange(0, BLOCK), v / tl.sum(v * v, axis=0))

signature = {"x": "*fp32", "y": "*fp32", "BLOCK": "constexpr"}
# One warp holding 8192 fp32 values live across the sum: 256 per thread, more than the 255 registers a thread has.
hungry = Specialization("hungry", normalise, signature, {"BLOCK": 8192}, num_warps=1)
lean = Specialization("lean", normalise, signature, {"BLOCK": 256}, num_warps=1)
cache = sys.argv[1]
rows = compile_specializations([hungry, lean], ("sm_90",), cache, max_spill_bytes=1 << 20)
def refusal(spec):
    try:
        compile_specializations([spec], ("sm_90",), cache)
        return ""
    except AotError as exc:
        return str(exc)

refused = refusal(hungry)
# a package may state the spills an instance is known to have: the budget is then that figure, and no more
spills = rows[0].spill_bytes
known = compile_specializations([dataclasses.replace(hungry, known_spill_bytes=spills)], ("sm_90",), cache)
over_known = refusal(dataclasses.replace(hungry, known_spill_bytes=spills - 1))
# ptxas run again on the PTX (the path taken when Triton's cache answers) must say what Triton's own run said
ptx = triton.compile(ASTSource(normalise, signature, {"BLOCK": 8192}), target=GPUTarget("cuda", 90, 32),
                     options={"num_warps": 1}).asm["ptx"]
print(json.dumps({"rows": [r.as_dict() for r in rows], "refused": refused, "known": known[0].as_dict(),
                  "over_known": over_known, "rerun": vars(ptxas_report(ptx, "sm_90"))}))
"""


def test_spills_are_read_from_ptxas(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")  # Triton's own ptxas run, whose log the compile captures
    script = tmp_path / "spill.py"
    script.write_text(SPILL_SCRIPT)
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "cubin")], env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    hungry, lean = result["rows"]
    assert hungry["registers"] == 255 and hungry["stack_bytes"] > 0
    assert hungry["spill_store_bytes"] > 0 and hungry["spill_load_bytes"] > 0
    assert hungry["spill_bytes"] == hungry["spill_store_bytes"] + hungry["spill_load_bytes"]
    assert 0 < lean["registers"] < 64 and lean["stack_bytes"] == lean["spill_bytes"] == 0
    rerun = result["rerun"]
    assert rerun == {k: hungry[k] for k in ("registers", "stack_bytes", "spill_store_bytes", "spill_load_bytes")}
    refused = result["refused"]
    assert "hungry" in refused and "BLOCK=8192" in refused and "sm_90" in refused
    assert f"{hungry['spill_store_bytes']} B stored" in refused and "budget of 0 B" in refused
    known = result["known"]
    assert known["cached"] and known["known_spill_bytes"] == known["spill_bytes"] == hungry["spill_bytes"]
    assert f"known figure of {hungry['spill_bytes'] - 1} B" in result["over_known"]


def test_the_ptxas_parser_wants_one_function():
    log = (
        "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
        "ptxas info    : Function properties for k\n"
        "    144 bytes stack frame, 156 bytes spill stores, 152 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 0 barriers, 144 bytes cumulative stack size\n"
    )
    report = parse_ptxas_report(log)
    assert (report.registers, report.stack_bytes, report.spill_store_bytes, report.spill_load_bytes) == (
        255, 144, 156, 152,
    )  # fmt: skip
    with pytest.raises(AotError, match="expected one function"):
        parse_ptxas_report("ptxas info    : 0 bytes gmem\n")
    with pytest.raises(AotError, match="expected one function"):
        parse_ptxas_report(log + log)
