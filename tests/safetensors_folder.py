"""Every tensor of a folder of safetensors files, for tests that compare what a command wrote."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file


def read_folder(folder: Path) -> dict[str, torch.Tensor]:
    """{name: tensor} over the folder's *.safetensors files (not its subfolders), read in file-name order."""
    tensors: dict[str, torch.Tensor] = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        tensors.update(load_file(path))
    return tensors
