"""Ahead-of-time compilation of kernel specialisations to cubins, with no GPU present.

`compile_specializations` turns each `Specialization` into `<kernel>-<hash>.cubin` per GPU arch and returns a
resource table (registers, shared memory, stack frame, spill stores and loads, compile seconds). Budgets are checked
here so a kernel that cannot launch on a target (too much shared memory) or would crawl (spills) fails the build, not
the first request.

Register spills are what ptxas -v reports ("N bytes stack frame, X bytes spill stores, Y bytes spill loads"): Triton
runs ptxas with -v and discards the log unless asked to print it, so the log is captured from Triton's own ptxas run
or, when Triton's cache answered and ptxas did not run, from ptxas run again on the kernel's PTX with Triton's flags.
Either way the registers and stack frame must equal what cuobjdump reads from the shipped cubin. (cuobjdump's LOCAL
field is not spills: it stays 0 while ptxas spills to the per-thread stack frame, its STACK field.)

The cache is content-addressed: the key hashes the kernel source, signature, constexprs, options, arch and Triton
version, so an unchanged specialisation is a file lookup. Must run with TRITON_INTERPRET unset: the interpreter
replaces @triton.jit functions at decoration time and there is nothing left to compile.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from dayone.core.atomic import naming
from dayone.core.vocabulary import ARCHS
from dayone.kernels.specialization import Specialization

# Usable shared memory per block (opt-in maximum): 227 KiB on both Hopper and Blackwell datacenter parts.
SHARED_LIMIT = {"sm_90": 227 * 1024, "sm_100": 227 * 1024}
DEFAULT_MAX_SPILL_BYTES = 0
WARP_SIZE = 32


class AotError(RuntimeError):
    """A specialisation that cannot be compiled or breaks a resource budget; the message names kernel and config."""


@dataclass(frozen=True)
class Resources:
    """One row of the resource table. stack_bytes is the per-thread stack frame (local memory); spill_store_bytes and
    spill_load_bytes are ptxas's spill figures (bytes moved by its spill instructions, per thread, in the code)."""

    kernel: str
    config: str
    arch: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    compile_seconds: float
    cubin: str
    cached: bool
    known_spill_bytes: int = 0  # the instance's Specialization.known_spill_bytes: its budget is at least this

    @property
    def spill_bytes(self) -> int:
        """What the spill budget reads: spill stores plus spill loads, 0 when ptxas kept everything in registers."""
        return self.spill_store_bytes + self.spill_load_bytes

    def as_dict(self) -> dict:
        return {**asdict(self), "spill_bytes": self.spill_bytes}

    @classmethod
    def from_dict(cls, row: dict, cached: bool) -> Resources:
        """A row as as_dict wrote it; TypeError when a field is missing (written before the field existed)."""
        names = {f.name for f in fields(cls)}
        return cls(**{**{k: v for k, v in row.items() if k in names}, "cached": cached})


@dataclass(frozen=True)
class PtxasReport:
    """What ptxas -v says of one entry function."""

    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int


PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")


def parse_ptxas_report(log: str) -> PtxasReport:
    """The figures of the single entry function in a ptxas -v log (each Triton kernel is one); AotError otherwise."""
    frames, registers = PTXAS_FRAME.findall(log), PTXAS_REGISTERS.findall(log)
    if len(frames) != 1 or len(registers) != 1:
        raise AotError(f"ptxas -v: expected one function's figures, found {len(frames)} frames and "
                       f"{len(registers)} register counts in:\n{log}")  # fmt: skip
    stack, stores, loads = map(int, frames[0])
    return PtxasReport(int(registers[0]), stack, stores, loads)


def _ptxas(capability: int) -> tuple[str, str]:
    """(path of the ptxas Triton compiles with for this capability, the --gpu-name it passes: sm_90a, sm_100a)."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    return get_ptxas(capability).path, sm_arch_from_capability(capability)


def ptxas_report(ptx: str, arch: str) -> PtxasReport:
    """Run Triton's ptxas with -v on a kernel's PTX for arch, with the flags that decide register allocation as
    Triton passes them (make_cubin in triton/backends/nvidia/compiler.py), and parse what it says."""
    ptxas, gpu_name = _ptxas(int(arch.removeprefix("sm_")))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernel.ptx"
        source.write_text(ptx)
        run = subprocess.run(
            [ptxas, "-lineinfo", "-v", "--regAllocOptLevel=2", f"--gpu-name={gpu_name}", str(source),
             "-o", str(source.with_suffix(".o"))],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    if run.returncode != 0:
        raise AotError(f"ptxas -v failed ({run.returncode}) for {arch}:\n{run.stderr[-2000:]}")
    return parse_ptxas_report(run.stderr + run.stdout)


def _nvidia_tool(name: str) -> Path:
    """A tool of the CUDA toolkit Triton bundles (cuobjdump, nvdisasm), the one matching its ptxas."""
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name


def _check_compilable(spec: Specialization) -> None:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or type(spec.fn).__name__ == "InterpretedFunction":
        raise AotError(
            f"{spec.kernel} [{spec.config()}]: TRITON_INTERPRET is set, so @triton.jit produced an interpreted "
            "function that cannot be compiled; run AOT compilation in a process without TRITON_INTERPRET"
        )


def compile_options(spec: Specialization) -> dict[str, object]:
    """Triton's compile options for one instance. FP fusion (a*b+c as one FMA) is asked for explicitly, as every launch
    does: the kernels are checked with it, and neither Triton's default (3.10 changes it) nor the environment decides."""
    return {"num_warps": spec.num_warps, "num_stages": spec.num_stages, "enable_fp_fusion": True}


def cache_key(spec: Specialization, arch: str) -> str:
    """Hash of everything that decides the cubin: source, signature, constexprs, options, arch, Triton version."""
    import triton

    payload = {
        # JITFunction.cache_key hashes the source and every @triton.jit function it calls
        "source": getattr(spec.fn, "cache_key", None) or spec.fn.src,
        "name": spec.fn.__name__,
        "signature": spec.signature,
        "constexprs": {k: repr(v) for k, v in spec.constexprs.items()},
        "options": compile_options(spec),
        "arch": arch,
        "triton": triton.__version__,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


# An instruction that writes global memory (plain, reduction, atomic, TMA): every kernel here writes its outputs.
GLOBAL_WRITE = re.compile(
    r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?(?:STG|ST|REDG|RED|ATOMG|ATOM|UTMASTG|UTMAREDG)\b", re.MULTILINE
)


def dump_cubin(cubin: Path) -> str:
    """The resource usage (cuobjdump) and the SASS of a cubin. The SASS comes from nvdisasm, the disassembler that
    cuobjdump --dump-sass runs, here without its dataflow pass, which only names branch targets by label (the same
    instructions): on a K3 cubin 0.45 s instead of 0.58 s, 0.40 s instead of 0.46 s on the smallest, of a cold build's
    1.5 s or so."""

    def run(*args: str) -> str:
        return subprocess.run([*args, str(cubin)], capture_output=True, text=True, check=True).stdout

    return run(str(_nvidia_tool("cuobjdump")), "--dump-resource-usage") + run(
        str(_nvidia_tool("nvdisasm")), "-c", "-ndf"
    )


def writes_memory(dump: str) -> bool:
    """Whether the cubin's code (dump_cubin's SASS) stores anything. A kernel the compiler found it cannot run is
    compiled to a trap: the cubin builds and loads, then kills the first launch, and stores nothing. Seen with Triton
    3.9 on sm_100: the KDA prepare kernel at 256-wide tiles while two [64, 256] dot products were live at once."""
    return GLOBAL_WRITE.search(dump) is not None


def resource_usage(dump: str, cubin: str) -> tuple[int, int]:
    """(registers, stack frame bytes) of the single kernel in a cubin, from dump_cubin's resource usage."""
    regs = re.search(r"REG:(\d+)", dump)
    stack = re.search(r"STACK:(\d+)", dump)
    if regs is None or stack is None:
        raise AotError(f"{cubin}: cuobjdump printed no resource usage:\n{dump}")
    return int(regs.group(1)), int(stack.group(1))


def _compile_one(spec: Specialization, arch: str) -> tuple[bytes, int, PtxasReport]:
    """(cubin, shared memory bytes, ptxas's figures) of one instance on arch."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    capability = int(arch.removeprefix("sm_"))
    src = ASTSource(spec.fn, spec.signature, dict(spec.constexprs))
    options = compile_options(spec)
    printed = io.StringIO()
    try:
        # Triton prints its ptxas -v log when asked to; a hit in Triton's own cache runs no ptxas and prints nothing
        with knobs.nvidia.scope(), contextlib.redirect_stdout(printed):
            knobs.nvidia.dump_ptxas_log = True
            compiled = triton.compile(src, target=GPUTarget("cuda", capability, WARP_SIZE), options=options)
    except Exception as exc:  # Triton raises many types; the row must say which instance failed
        raise AotError(f"{spec.kernel} [{spec.config()}] on {arch}: compilation failed: {exc}") from exc
    log = printed.getvalue()
    report = parse_ptxas_report(log) if PTXAS_FRAME.search(log) else ptxas_report(compiled.asm["ptx"], arch)
    return compiled.asm["cubin"], int(compiled.metadata.shared), report


def _write_atomic(path: Path, data: bytes | str) -> None:
    mode = "wb" if isinstance(data, bytes) else "w"
    tmp = None
    try:
        with naming(path), tempfile.NamedTemporaryFile(mode, dir=path.parent, delete=False, suffix=".tmp") as f:
            tmp = f.name
            f.write(data)  # a full disk names no file: naming() names the output
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:  # nothing half-written stays behind
            Path(tmp).unlink(missing_ok=True)
        raise


def compile_specializations(
    specs: list[Specialization],
    archs: tuple[str, ...] = ARCHS,
    cache_dir: str | Path = "build/kernels",
    max_spill_bytes: int = DEFAULT_MAX_SPILL_BYTES,
) -> list[Resources]:
    """Compile every specialisation for every arch into cache_dir; return the resource table (one row each).

    A cache hit (same key) reads `<kernel>-<hash>.json` beside the cubin and compiles nothing. Raises AotError naming
    kernel, config and arch when shared memory exceeds the arch limit or spills exceed max_spill_bytes.
    """
    for spec in specs:
        _check_compilable(spec)
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    table = []
    for spec in specs:
        for arch in archs:
            if arch not in SHARED_LIMIT:
                raise AotError(f"{spec.kernel}: unknown arch {arch!r}; known: {sorted(SHARED_LIMIT)}")
            stem = f"{spec.kernel}-{cache_key(spec, arch)}"
            cubin, meta = cache / f"{stem}.cubin", cache / f"{stem}.json"
            row = _cached_row(cubin, meta)
            if row is None:
                row = _build_row(spec, arch, cubin)
                _write_atomic(meta, json.dumps(row.as_dict(), indent=1))
            row = replace(row, known_spill_bytes=spec.known_spill_bytes)  # the package's figure now, not the cache's
            _check_budget(row, max_spill_bytes)
            table.append(row)
    return table


def _cached_row(cubin: Path, meta: Path) -> Resources | None:
    """The row recorded beside a cached cubin; None when there is none or it predates a field (compile again)."""
    if not (cubin.exists() and meta.exists()):
        return None
    try:
        return Resources.from_dict(json.loads(meta.read_text()), cached=True)
    except (ValueError, TypeError):
        return None


def _build_row(spec: Specialization, arch: str, cubin: Path) -> Resources:
    where = f"{spec.kernel} [{spec.config()}] on {arch}"
    start = time.perf_counter()
    binary, shared, ptxas = _compile_one(spec, arch)
    seconds = time.perf_counter() - start
    _write_atomic(cubin, binary)
    dump = dump_cubin(cubin)
    registers, stack = resource_usage(dump, cubin.name)
    if (registers, stack) != (ptxas.registers, ptxas.stack_bytes):
        cubin.unlink()
        raise AotError(
            f"{where}: ptxas -v reported {ptxas.registers} registers and a {ptxas.stack_bytes} B stack frame, the "
            f"cubin has {registers} and {stack} B: the spill figures would not be the cubin's"
        )
    if not writes_memory(dump):
        cubin.unlink()
        raise AotError(
            f"{where}: the compiler reduced the kernel to a trap (it stores nothing): this config cannot run on this "
            "arch"
        )
    return Resources(
        spec.kernel, spec.config(), arch, registers, shared, stack, ptxas.spill_store_bytes, ptxas.spill_load_bytes,
        seconds, cubin.name, False,
    )  # fmt: skip


def copy_cubins(table: list[Resources], cache_dir: str | Path, dest: str | Path) -> None:
    """Each row's cubin and row file from a shared cache into `dest` (a command's own folder), each written whole."""
    cache, dest = Path(cache_dir), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for row in table:
        for name in (row.cubin, f"{row.cubin.removesuffix('.cubin')}.json"):
            _write_atomic(dest / name, (cache / name).read_bytes())


def save_plan(cache_dir: str | Path, key: str, table: list[Resources]) -> None:
    """Record a whole compile's table under its plan key (dayone.compile_stage.plan_key)."""
    rows = [{**row.as_dict(), "cached": False} for row in table]
    _write_atomic(Path(cache_dir) / f"plan-{key}.json", json.dumps(rows, indent=1))


def load_plan(
    cache_dir: str | Path, key: str, max_spill_bytes: int = DEFAULT_MAX_SPILL_BYTES
) -> list[Resources] | None:
    """The table a compile with this plan key produced, every row a cache hit, when its cubins are all still there;
    None otherwise (compile as usual). Budgets are checked as for a fresh build. Imports neither triton nor torch."""
    cache = Path(cache_dir)
    try:
        rows = json.loads((cache / f"plan-{key}.json").read_text())
        table = [Resources.from_dict(row, cached=True) for row in rows]
    except (OSError, ValueError, TypeError):
        return None  # absent, or not written by save_plan: the full compile rewrites it
    for row in table:
        stem = row.cubin.removesuffix(".cubin")
        if not ((cache / row.cubin).is_file() and (cache / f"{stem}.json").is_file()):
            return None
        _check_budget(row, max_spill_bytes)
    return table


def _check_budget(row: Resources, max_spill_bytes: int) -> None:
    """Shared memory within the arch's limit; spills within max_spill_bytes or, when the kernel package states a larger
    measured figure for the instance (Specialization.known_spill_bytes), within that."""
    where = f"{row.kernel} [{row.config}] on {row.arch}"
    if row.shared_bytes > SHARED_LIMIT[row.arch]:
        raise AotError(f"{where}: shared memory {row.shared_bytes} B exceeds the {SHARED_LIMIT[row.arch]} B limit")
    budget = max(max_spill_bytes, row.known_spill_bytes)
    if row.spill_bytes > budget:
        whose = "the kernel's known figure" if budget > max_spill_bytes else "the budget"
        raise AotError(
            f"{where}: register spills of {row.spill_store_bytes} B stored and {row.spill_load_bytes} B loaded "
            f"(ptxas -v; stack frame {row.stack_bytes} B) exceed {whose} of {budget} B"
        )


def format_table(table: list[Resources]) -> str:
    """The resource table as aligned text, one row per (kernel instance, arch)."""
    head = f"{'kernel':<28} {'arch':<7} {'regs':>5} {'smem':>8} {'stack':>6} {'spill st':>8} {'spill ld':>8}"
    lines = [f"{head} {'secs':>6}  config"]
    for r in table:
        secs = "cache" if r.cached else f"{r.compile_seconds:.1f}"
        lines.append(
            f"{r.kernel:<28} {r.arch:<7} {r.registers:>5} {r.shared_bytes:>8} {r.stack_bytes:>6} "
            f"{r.spill_store_bytes:>8} {r.spill_load_bytes:>8} {secs:>6}  {r.config}"
        )
    return "\n".join(lines)
