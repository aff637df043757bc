"""Run in the megatron peer (one gloo rank): the generated Megatron-Bridge package for a spec, as far as
megatron-bridge 0.3.1 runs without TransformerEngine.

    python -m dayone.programs.megatron.check_bridge SPEC|FILE OUT_DIR [--layers N]

`import megatron.bridge` needs transformer_engine (megatron/bridge/peft/lora_layers.py, reached from the package's
__init__ through conversion/model_bridge.py -> peft_bridge.py), so the real package __init__ files are not run: the
parent packages are created empty over their real folders and the real modules below them imported:
param_mapping.py, mapping_registry.py (the mapping classes), mla_provider.py / gpt_provider.py (the provider). The one
module that cannot import, model_bridge.py, is stood in for by a `MegatronModelBridge` whose `register_bridge` records
its arguments: registration itself is "not run". Checks: the provider's provide() builds megatron-core's GPTModel
with exactly the weight map's Megatron tensors; every model parameter and every checkpoint tensor has a mapping in the
registry; each mapping's hf_to_megatron gives the weight map's value and megatron_to_hf the checkpoint's, bitwise.
Prints a JSON report.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import types
from pathlib import Path
from typing import ClassVar

import torch

STOOD_IN = "megatron.bridge.models.conversion.model_bridge"
# Why TransformerEngine is not installed here (tried with pip, December 2026): megatron-bridge 0.3.1 requires
# transformer-engine[core_cu13,pytorch] >=2.10,<2.13; its PyTorch part, transformer-engine-torch 2.10-2.12, is
# published only as an sdist (`pip download --only-binary :all:` finds no version), and building it fails at
# metadata generation (setup.py line 165: InvalidVersion None) on a machine with no CUDA toolkit; it compiles a CUDA
# extension against nvcc and cuDNN, and its core is the CUDA-13 binary transformer-engine-cu13.
TE_WHY = (
    "which imports transformer_engine: the transformer-engine-torch releases the pinned megatron-bridge asks for "
    "are sdists that build a CUDA extension, and this machine has no CUDA toolkit"
)


def bypass_package_inits() -> None:
    import megatron

    root = Path(megatron.__path__[0]) / "bridge"
    for name in ("megatron.bridge", "megatron.bridge.models", "megatron.bridge.models.conversion",
                 "megatron.bridge.utils", "megatron.bridge.models.hf_pretrained"):  # fmt: skip
        module = types.ModuleType(name)
        module.__path__ = [str(root.joinpath(*name.split(".")[2:]))]
        sys.modules[name] = module
    stand_in = types.ModuleType(STOOD_IN)

    class MegatronModelBridge:
        registered: ClassVar[list[dict]] = []

        @classmethod
        def register_bridge(cls, **kwargs):
            cls.registered.append(kwargs)
            return lambda bridge: bridge

    stand_in.MegatronModelBridge = MegatronModelBridge
    sys.modules[STOOD_IN] = stand_in


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int)
    args = parser.parse_args()
    spec_name, out = args.spec, args.out
    import torch.distributed as dist
    from dayone.programs.megatron.verify import _free_port, tiny_stand_in

    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    dist.init_process_group("gloo", rank=0, world_size=1)
    from dayone.adapters.megatron.cpu import install_cpu_standins
    from dayone.adapters.targets import megatron_bridge
    from dayone.adapters.weightmap import build_weight_map, walk
    from dayone.programs.megatron.verify import generated_package, synthetic_checkpoint
    from dayone.spec.registry import load_spec
    from megatron.core import parallel_state as ps
    from megatron.core.process_groups_config import ProcessGroupCollection

    ps.initialize_model_parallel(1, 1)
    install_cpu_standins()
    bypass_package_inits()
    full = load_spec(spec_name)
    spec = tiny_stand_in(full, args.layers)
    package = generated_package(spec, "megatron-bridge", megatron_bridge.files(spec), out / "bridge")
    module = importlib.import_module(f"{package}.bridge")
    why = f"MegatronModelBridge.register_bridge and AutoBridge: {STOOD_IN} imports megatron.bridge.peft, {TE_WHY}"
    report: dict = {"spec": spec.name, "failures": [], "not_run": [why]}
    fail = report["failures"].append
    registered = sys.modules[STOOD_IN].MegatronModelBridge.registered
    report["registered"] = [{k: getattr(v, "__name__", v) for k, v in r.items()} for r in registered]

    bridge = next(v for v in vars(module).values() if isinstance(v, type) and v.__name__.endswith("Bridge")
                  and v.__module__ == module.__name__)()  # fmt: skip
    provider = bridge.provider_bridge(None)
    provider.use_cpu_initialization = True
    provider.finalize()  # megatron-bridge defers TransformerConfig.__post_init__ to finalize()
    provider._pg_collection = ProcessGroupCollection.use_mpu_process_groups()
    model = provider.provide()
    table = build_weight_map(spec, "megatron", mxfp4="dequantize")
    tensors = synthetic_checkpoint(spec, out / "checkpoint")
    state = walk.to_target(table, tensors.__getitem__, walk.Parallel(), dtype=torch.float32)
    passthrough = {r.target for r in table.RULES if r.transform == "passthrough"}
    dequantized = walk.to_hf(table, {(0, 0): state}, walk.Parallel(), requantize=False)  # checkpoint, float experts
    state = {n: v for n, v in state.items() if n not in passthrough}
    have = {n for n in model.state_dict() if not n.endswith("._extra_state")}
    for name in sorted(have ^ set(state)):
        fail(f"{name}: {'in the provided model only' if name in have else 'in the weight map only'}")
    model.load_state_dict(state, strict=False)

    registry = bridge.mapping_registry()
    params = dict(model.named_parameters()) | dict(model.named_buffers())
    hf = {r.source.removesuffix("_packed") if r.transform == "mxfp4" else r.source for r in table.RULES}
    for name in sorted(have):
        mapping = registry.megatron_to_hf_lookup(name)
        if mapping is None:
            fail(f"{name}: no mapping in the bridge's registry")
            continue
        sources = mapping.hf_param if isinstance(mapping.hf_param, dict) else {"w": mapping.hf_param}
        inputs = {k: dequantized[v] for k, v in sources.items()}
        loaded = mapping.hf_to_megatron(inputs if isinstance(mapping.hf_param, dict) else inputs["w"], model)
        if not torch.equal(loaded.to(state[name].dtype), state[name]):
            fail(f"{name}: hf_to_megatron through {type(mapping).__name__} differs from the weight map's value")
        back = mapping.megatron_to_hf(params[name].detach(), model)
        for hf_name, value in back.items():
            if not torch.equal(value.to(dequantized[hf_name].dtype), dequantized[hf_name]):
                fail(f"{name} -> {hf_name}: megatron_to_hf differs from the checkpoint")
    missing = sorted(n for n in hf if n in dequantized and n not in passthrough
                     and registry.hf_to_megatron_lookup(n) is None)  # fmt: skip
    for name in missing[:5]:
        fail(f"{name}: no mapping in the bridge's registry reads this checkpoint tensor")
    report["mapped_parameters"] = len(have)
    report["mapping_classes"] = sorted({type(registry.megatron_to_hf_lookup(n)).__name__ for n in have})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
