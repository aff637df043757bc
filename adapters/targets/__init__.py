"""Target generators: each turns a spec into the files one framework needs (`files(spec) -> {path: text}`).

sglang           external model package (SGLANG_EXTERNAL_MODEL_PACKAGE), EntryClass, table-walking load_weights
vllm             plugin package, `vllm.general_plugins` entry point, lazy "module:Class" registration
miles            scripts/models/<name>.py (model_args) and the Megatron <-> HF converter
megatron-bridge  bridge module with a mapping registry built from the weight table
"""

from __future__ import annotations

from collections.abc import Callable

from dayone.core.vocabulary import TARGETS
from dayone.spec.schema import ModelSpec

__all__ = ["TARGETS", "generator"]


def generator(target: str) -> Callable[[ModelSpec], dict[str, str]]:
    from dayone.adapters.targets import megatron_bridge, miles, sglang, vllm

    return {"sglang": sglang.files, "vllm": vllm.files, "miles": miles.files, "megatron-bridge": megatron_bridge.files}[
        target
    ]
