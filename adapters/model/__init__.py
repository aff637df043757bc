"""The executable model a ModelSpec describes, in two tiers (reference fp32, fast bf16), with its weight loader.

from dayone.adapters.model import SpecModel, WeightLoader, Capture
model = SpecModel(spec, tier="reference")
WeightLoader(spec, tensors.__getitem__).load(model)
logits = model(input_ids)
"""

from dayone.adapters.model.cache import ModelCache
from dayone.adapters.model.capture import Capture
from dayone.adapters.model.config import TIERS, Tier
from dayone.adapters.model.model import SpecModel
from dayone.adapters.model.weights import WeightLoader, load_checkpoint_dir

__all__ = ["TIERS", "Capture", "ModelCache", "SpecModel", "Tier", "WeightLoader", "load_checkpoint_dir"]
