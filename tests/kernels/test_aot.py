"""AOT compilation to cubins without a GPU. Compilation needs TRITON_INTERPRET unset, so it runs in a subprocess."""

import json
import os
import subprocess
import sys

import pytest
from dayone.kernels.aot import AotError, compile_specializations
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
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # silence Triton 3.9's notice; the value is its default
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    (row,) = result["first"]
    assert row["arch"] == "sm_90" and not row["cached"]
    assert (tmp_path / row["cubin"]).stat().st_size > 0
    assert row["registers"] > 0 and row["spill_bytes"] == 0
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
