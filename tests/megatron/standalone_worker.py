"""Run by tests/megatron/test_standalone_packages.py with the python of a fresh venv that has the generated wheel and
its declared dependencies, and no dayone: import the package, build the model through the package's own provider,
load the synthetic checkpoint through the package's own loader, forward, and write per-token log-probs.

    python standalone_worker.py miles|megatron-bridge PACKAGE WORK_DIR CHECKS_DIR

WORK_DIR holds config.json (Miles: the model arguments, made into the config as Megatron-LM does by
check_miles.config_from_args from CHECKS_DIR, and the --spec function),
checkpoint/ (safetensors) and ids.json; the log-probs go to WORK_DIR/logprobs.json with what was imported. Nothing
of dayone is imported here (the report says whether it could have been).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import socket
import sys
from pathlib import Path


def check_module(name: str):
    """dayone's check_miles.py / check_bridge.py, loaded by path from the folder given: at module level they import
    only the standard library and torch, and the functions used here nothing of dayone."""
    spec = importlib.util.spec_from_file_location(name, Path(sys.argv[4]) / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class NoFlagCheck:
    """check_miles.config_from_args also names flags Megatron does not know; test_miles_plugin.py checks that."""

    @staticmethod
    def unknown_arguments(flags, fields):
        return []


def main() -> None:
    target, package, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from safetensors.torch import load_file

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state as ps

    ps.initialize_model_parallel(1, 1)
    report = {"dayone_importable": importlib.util.find_spec("dayone") is not None}
    importlib.import_module(f"{package}._dayone.adapters.megatron.cpu").install_cpu_standins()
    pkg = importlib.import_module(package)
    spec = importlib.import_module(f"{package}.spec_data").load_spec()
    if target == "miles":
        from megatron.core.models.gpt.gpt_model import GPTModel
        from megatron.core.transformer.transformer_config import MLATransformerConfig

        given = json.loads((work / "config.json").read_text())
        kwargs, _ = check_module("check_miles").config_from_args(given["args"], NoFlagCheck)
        config = MLATransformerConfig(**kwargs, use_cpu_initialization=True, transformer_impl="local",
                                      moe_token_dispatcher_type="allgather")  # fmt: skip
        plugin = importlib.import_module(f"{package}.plugin")
        block = getattr(plugin, given["spec_function"])(None, config, None)
        model = GPTModel(config, block, spec.vocab_size, spec.max_position_embeddings, position_embedding_type="none",
                         share_embeddings_and_output_weights=spec.tie_word_embeddings)  # fmt: skip
        loader = importlib.import_module(f"{package}.convert")
        table = loader.weight_table
    else:
        # megatron-bridge's package __init__ imports TransformerEngine: its parent packages are made empty and
        # model_bridge.py (register_bridge's module) stood in for by a recorder
        check_module("check_bridge").bypass_package_inits()
        from megatron.core.process_groups_config import ProcessGroupCollection

        bridge_class = pkg.register()
        provider = bridge_class().provider_bridge(None)
        provider.use_cpu_initialization = True
        provider.finalize()
        provider._pg_collection = ProcessGroupCollection.use_mpu_process_groups()
        model = provider.provide()
        table = importlib.import_module(f"{package}.weight_table")
    walk = importlib.import_module(f"{package}.walk")
    tensors = {}
    for shard in sorted((work / "checkpoint").glob("*.safetensors")):
        tensors |= load_file(shard)
    state = walk.to_target(table, tensors.__getitem__, walk.Parallel(), dtype=torch.float32)
    passthrough = {r.target for r in table.RULES if r.transform == "passthrough"}
    state = {n: v for n, v in state.items() if n not in passthrough}
    missing, unexpected = model.load_state_dict(state, strict=False)
    report["missing"] = [n for n in missing if not n.endswith("._extra_state")]
    report["unexpected"] = list(unexpected)
    ids = torch.tensor(json.loads((work / "ids.json").read_text()))
    model.eval()
    with torch.no_grad():
        logits = model(ids, position_ids=None, attention_mask=None)
    lp = F.log_softmax(logits.float(), -1)[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    report["logprobs"] = lp.tolist()
    report["dayone_imported"] = sorted(m for m in sys.modules if m.split(".")[0] == "dayone")
    report["megatron_bridge_imported"] = any(m.startswith("megatron.bridge") for m in sys.modules)
    (work / "logprobs.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
