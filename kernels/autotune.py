"""Autotuning on the GPU a model will run on: time each kernel instance's candidate configs, keep the fastest correct.

A kernel package's aot module (dayone.kernels.<op>.aot) may expose `candidates(dims: KernelDims) -> list[Candidate]`.
A Candidate is one kernel instance of `specializations(dims)` with its alternative configs (BLOCK_* constexprs,
num_warps, num_stages; the first is the shipped default) and `make_args(device, tiny=False) -> (grid, args, kwargs)`,
its launch inputs at a representative shape derived from the spec (the workload sizes below).

`autotune` compiles every config for the arch through the AOT cache (a config over the arch's shared-memory or spill
budget is dropped with a note), launches each on the same inputs, rejects any whose outputs differ from the default
config's beyond the tolerance row for their dtype (a fast wrong config must never win), times the rest with the
timer (median microseconds) and picks the fastest; the default wins ties. The device and the timer are parameters:
tests run the selection on the CPU with a fake timer, and under TRITON_INTERPRET=1 with make_args(tiny=True).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from dayone.core.numerics import compare
from dayone.core.vocabulary import SHORT_DTYPE
from dayone.kernels.aot import AotError, compile_specializations
from dayone.kernels.specialization import Specialization

# Representative workloads (issues 4 and 5): decode batch, prefill tokens of one sequence, decode context length.
DECODE_BATCH = 64
PREFILL_TOKENS = 8192
DECODE_CONTEXT = 8192
# A kernel specialization names its dtype short (bf16); torch names it long (bfloat16).
TORCH_DTYPES = {short: getattr(torch, name) for name, short in SHORT_DTYPE.items()}
# The launch options a config may change besides its constexprs.
OPTIONS = ("num_warps", "num_stages")

LaunchArgs = tuple[Any, tuple, dict]  # (grid or grid(meta) callable, positional runtime args, constexpr kwargs)
Timer = Callable[[Callable[[], object]], float]  # runs fn repeatedly, returns the median in microseconds


@dataclass(frozen=True)
class Candidate:
    """The alternative configs of one kernel instance and the inputs to time them on.

    configs: Specializations of one kernel (same name, function and signature), configs[0] the shipped default.
    make_args(device, tiny=False) -> (grid, args, kwargs): fresh buffers on every call, the same values every call.
        args are the runtime arguments in signature order; grid may be a callable of the launch's arguments
        (meta["BV"], ...). kwargs add or override constexprs that follow from the inputs rather than the config:
        at full size they must agree with the compiled config; with tiny=True (a few dozen elements a dimension,
        fp32, for the Triton interpreter) they may set shape constexprs (K, V, ...) and DOT_FP32, never a constexpr
        the configs vary.
    outputs: the argument names the kernel writes (in-place state included), compared between configs.
    """

    configs: tuple[Specialization, ...]
    make_args: Callable[..., LaunchArgs]
    outputs: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.configs:
            raise ValueError("a Candidate needs at least its default config")
        first = self.configs[0]
        for spec in self.configs[1:]:
            if (spec.kernel, spec.fn, spec.signature) != (first.kernel, first.fn, first.signature):
                raise ValueError(f"{first.kernel}: every config must be the same kernel, got {spec.kernel}")
        names = [spec.config() for spec in self.configs]
        if len(set(names)) != len(names):
            raise ValueError(f"{first.kernel}: repeated configs in {names}")
        unknown = set(self.outputs) - set(first.signature)
        if unknown:
            raise ValueError(f"{first.kernel}: outputs {sorted(unknown)} are not arguments of the kernel")

    @property
    def kernel(self) -> str:
        return self.configs[0].kernel

    @property
    def default(self) -> Specialization:
        return self.configs[0]

    def tuned_keys(self) -> set[str]:
        """The constexprs whose value differs between configs."""
        keys = {k for spec in self.configs for k in spec.constexprs}
        return {k for k in keys if len({repr(spec.constexprs.get(k)) for spec in self.configs}) > 1}


def variants(default: Specialization, changes: Iterable[Mapping[str, Any]]) -> tuple[Specialization, ...]:
    """The default and one config per change ({constexpr: value, "num_warps": n, "num_stages": n}), repeats dropped."""
    configs = {default.config(): default}
    for change in changes:
        constexprs = {k: v for k, v in change.items() if k not in OPTIONS}
        unknown = set(constexprs) - set(default.constexprs)
        if unknown:
            raise ValueError(f"{default.kernel}: {sorted(unknown)} are not constexprs of the kernel")
        options = {k: v for k, v in change.items() if k in OPTIONS}
        spec = replace(default, constexprs={**default.constexprs, **constexprs}, **options)
        configs.setdefault(spec.config(), spec)
    return tuple(configs.values())


class Inputs:
    """Seeded random tensors on one device; a new Inputs with the same seed makes the same values again."""

    def __init__(self, device: str | torch.device, seed: int = 0):
        self.device = torch.device(device)
        self.gen = torch.Generator(device=self.device).manual_seed(seed)

    def randn(self, *shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
        x = torch.randn(*shape, generator=self.gen, device=self.device, dtype=torch.float32)
        return (x * scale).to(dtype)

    def randint(self, low: int, high: int, *shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self.gen, device=self.device, dtype=dtype)

    def randperm(self, n: int) -> torch.Tensor:
        return torch.randperm(n, generator=self.gen, device=self.device)

    def tensor(self, data: list, dtype: torch.dtype = torch.int32) -> torch.Tensor:
        return torch.tensor(data, dtype=dtype, device=self.device)

    def nans(self, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """An output buffer: an element a config fails to write stays NaN and fails the comparison."""
        return torch.full(shape, float("nan"), dtype=dtype, device=self.device)


@dataclass(frozen=True)
class Tuned:
    """The autotuning result of one kernel instance on one arch."""

    kernel: str
    arch: str
    default: str
    winner: str
    median_us: dict[str, float]  # config -> median microseconds, every config that ran and matched the default
    rejected: dict[str, str] = field(default_factory=dict)  # config -> the failed comparison
    dropped: dict[str, str] = field(default_factory=dict)  # config -> why it does not fit the arch
    winner_spec: Specialization | None = field(default=None, compare=False, repr=False)

    @property
    def speedup(self) -> float:
        return self.median_us[self.default] / self.median_us[self.winner]

    def as_dict(self) -> dict:
        return {
            "kernel": self.kernel,
            "arch": self.arch,
            "default": self.default,
            "winner": self.winner,
            "speedup": round(self.speedup, 3),
            "median_us": {config: round(us, 3) for config, us in self.median_us.items()},
            "rejected": dict(self.rejected),
            "dropped": dict(self.dropped),
        }


def cuda_timer(fn: Callable[[], object]) -> float:
    """Median microseconds of fn on the GPU: triton's do_bench (25 ms warm-up, 100 ms of repeats, L2 flushed)."""
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=25, rep=100, return_mode="median")) * 1e3


def gpu_arch() -> str | None:
    """The arch of this machine's CUDA GPU ("sm_90" on an H100/H200), None without one."""
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def launch(spec: Specialization, grid: Any, args: tuple, kwargs: dict) -> object:
    """Launch one config: its constexprs and options, with kwargs (from make_args) on top."""
    return spec.fn[grid](
        *args, **{**spec.constexprs, **kwargs}, num_warps=spec.num_warps, num_stages=spec.num_stages,
        enable_fp_fusion=True,
    )  # fmt: skip


def tolerance_for(t: torch.Tensor) -> str:
    """The tolerance row for two configs' outputs: fp32 buffers are compared as fp32 kernels, 16-bit ones as bf16."""
    return "fp32_kernel" if t.dtype == torch.float32 else "bf16_kernel"


def fit(
    candidate: Candidate,
    arch: str,
    cache_dir: str | Path,
    max_spill_bytes: int = 0,
    compile: Callable[..., list] = compile_specializations,
) -> tuple[list[Specialization], dict[str, str]]:
    """The configs that compile for arch within budget (into the AOT cache), and a note for each that does not.

    The default must fit: it is what `integrate compile` ships, so its AotError is raised.
    """
    kept, dropped = [], {}
    for i, spec in enumerate(candidate.configs):
        try:
            compile([spec], (arch,), cache_dir, max_spill_bytes)
        except AotError as err:
            if i == 0:
                raise
            dropped[spec.config()] = str(err)
        else:
            kept.append(spec)
    return kept, dropped


def _outputs(candidate: Candidate, spec: Specialization, args: tuple) -> dict[str, torch.Tensor]:
    runtime = [name for name, kind in spec.signature.items() if kind != "constexpr"]
    if len(args) != len(runtime):
        raise ValueError(f"{spec.kernel}: make_args gave {len(args)} arguments for {len(runtime)}: {runtime}")
    named = dict(zip(runtime, args, strict=True))
    return {name: named[name].clone() for name in candidate.outputs}


def _check_kwargs(candidate: Candidate, spec: Specialization, kwargs: dict, tiny: bool) -> None:
    clash = set(kwargs) & candidate.tuned_keys()
    if clash:
        raise ValueError(f"{spec.kernel}: make_args sets {sorted(clash)}, which the configs tune")
    if not tiny:
        differ = {k: v for k, v in kwargs.items() if k in spec.constexprs and spec.constexprs[k] != v}
        if differ:
            raise ValueError(f"{spec.kernel}: make_args changes {differ} of the compiled config [{spec.config()}]")


def tune(
    candidate: Candidate,
    configs: list[Specialization] | None = None,
    *,
    arch: str = "",
    device: str = "cuda",
    timer: Timer | None = None,
    tiny: bool = False,
) -> Tuned:
    """Run every config (default first) on fresh inputs, compare its outputs with the default's, time the matching
    ones and pick the fastest. configs defaults to all of the candidate's; it must start with the default."""
    configs = list(candidate.configs if configs is None else configs)
    if not configs or configs[0] != candidate.default:
        raise ValueError(f"{candidate.kernel}: the configs to tune must start with the default")
    timer = timer or cuda_timer
    expected: dict[str, torch.Tensor] = {}
    median, rejected = {}, {}
    for spec in configs:
        grid, args, kwargs = candidate.make_args(device, tiny=tiny)
        _check_kwargs(candidate, spec, kwargs, tiny)
        launch(spec, grid, args, kwargs)
        got = _outputs(candidate, spec, args)
        if not expected:
            expected = got
        else:
            failed = {name: compare(got[name], expected[name], tolerance_for(expected[name])) for name in got}
            failed = {name: c for name, c in failed.items() if not c.passed}
            if failed:
                rejected[spec.config()] = "; ".join(f"{name}: {c.describe()}" for name, c in failed.items())
                continue
        median[spec.config()] = float(timer(partial(launch, spec, grid, args, kwargs)))
    winner = min(median, key=median.__getitem__)  # the first of equals: the default wins a tie
    by_name = {spec.config(): spec for spec in configs}
    return Tuned(candidate.kernel, arch, configs[0].config(), winner, median, rejected, {}, by_name[winner])


def autotune(
    candidates: list[Candidate],
    arch: str,
    cache_dir: str | Path,
    *,
    device: str = "cuda",
    timer: Timer | None = None,
    max_spill_bytes: int = 0,
    compile: Callable[..., list] = compile_specializations,
    tiny: bool = False,
    progress: Callable[[Tuned], None] | None = None,
) -> list[Tuned]:
    """Fit every candidate's configs to arch (dropping those over budget), tune the rest; one Tuned per candidate."""
    results = []
    for candidate in candidates:
        configs, dropped = fit(candidate, arch, cache_dir, max_spill_bytes, compile)
        result = replace(tune(candidate, configs, arch=arch, device=device, timer=timer, tiny=tiny), dropped=dropped)
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def format_tuned(results: list[Tuned]) -> str:
    """The winners as aligned text: default and winner times, speedup, configs timed / rejected / dropped."""
    lines = [f"{'kernel':<28} {'arch':<7} {'default us':>10} {'best us':>9} {'speedup':>7} {'t/r/d':>7}  winner"]
    for r in results:
        counts = f"{len(r.median_us)}/{len(r.rejected)}/{len(r.dropped)}"
        lines.append(
            f"{r.kernel:<28} {r.arch:<7} {r.median_us[r.default]:>10.2f} {r.median_us[r.winner]:>9.2f} "
            f"{r.speedup:>6.2f}x {counts:>7}  {r.winner}"
        )
    for r in results:
        for config, why in {**r.rejected, **r.dropped}.items():
            lines.append(f"  {r.kernel} [{config}]: {why}")
    return "\n".join(lines)
