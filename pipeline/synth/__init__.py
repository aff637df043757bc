"""Synthetic checkpoints with real weights, in a release's exact format, before the release exists.

    spec = scaled_spec(load_spec("kimi-k3"), "tiny")          # widths scaled, structure kept
    spec = scaled_spec(load_spec("kimi-k3"), "faithful")      # every per-head / per-expert width kept, fewer layers
    write_synthetic(spec, "out/k3-tiny", seed=0)               # names, dtypes, shards, config.json, MXFP4 experts

Weights are drawn per tensor from (seed, name), scaled so activations stay well-scaled through every layer
(see draw.py for the reasoning behind each scale).
"""

from dayone.synth.draw import WeightDraw
from dayone.synth.faithful import faithful_spec
from dayone.synth.scale import SCALE_NAMES, SCALES, Scale, scaled_spec
from dayone.synth.write import SyntheticData, write_synthetic

__all__ = [
    "SCALES",
    "SCALE_NAMES",
    "Scale",
    "SyntheticData",
    "WeightDraw",
    "faithful_spec",
    "scaled_spec",
    "write_synthetic",
]
