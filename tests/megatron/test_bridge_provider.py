"""The generated Megatron-Bridge package in the megatron peer (`dayone.programs.megatron.check_bridge`): megatron-bridge 0.3.1's
MLAModelProvider builds megatron-core's GPTModel from the generated provider with exactly the weight map's tensors,
and the registry of real mapping classes maps every parameter and checkpoint tensor, bitwise both ways. Registration
(`MegatronModelBridge.register_bridge`) is not run: its module imports TransformerEngine."""

from __future__ import annotations

import json
import subprocess
import sys

from dayone.adapters.megatron.peer import peer_path
from dayone.programs.megatron.runner import peer_environment

PEER = peer_path()


def test_bridge_provider_builds_the_model_and_maps_every_tensor(tmp_path):
    assert (PEER / "omegaconf-2.3.0.dist-info").is_dir(), f"run bash .ci/setup.d/30-megatron.sh ({PEER})"
    env = peer_environment(PEER)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "dayone.programs.megatron.check_bridge", "kimi-k3", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    line = next((x for x in proc.stdout.splitlines() if x.startswith("{")), None)
    assert line is not None, proc.stderr[-3000:]
    report = json.loads(line)
    print(report)
    assert report["failures"] == []
    assert report["registered"] == [{"source": "KimiK3ForConditionalGeneration", "target": "GPTModel",
                                     "provider": "MLAModelProvider", "model_type": "kimi_k3"}]  # fmt: skip
    assert report["mapped_parameters"] > 100
    assert {"GatedMLPMapping", "ColumnParallelMapping", "RowParallelMapping"} <= set(report["mapping_classes"])
    assert report["not_run"] and "transformer_engine" in report["not_run"][0]
