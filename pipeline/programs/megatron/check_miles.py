"""Run in the megatron peer (one gloo rank): the generated Miles package for a spec, used as Miles uses it.

    python -m dayone.programs.megatron.check_miles SPEC|FILE OUT_DIR [--layers N] [--plant-argument FLAG]

The model arguments become a megatron-core config as Megatron-LM makes one (TransformerConfig fields by name, the
few Megatron-LM flags by what they set); every flag must be a field of megatron-core 0.16.1's (MLA)TransformerConfig
or a Megatron-LM flag Miles' own scripts pass. The generated `--spec` plugin gives the TransformerBlock spec of
megatron-core's GPTModel; the checkpoint loads through the generated converter (load_hf); the converter Miles calls
for weight sync, fed the model's parameters under Miles' names (module.module.*), must give back the release's
tensor names and bytes. Prints a JSON report.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import re
from pathlib import Path

import torch


def config_from_args(args: list[tuple[str, object]], miles) -> tuple[dict, list[str]]:
    """(MLATransformerConfig kwargs, flags no parser knows) from the generated arguments."""
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    fields = {f.name for f in dataclasses.fields(MLATransformerConfig)}
    unknown = miles.unknown_arguments([flag for flag, _ in args], fields)
    sets = {"swiglu": ("gated_linear_unit", True), "disable-bias-linear": ("add_bias_linear", False),
            "norm-epsilon": ("layernorm_epsilon", None), "num-experts": ("num_moe_experts", None)}  # fmt: skip
    kwargs = {}
    for flag, value in args:
        if isinstance(value, str) and re.fullmatch(r"\(\[[0-9,\[\]*+]*\)", value):
            value = eval(value)  # a per-layer list expression, as Megatron's parser evaluates it (digits only)
        name = flag.replace("-", "_")
        if flag in sets:
            field, fixed = sets[flag]
            kwargs[field] = value if fixed is None else fixed
        elif name in fields:
            kwargs[name] = value
    if kwargs.get("multi_latent_attention"):
        # Megatron-LM's --q-lora-rank defaults to None (no q LoRA), MLATransformerConfig's field to 512
        kwargs.setdefault("q_lora_rank", None)
    return kwargs, unknown


def gpt_model(spec, layer_spec, kwargs: dict):
    """megatron-core's GPTModel as Miles' model provider builds it: the config from the package's arguments
    (`config_from_args`), the decoder from its `--spec` function `layer_spec`. CPU, local (non-TE) modules."""
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    config = MLATransformerConfig(**kwargs, use_cpu_initialization=True, transformer_impl="local",
                                  moe_token_dispatcher_type="allgather")  # fmt: skip
    return GPTModel(config, layer_spec(None, config, None), spec.vocab_size, spec.max_position_embeddings,
                    position_embedding_type="none", share_embeddings_and_output_weights=spec.tie_word_embeddings)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--plant-argument", help="add an argument Megatron does not accept (tests)")
    args = parser.parse_args()
    spec_name, out, plant = args.spec, args.out, args.plant_argument
    import torch.distributed as dist
    from dayone.programs.megatron.verify import _free_port, tiny_stand_in

    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    dist.init_process_group("gloo", rank=0, world_size=1)
    from dayone.adapters.megatron.cpu import install_cpu_standins
    from dayone.adapters.targets import common, miles
    from dayone.programs.megatron.same_bytes import weight_sync_failures
    from dayone.programs.megatron.verify import generated_package, synthetic_checkpoint
    from dayone.spec.registry import load_spec
    from megatron.core import parallel_state as ps

    ps.initialize_model_parallel(1, 1)
    install_cpu_standins()
    full = load_spec(spec_name)
    spec = tiny_stand_in(full, args.layers)
    package = generated_package(spec, "miles", miles.files(spec), out / "miles")
    plugin = importlib.import_module(f"{package}.plugin")
    convert = importlib.import_module(f"{package}.convert")
    report: dict = {"spec": spec.name, "failures": []}
    fail = report["failures"].append

    margs = [(f, v) for f, v in miles.model_args(spec) if v is not None and v is not False]
    if plant:
        margs.append((plant, True))
    kwargs, unknown = config_from_args(margs, miles)
    for flag in unknown:
        fail(f"--{flag} is neither a megatron-core TransformerConfig field nor a Megatron-LM flag")
    report["arguments"] = len(margs)
    if plant:
        print(json.dumps(report))
        return
    module, function = dict(margs)["spec"].split()
    if module != f"{package}.plugin" or not hasattr(plugin, function):
        fail(f"--spec {module} {function} does not name the generated plugin function")
    model = gpt_model(spec, getattr(plugin, function), kwargs)
    tensors = synthetic_checkpoint(spec, out / "checkpoint")
    state = convert.load_hf(tensors.__getitem__, dtype=torch.float32)
    passthrough = {r.target for r in convert.weight_table.RULES if r.transform == "passthrough"}
    have = {n for n in model.state_dict() if not n.endswith("._extra_state")}
    for name in sorted(have ^ (set(state) - passthrough)):
        fail(f"{name}: in {'the model only' if name in have else 'the converter only'}")
    if not report["failures"]:
        model.load_state_dict({n: v for n, v in state.items() if n not in passthrough}, strict=False)
        fn = getattr(convert, f"convert_{common.snake(spec.name)}_to_hf")
        synced = {}
        for name, value in list(model.named_parameters()) + list(model.named_buffers()):
            if name in have:
                synced.update(dict(fn(None, f"module.module.{name}", value.detach())))
        expected = {n for n in tensors if n not in passthrough}
        report["failures"] += weight_sync_failures(synced, tensors, expected)
        report["synced_tensors"] = len(synced)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
