"""Pruned debug checkpoints: chosen layers (or a covering set), the first E experts, a config every tool accepts."""

from dayone.prune.layers import Selection, cover, parse_layers, select
from dayone.prune.prune import plan_prune, write_pruned

__all__ = ["Selection", "cover", "parse_layers", "plan_prune", "select", "write_pruned"]
