"""Checkpoint I/O: resolve a folder or Hub repo, read headers, check coverage against a manifest, write shards."""

from dayone.checkpoint.coverage import Coverage, check_coverage
from dayone.checkpoint.reader import Checkpoint
from dayone.checkpoint.resolve import open_checkpoint

__all__ = ["Checkpoint", "Coverage", "check_coverage", "open_checkpoint"]
