"""The one weight map: every checkpoint tensor -> a framework parameter, with its transform and parallel rule.

    from dayone.adapters.weightmap import build_weight_map, walk
    wm = build_weight_map(spec, "megatron")          # or "inference" (SGLang), "vllm"
    shard = walk.to_target(wm, tensors.__getitem__, walk.Parallel(tp_rank=1, tp_size=2))
Every generated loader and converter walks a table rendered from this map (see walk.py, shipped with them).
"""

from dayone.adapters.weightmap.build import WeightMap, build_weight_map, layer_groups
from dayone.adapters.weightmap.layouts import TARGET_LAYOUT

__all__ = ["TARGET_LAYOUT", "WeightMap", "build_weight_map", "layer_groups"]
