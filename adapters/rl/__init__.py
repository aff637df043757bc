"""RL in our own runtime: the trainer's forward (Megatron layout, packed sequences, autograd) against the rollout
engine's (prefill + decode with a cache), compared as Miles compares them.

    from dayone.adapters.rl import TrainingModel, rollout, parity
    train = TrainingModel.from_checkpoint(spec, tensors)            # params converted by the generated table
    report = parity(spec, tensors, prompts, response_len=6)          # {"train_rollout_logprob_abs_diff": ...}
"""

from dayone.adapters.rl.parity import parity, rl_metrics
from dayone.adapters.rl.rollout import Rollout, rollout
from dayone.adapters.rl.training import TrainingModel

__all__ = ["Rollout", "TrainingModel", "parity", "rl_metrics", "rollout"]
