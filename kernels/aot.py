"""Ahead-of-time compilation of kernel specialisations to cubins, with no GPU present.

`compile_specializations` turns each `Specialization` into `<kernel>-<hash>.cubin` per GPU arch and returns a
resource table (registers, shared memory, spill bytes, compile seconds). Budgets are checked here so a kernel that
cannot launch on a target (too much shared memory) or would crawl (spills) fails the build, not the first request.

The cache is content-addressed: the key hashes the kernel source, signature, constexprs, options, arch and Triton
version, so an unchanged specialisation is a file lookup. Must run with TRITON_INTERPRET unset: the interpreter
replaces @triton.jit functions at decoration time and there is nothing left to compile.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from dayone.kernels.specialization import Specialization

# Usable shared memory per block (opt-in maximum): 227 KiB on both Hopper and Blackwell datacenter parts.
SHARED_LIMIT = {"sm_90": 227 * 1024, "sm_100": 227 * 1024}
DEFAULT_MAX_SPILL_BYTES = 0
WARP_SIZE = 32


class AotError(RuntimeError):
    """A specialisation that cannot be compiled or breaks a resource budget; the message names kernel and config."""


@dataclass(frozen=True)
class Resources:
    """One row of the resource table."""

    kernel: str
    config: str
    arch: str
    registers: int
    shared_bytes: int
    spill_bytes: int
    compile_seconds: float
    cubin: str
    cached: bool

    def as_dict(self) -> dict:
        return asdict(self)


def _cuobjdump() -> Path:
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def _check_compilable(spec: Specialization) -> None:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or type(spec.fn).__name__ == "InterpretedFunction":
        raise AotError(
            f"{spec.kernel} [{spec.config()}]: TRITON_INTERPRET is set, so @triton.jit produced an interpreted "
            "function that cannot be compiled; run AOT compilation in a process without TRITON_INTERPRET"
        )


def cache_key(spec: Specialization, arch: str) -> str:
    """Hash of everything that decides the cubin: source, signature, constexprs, options, arch, Triton version."""
    import triton

    payload = {
        # JITFunction.cache_key hashes the source and every @triton.jit function it calls
        "source": getattr(spec.fn, "cache_key", None) or spec.fn.src,
        "name": spec.fn.__name__,
        "signature": spec.signature,
        "constexprs": {k: repr(v) for k, v in spec.constexprs.items()},
        "options": {"num_warps": spec.num_warps, "num_stages": spec.num_stages},
        "arch": arch,
        "triton": triton.__version__,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


# An instruction that writes global memory (plain, reduction, atomic, TMA): every kernel here writes its outputs.
GLOBAL_WRITE = re.compile(
    r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?(?:STG|ST|REDG|RED|ATOMG|ATOM|UTMASTG|UTMAREDG)\b", re.MULTILINE
)


def writes_memory(cubin: Path) -> bool:
    """Whether the cubin's code stores anything. A kernel the compiler found it cannot run is compiled to a trap: the
    cubin builds and loads, then kills the first launch, and stores nothing. Seen with Triton 3.9 on sm_100: the KDA
    prepare kernel at 256-wide tiles while two [64, 256] dot products were live at once."""
    sass = subprocess.run([str(_cuobjdump()), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    return GLOBAL_WRITE.search(sass) is not None


def resource_usage(cubin: Path) -> tuple[int, int]:
    """(registers, local/spill bytes) of the single kernel in a cubin, read with Triton's bundled cuobjdump."""
    text = subprocess.run(
        [str(_cuobjdump()), "--dump-resource-usage", str(cubin)], capture_output=True, text=True, check=True
    ).stdout
    regs = re.search(r"REG:(\d+)", text)
    local = re.search(r"LOCAL:(\d+)", text)
    if regs is None or local is None:
        raise AotError(f"{cubin.name}: cuobjdump printed no resource usage:\n{text}")
    return int(regs.group(1)), int(local.group(1))


def _compile_one(spec: Specialization, arch: str) -> tuple[bytes, int]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    capability = int(arch.removeprefix("sm_"))
    src = ASTSource(spec.fn, spec.signature, dict(spec.constexprs))
    options = {"num_warps": spec.num_warps, "num_stages": spec.num_stages}
    try:
        compiled = triton.compile(src, target=GPUTarget("cuda", capability, WARP_SIZE), options=options)
    except Exception as exc:  # Triton raises many types; the row must say which instance failed
        raise AotError(f"{spec.kernel} [{spec.config()}] on {arch}: compilation failed: {exc}") from exc
    return compiled.asm["cubin"], int(compiled.metadata.shared)


def _write_atomic(path: Path, data: bytes | str) -> None:
    mode = "wb" if isinstance(data, bytes) else "w"
    with tempfile.NamedTemporaryFile(mode, dir=path.parent, delete=False, suffix=".tmp") as f:
        f.write(data)
    os.replace(f.name, path)


def compile_specializations(
    specs: list[Specialization],
    archs: tuple[str, ...] = ("sm_90", "sm_100"),
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
            if cubin.exists() and meta.exists():
                row = Resources(**{**json.loads(meta.read_text()), "cached": True})
            else:
                start = time.perf_counter()
                binary, shared = _compile_one(spec, arch)
                seconds = time.perf_counter() - start
                _write_atomic(cubin, binary)
                registers, spills = resource_usage(cubin)
                if not writes_memory(cubin):
                    cubin.unlink()
                    raise AotError(
                        f"{spec.kernel} [{spec.config()}] on {arch}: the compiler reduced the kernel to a trap (it "
                        "stores nothing): this config cannot run on this arch"
                    )
                row = Resources(spec.kernel, spec.config(), arch, registers, shared, spills, seconds, cubin.name, False)
                _write_atomic(meta, json.dumps(row.as_dict(), indent=1))
            _check_budget(row, max_spill_bytes)
            table.append(row)
    return table


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
        table = [Resources(**{**row, "cached": True}) for row in rows]
    except (OSError, ValueError, TypeError):
        return None  # absent, or not written by save_plan: the full compile rewrites it
    for row in table:
        stem = row.cubin.removesuffix(".cubin")
        if not ((cache / row.cubin).is_file() and (cache / f"{stem}.json").is_file()):
            return None
        _check_budget(row, max_spill_bytes)
    return table


def _check_budget(row: Resources, max_spill_bytes: int) -> None:
    where = f"{row.kernel} [{row.config}] on {row.arch}"
    if row.shared_bytes > SHARED_LIMIT[row.arch]:
        raise AotError(f"{where}: shared memory {row.shared_bytes} B exceeds the {SHARED_LIMIT[row.arch]} B limit")
    if row.spill_bytes > max_spill_bytes:
        raise AotError(f"{where}: {row.spill_bytes} B of register spills exceed the budget of {max_spill_bytes} B")


def format_table(table: list[Resources]) -> str:
    """The resource table as aligned text, one row per (kernel instance, arch)."""
    lines = [f"{'kernel':<28} {'arch':<7} {'regs':>5} {'smem':>8} {'spill':>6} {'secs':>6}  config"]
    for r in table:
        secs = "cache" if r.cached else f"{r.compile_seconds:.1f}"
        lines.append(
            f"{r.kernel:<28} {r.arch:<7} {r.registers:>5} {r.shared_bytes:>8} {r.spill_bytes:>6} {secs:>6}  {r.config}"
        )
    return "\n".join(lines)
