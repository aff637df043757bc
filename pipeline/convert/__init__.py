"""Checkpoint conversion: MXFP4 -> BF16 dequantization of a release, streamed file by file."""

from dayone.convert.mxfp4_to_bf16 import convert_files, files_for_rank, finalize, plan_all, prepare_output

__all__ = ["convert_files", "files_for_rank", "finalize", "plan_all", "prepare_output"]
