"""SGLang's own verdict on a generated adapter package: discovered, accepted, built, loaded (dumps), forward.

    python sglang_probe.py --package-site DIR --checkpoint DIR --world-size N --out OUTDIR
    python sglang_probe.py --batch JOBS.json     (a list of {"package_site", "checkpoint", "world_size", "out"})
    --expert-parallel: the routed experts spread over the ranks, each held whole (SGLang's --ep-size = world size)

Run with the SGLang peer environment's python (.venv/peers/sglang); imports only SGLang, torch, safetensors and
the standard library. DIR holds the generated package as installed (`pip install --target DIR`). N ranks are
launched here (torch.multiprocessing, gloo on the CPU), each inside SGLang's own published runtime context and
parallel state. Writes:
    OUTDIR/levels.json             levels with status and a one-line detail, and the facts SGLang reported
    OUTDIR/rank{R}.safetensors     every parameter and buffer after SGLang's load_weights
    OUTDIR/rank{R}.writes.json     per parameter: weight-loader calls ("calls") and element coverage ("params");
                                   checkpoint tensors passed to load_weights ("streamed"), what it returned
    OUTDIR/rank{R}.derived.safetensors    tensors the model keeps besides its parameters (absorbed MLA, fp32
                                          router bias, attention-residual weights) after the load, and
    OUTDIR/rank{R}.derived2.safetensors   the same after a second load_weights with every floating-point
                                          checkpoint tensor doubled (a weight update)
"loaded" is never passed here: the driver compares the dumps with dayone's reference reading of the checkpoint.
"forward" is not run here either: sglang_forward.py generates with the model (the driver runs it after "loaded").
The framework is imported once in the launching process and the ranks are forked from it (a batch of jobs shares
that import: the import is most of a probe's time); SGLang's model registry, and through it the adapter package,
is imported only inside each rank, after SGLANG_EXTERNAL_MODEL_PACKAGE is set, as in a user's server process.
CPU stand-ins (reported in facts): SGLang's PyNccl communicator is CUDA-only, so the tensor-parallel groups are
built without it and every collective runs over their gloo CPU group. SGLang's rotary embedding is imported with
its CPU engine switched on (SGLANG_USE_CPU_ENGINE=1, for that package alone: the whole CPU engine needs sgl-kernel's
CPU build, which is not on the package index), since off it the rotary classes take vllm._custom_ops' kernel. Its
CPU path (get_rope_cpu) builds only a deepseek_yarn-scaled rope: any other (unscaled, or scaled another way) is
"built: not run", with why, naming the rope it was given.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import socket
import sys
import time
import traceback
from pathlib import Path

LEVELS = ("discovered", "accepted", "built", "loaded", "forward")


FORWARD_ELSEWHERE = (
    "this probe stops at the load; the forward is sglang_forward.py's (the model generating in SGLang's parallel "
    "state without its scheduler), run and judged by the conformance driver"
)


CPU_ROTARY = "SGLang's rotary embedding imported with its CPU engine (SGLANG_USE_CPU_ENGINE=1) for that package only"


class Verdict:
    """Levels of one rank, filled in order; the first failure leaves every later level not run."""

    def __init__(self) -> None:
        self.levels = {name: {"status": "not run", "detail": "an earlier level failed"} for name in LEVELS}
        self.facts: dict = {}

    def passed(self, level: str, detail: str) -> None:
        self.levels[level] = {"status": "pass", "detail": detail}

    def failed(self, level: str, detail: str) -> None:
        self.levels[level] = {"status": "fail", "detail": " ".join(detail.split())[:600]}

    def not_run(self, level: str, detail: str) -> None:
        self.levels[level] = {"status": "not run", "detail": detail}

    def not_run_from(self, level: str, detail: str) -> None:
        """`level` and every later one not run, for the same reason (the later ones name the level)."""
        self.not_run(level, detail)
        for later in LEVELS[LEVELS.index(level) + 1 :]:
            self.not_run(later, f"{level} not run: {detail}")


def package_name(site: Path) -> str:
    """The one importable package in the install folder (dist-info folders aside)."""
    names = sorted(p.name for p in site.iterdir() if (p / "__init__.py").is_file())
    if len(names) != 1:
        raise SystemExit(f"{site}: expected one installed package, found {names or 'none'}")
    return names[0]


def architectures(checkpoint: Path) -> list[str]:
    return list(json.loads((checkpoint / "config.json").read_text()).get("architectures") or [])


class ImportErrors(logging.Handler):
    """SGLang's registry logs a model module's import error as a warning and carries on: keep them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# ----- levels


def discover(verdict: Verdict, package: str, archs: list[str]):
    errors = ImportErrors()
    logging.getLogger("sglang.srt.models.registry").addHandler(errors)
    from sglang.srt.models.registry import ModelRegistry

    ours = [m for m in errors.messages if package in m]
    if ours:
        verdict.failed("discovered", ours[0])
        return None
    if not archs:
        verdict.failed("discovered", "config.json names no architectures")
        return None
    cls = ModelRegistry.models.get(archs[0])
    if cls is None or not cls.__module__.startswith(package + "."):
        where = "nothing" if cls is None else f"{cls.__module__}.{cls.__name__}"
        verdict.failed("discovered", f"SGLang's registry resolves {archs[0]} to {where}, not to {package}")
        return None
    resolved, arch = ModelRegistry.resolve_model_cls(archs)
    if resolved is not cls:
        verdict.failed("discovered", f"resolve_model_cls({archs}) gives {resolved.__module__}.{resolved.__name__}")
        return None
    verdict.passed("discovered", f"{arch} -> {cls.__module__}.{cls.__name__} (SGLANG_EXTERNAL_MODEL_PACKAGE)")
    verdict.facts["model_class"] = f"{cls.__module__}.{cls.__name__}"
    return cls


def server_args(checkpoint: Path, world: int, dtype: str = "auto", expert_parallel: bool = False):
    from sglang.srt.server_args import ServerArgs

    # A hybrid (linear-attention) model on a platform without Mamba state snapshots: SGLang's own resolution asks
    # for the no_buffer strategy, which needs the overlap schedule off.
    return ServerArgs(model_path=str(checkpoint), device="cpu", tp_size=world, ep_size=world if expert_parallel else 1,
                      disable_cuda_graph=True, dtype=dtype,
                      mamba_radix_cache_strategy="no_buffer", disable_overlap_schedule=True)  # fmt: skip


def accept(verdict: Verdict, checkpoint: Path, rank: int, world: int, dtype: str = "auto", expert_parallel=False):
    """SGLang's own inspection: server-argument resolution (model-specific hooks), ModelConfig (`dtype`: the
    server's --dtype)."""
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.runtime_context import SpawnRanks, publish

    args = server_args(checkpoint, world, dtype, expert_parallel)
    publish(args, role="scheduler", ranks=SpawnRanks(world_rank=rank))
    from sglang.srt.configs.hybrid_arch import hybrid_kda_config, mambaish_config

    config = ModelConfig.from_server_args(args)
    hybrid = mambaish_config(config)  # what SGLang's model runner sizes linear-attention state pools from
    text = config.hf_text_config
    facts = {
        "attention_arch": config.attention_arch.name,
        "use_mla": config.attention_arch.name == "MLA",
        "is_hybrid": hybrid is not None,
        "kda": hybrid_kda_config(config) is not None,
        "full_attention_layer_ids": list(getattr(hybrid, "full_attention_layer_ids", None) or []),
        "quantization": config.quantization,
        "dtype": str(config.dtype).removeprefix("torch."),
    }
    verdict.facts.update(facts)
    wanted = []
    if getattr(text, "linear_attn_config", None) and not facts["is_hybrid"]:
        wanted.append("config.json has linear_attn_config but SGLang finds no linear-attention model")
    if getattr(text, "kv_lora_rank", None) and not facts["use_mla"]:
        wanted.append(f"config.json has kv_lora_rank but SGLang's attention arch is {facts['attention_arch']}")
    quant = getattr(text, "quantization_config", None) or getattr(config.hf_config, "quantization_config", None)
    if quant and config.quantization != quant.get("quant_method"):
        wanted.append(f"checkpoint quantization {quant.get('quant_method')} resolved as {config.quantization}")
    if wanted:
        verdict.failed("accepted", "; ".join(wanted))
        return None
    verdict.passed(
        "accepted",
        f"ModelConfig: {facts['attention_arch']}, hybrid {facts['is_hybrid']} (KDA {facts['kda']}, full attention "
        f"layers {facts['full_attention_layer_ids']}), quantization {facts['quantization']}",
    )
    return args, config


def init_parallel(rank: int, world: int, port: int) -> None:
    from sglang.srt.distributed import parallel_state

    parallel_state.init_model_parallel_group = functools.partial(
        parallel_state.init_model_parallel_group, use_pynccl=False
    )
    parallel_state.init_distributed_environment(
        backend="gloo", world_size=world, rank=rank, local_rank=rank,
        distributed_init_method=f"tcp://127.0.0.1:{port}",
    )  # fmt: skip
    parallel_state.initialize_model_parallel()


def load_plugins() -> None:
    """SGLang's general plugins (entry point group sglang.srt.plugins), loaded as SGLang's Engine and scheduler load
    them, first in the process: a generated adapter for a new model type registers its config class there."""
    from sglang.srt.plugins import load_plugins as load

    load()


def import_rotary_with_cpu_engine() -> None:
    """Import sglang.srt.layers.rotary_embedding with SGLang's CPU engine switch on, and only that package: its
    classes decide at import whether to take vllm._custom_ops' rotary kernel (is_cpu() false) or their own torch
    path. The rest of SGLang keeps the switch off (its CPU engine needs sgl-kernel's CPU build). A no-op once the
    package is imported; is_cpu() is cached, so the cache is cleared on the way in and out."""
    if "sglang.srt.layers.rotary_embedding" in sys.modules:
        return
    from sglang.srt.utils import common

    before = os.environ.get("SGLANG_USE_CPU_ENGINE")
    os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    common.is_cpu.cache_clear()
    try:
        import sglang.srt.layers.rotary_embedding  # noqa: F401
    finally:
        if before is None:
            del os.environ["SGLANG_USE_CPU_ENGINE"]
        else:
            os.environ["SGLANG_USE_CPU_ENGINE"] = before
        common.is_cpu.cache_clear()


def refused_by_cpu_rope(err: BaseException) -> bool:
    """SGLang's CPU rotary factory asserting on the rope it was given (the innermost frame is get_rope_cpu)."""
    frames = traceback.extract_tb(err.__traceback__)
    return isinstance(err, AssertionError) and bool(frames) and frames[-1].name == "get_rope_cpu"


def cpu_rope_refusal(err: BaseException) -> str | None:
    """Why SGLang's CPU rotary factory refused the rope, in one line naming the rope it was given (get_rope_cpu's own
    rope_scaling argument, as the adapter rendered the spec's rope) and SGLang's message; None for any other error."""
    if not refused_by_cpu_rope(err):
        return None
    tb = err.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    scaling = tb.tb_frame.f_locals.get("rope_scaling")
    if not isinstance(scaling, dict):
        rope = "unscaled (rope_scaling None)"
    else:
        kind = scaling.get("rope_type", scaling.get("type"))
        rest = ", ".join(f"{key} {value}" for key, value in scaling.items() if key not in ("rope_type", "type"))
        rope = f"scaled, rope_type {kind!r}" + (f", {rest}" if rest else "")
    said = " ".join(str(err).split())
    return (
        f"SGLang's CPU rotary embedding (get_rope_cpu) builds only a deepseek_yarn-scaled rope and this one is {rope}"
        + (f" (SGLang: {said})" if said else "")
        + "; SGLang builds it on a GPU only"
    )


def build(verdict: Verdict, args, config, rank: int, world: int, port: int):
    import torch
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.layers.dp_attention import initialize_dp_attention
    from sglang.srt.model_loader.loader import _get_quantization_config, _initialize_model
    from sglang.srt.model_loader.utils import set_default_torch_dtype

    init_parallel(rank, world, port)
    initialize_dp_attention(server_args=args)
    load_config = LoadConfig(load_format="auto")
    quant_config = _get_quantization_config(config, load_config)
    try:
        with set_default_torch_dtype(config.dtype), torch.device("cpu"):
            model = _initialize_model(config, load_config, quant_config)
    except AssertionError as err:
        refusal = cpu_rope_refusal(err)
        if refusal is None:
            raise
        verdict.not_run_from("built", refusal)
        return None
    rotary = any(type(m).__name__.endswith("RotaryEmbedding") for m in model.modules())
    methods = sorted({type(m.quant_method).__name__ for m in model.modules() if hasattr(m, "quant_method")})
    verdict.facts.update(
        quant_config=type(quant_config).__name__ if quant_config is not None else None,
        quant_methods=methods,
        cpu_stand_ins=["PyNccl off: tensor-parallel collectives over the gloo CPU group"] + [CPU_ROTARY] * rotary,
    )
    count = sum(1 for _ in model.named_parameters())
    verdict.passed("built", f"{type(model).__name__}: {count} parameters on rank {rank} of {world} (gloo)")
    return model


class WriteCounter:
    """Counts, element by element, how often a weight loader writes each parameter (copy_ and slice assignment
    into any view of its storage), and how many loader calls touched it."""

    def __init__(self, model) -> None:
        import torch

        self.by_storage: dict[int, list[str]] = {}
        self.params = dict(model.named_parameters())
        self.elements = {}
        self.calls: dict[str, int] = {name: 0 for name in self.params}
        for name, param in self.params.items():
            storage = param.untyped_storage()
            self.by_storage.setdefault(storage.data_ptr(), []).append(name)
            self.elements[name] = torch.zeros(storage.nbytes() // max(param.element_size(), 1), dtype=torch.int32)
        self.untracked: set[str] = set()
        self.loader_calls: dict[str, int] = {}
        for name, param in self.params.items():
            self._count_loader_calls(name, param)

    def _count_loader_calls(self, name: str, param) -> None:
        """Wrap the parameter's weight_loader (an attribute, or the `_weight_loader` behind SGLang's parameter
        classes' property) so each call is counted."""
        slot = "_weight_loader" if "_weight_loader" in vars(param) else "weight_loader"
        loader = vars(param).get(slot)
        if not callable(loader):
            return
        self.loader_calls[name] = 0

        def counted(*args, **kwargs):
            self.loader_calls[name] += 1
            return loader(*args, **kwargs)

        setattr(param, slot, counted)

    def record(self, dest, kind: str) -> None:
        names = self.by_storage.get(dest.untyped_storage().data_ptr()) if dest.numel() else None
        if not names:
            return
        for name in names:
            counts = self.elements[name].as_strided(dest.shape, dest.stride(), dest.storage_offset())
            counts += 1
            self.calls[name] += 1
        if kind != "copy":
            self.untracked.update(names)

    def summary(self) -> dict:
        out = {}
        for name, param in self.params.items():
            counts = self.elements[name][param.storage_offset() : param.storage_offset() + param.numel()]
            lo, hi = (int(counts.min()), int(counts.max())) if counts.numel() else (0, 0)
            out[name] = {"calls": self.calls[name], "min": lo, "max": hi, "numel": param.numel()}
        return out


def counting_mode(counter: WriteCounter):
    import torch
    from torch.overrides import TorchFunctionMode

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.Tensor.copy_:
                counter.record(args[0], "copy")
            elif func is torch.Tensor.__setitem__:
                target = args[0][args[1]]
                if target.untyped_storage().data_ptr() == args[0].untyped_storage().data_ptr():
                    counter.record(target, "copy")
            elif func in (torch.Tensor.fill_, torch.Tensor.zero_, torch.Tensor.index_copy_, torch.Tensor.scatter_):
                counter.record(args[0], func.__name__)
            return func(*args, **kwargs)

    return Mode()


def load(verdict: Verdict, model, checkpoint: Path, out: Path, rank: int) -> None:
    """SGLang's safetensors iterator into the model's own load_weights, twice (the second time with every
    floating-point tensor doubled: a weight update); dumps for the driver."""
    from sglang.srt.model_loader.loader import post_load_weights

    files = sorted(str(p) for p in checkpoint.glob("*.safetensors"))
    counter = WriteCounter(model)
    with counting_mode(counter):
        streamed, returned = load_once(model, files, lambda tensor: tensor)
        post_load_weights(model)
    save(parameters_and_buffers(model), out / f"rank{rank}.safetensors")
    save(derived_tensors(model), out / f"rank{rank}.derived.safetensors")
    writes = {
        "params": counter.summary(),
        "calls": dict(sorted(counter.loader_calls.items())),
        "untracked_writes": sorted(counter.untracked),
        "streamed": streamed,
        "returned": sorted(returned),
    }
    atomic_json(out / f"rank{rank}.writes.json", writes)
    load_once(model, files, lambda tensor: tensor * 2 if tensor.is_floating_point() else tensor)
    save(derived_tensors(model), out / f"rank{rank}.derived2.safetensors")
    verdict.not_run("loaded", "dumped for the driver's comparison with dayone's reference reading")


def load_once(model, files: list[str], change) -> tuple[list[str], set[str]]:
    """(checkpoint names passed to load_weights, what it returned); an error names the tensor being loaded."""
    from sglang.srt.model_loader.weight_utils import safetensors_weights_iterator

    names: list[str] = []

    def weights():
        for name, tensor in safetensors_weights_iterator(files):
            names.append(name)
            yield name, change(tensor)

    try:
        returned = model.load_weights(weights())
    except Exception as err:
        where = names[-1] if names else "the first tensor"
        raise RuntimeError(f"loading {where}: {type(err).__name__}: {err}") from err
    return names, set(returned or ())


def parameters_and_buffers(model) -> dict:
    return {
        name: value.detach().clone().contiguous() for name, value in [*model.named_parameters(), *model.named_buffers()]
    }


def derived_tensors(model) -> dict:
    """Buffers and tensor attributes of the modules (what a model recomputes from its parameters)."""
    import torch

    tensors = {name: value.detach().clone().contiguous() for name, value in model.named_buffers()}
    for module_name, module in model.named_modules():
        for attr, value in vars(module).items():
            if (
                isinstance(value, torch.Tensor)
                and not isinstance(value, torch.nn.Parameter)
                and not attr.startswith("_")
            ):
                tensors.setdefault(
                    f"{module_name}.{attr}" if module_name else attr, value.detach().clone().contiguous()
                )
    return tensors


def save(tensors: dict, path: Path) -> None:
    from safetensors.torch import save_file

    partial = path.with_name(f".{path.name}.partial")
    save_file(tensors, str(partial))
    partial.replace(path)


def atomic_json(path: Path, data: dict) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    partial.replace(path)


# ----- ranks


def rank_main(rank: int, world: int, port: int, site: str, checkpoint: str, out: str, expert_parallel: bool) -> None:
    import torch
    from cores import per_rank  # this folder is on sys.path

    torch.set_num_threads(per_rank(world))
    sys.path.insert(0, site)
    package = package_name(Path(site))
    os.environ["SGLANG_EXTERNAL_MODEL_PACKAGE"] = package
    verdict, out_dir, ckpt = Verdict(), Path(out), Path(checkpoint)
    level = "discovered"
    try:
        import_rotary_with_cpu_engine()  # before the registry imports the adapter (done by warm() when forked)
        load_plugins()
        if discover(verdict, package, architectures(ckpt)) is not None:
            level = "accepted"
            accepted = accept(verdict, ckpt, rank, world, expert_parallel=expert_parallel)
            if accepted is not None:
                level = "built"
                model = build(verdict, *accepted, rank, world, port)
                if model is not None:
                    level = "loaded"
                    load(verdict, model, ckpt, out_dir, rank)
                    verdict.not_run("forward", FORWARD_ELSEWHERE)
    except Exception as err:  # noqa: BLE001 - the framework's own error is the verdict (traceback kept aside)
        verdict.failed(level, f"{type(err).__name__}: {err}")
        (out_dir / f"rank{rank}.traceback.txt").write_text(traceback.format_exc())
    atomic_json(out_dir / f"rank{rank}.levels.json", {"levels": verdict.levels, "facts": verdict.facts})
    if rank == 0:
        wait_for_ranks(out_dir, world)


def wait_for_ranks(out: Path, world: int, limit_s: float = 600.0) -> None:
    """Rank 0 hosts the process groups' TCP store: it stays until every rank has written its levels, so a rank
    still creating its groups never finds the store gone (a rank that dies ends the launch anyway)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not all((out / f"rank{r}.levels.json").is_file() for r in range(world)):
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def merge(out: Path, world: int, version: str) -> dict:
    """levels.json: a level passes only where every rank passed it; a rank's failure is reported with its rank."""
    ranks = []
    for r in range(world):
        path = out / f"rank{r}.levels.json"
        ranks.append(json.loads(path.read_text()) if path.is_file() else None)
    levels = {}
    for name in LEVELS:
        worst = None
        for r, data in enumerate(ranks):
            entry = (data or {}).get("levels", {}).get(name) or {"status": "fail", "detail": f"rank {r} died"}
            if entry["status"] == "fail":
                worst = {"status": "fail", "detail": f"rank {r}: {entry['detail']}"}
                break
            worst = worst or entry
            if entry["status"] == "not run":
                worst = entry
        levels[name] = worst
    facts = (ranks[0] or {}).get("facts", {})
    return {"framework": "sglang", "version": version, "world_size": world, "levels": levels, "facts": facts}


# Framework modules the probe and generated adapters use; imported once, before the ranks are forked. The model
# registry is not among them: importing it reads SGLANG_EXTERNAL_MODEL_PACKAGE, which each rank sets itself.
WARM = (
    "sglang.srt.server_args", "sglang.srt.runtime_context", "sglang.srt.configs.model_config",
    "sglang.srt.configs.hybrid_arch", "sglang.srt.configs.load_config", "sglang.srt.layers.dp_attention",
    "sglang.srt.model_loader.loader", "sglang.srt.model_loader.weight_utils", "sglang.srt.distributed",
    "sglang.srt.layers.linear", "sglang.srt.layers.layernorm", "sglang.srt.layers.logits_processor",
    "sglang.srt.layers.moe.ep_moe.layer", "sglang.srt.layers.moe.topk", "sglang.srt.layers.quantization.mxfp4",
    "sglang.srt.layers.radix_attention", "sglang.srt.layers.radix_linear_attention",
    "sglang.srt.layers.vocab_parallel_embedding", "sglang.srt.model_executor.forward_batch_info",
    "safetensors.torch",
)  # fmt: skip
REGISTRY = "sglang.srt.models.registry"


def warm() -> str:
    """Import the framework here; the start method for the ranks: fork, unless the registry got imported too."""
    import importlib

    for module in WARM:
        with contextlib.suppress(Exception):  # the rank's own import reports it as its level's failure
            importlib.import_module(module)
    with contextlib.suppress(Exception):
        import_rotary_with_cpu_engine()  # after the modules above, so the switch reaches the rotary package only
    return "spawn" if REGISTRY in sys.modules else "fork"


def run_job(site: Path, checkpoint: Path, world: int, out: Path, start_method: str, version: str,
            expert_parallel: bool = False) -> None:  # fmt: skip
    import torch.multiprocessing as mp

    out.mkdir(parents=True, exist_ok=True)
    args = (world, free_port(), str(site.resolve()), str(checkpoint.resolve()), str(out.resolve()), expert_parallel)
    try:
        mp.start_processes(rank_main, args=args, nprocs=world, join=True, start_method=start_method)
    except mp.ProcessExitedException:
        pass  # a rank that died has no rank levels: merge reports it
    atomic_json(out / "levels.json", merge(out, world, version))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package-site", type=Path)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--expert-parallel", action="store_true", help="SGLang's --ep-size, the world size")
    parser.add_argument("--batch", type=Path, help="a JSON list of jobs, run one after the other")
    a = parser.parse_args(argv)
    if a.batch is not None:
        jobs = json.loads(a.batch.read_text())
    elif a.package_site and a.checkpoint and a.out:
        jobs = [{"package_site": a.package_site, "checkpoint": a.checkpoint, "world_size": a.world_size, "out": a.out,
                 "expert_parallel": a.expert_parallel}]  # fmt: skip
    else:
        parser.error("give --package-site, --checkpoint and --out, or --batch")
    from importlib.metadata import version

    start_method = warm()
    for job in jobs:
        run_job(Path(job["package_site"]), Path(job["checkpoint"]), int(job["world_size"]), Path(job["out"]),
                start_method, version("sglang"), bool(job.get("expert_parallel")))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
