"""Upper bounds for every count and size a spec or config.json can give, checked before anything is allocated.

Generous real-world limits (the largest open models of 2026 are far inside them) that keep the work any config can
cause bounded: a layer table, a tensor manifest, a layout expression all grow with these numbers.
"""

from __future__ import annotations

MAX_LAYERS = 1024  # decoder layers (Kimi K3: 93; the deepest open models: ~130)
MAX_EXPERTS = 4096  # routed experts per MoE layer (K3: 896)
MAX_EXPERT_INSTANCES = 1 << 18  # layers x routed experts: the expert part of a manifest (K3: 83k, 262k allowed)
MAX_HEADS = 1024  # attention heads of any kind
MAX_DIM = 1 << 16  # hidden size, head dims, LoRA ranks, latent widths (K3 hidden: 7168)
MAX_INTERMEDIATE = 1 << 20  # MLP / expert / fused shared-expert widths
MAX_VOCAB = 1 << 22  # vocabulary (the largest today: ~262k)
MAX_POSITIONS = 1 << 27  # context length (134M positions)
MAX_TOKEN_ID = (1 << 31) - 1  # token ids are int32 in every framework
MAX_SMALL = 1024  # conv kernel sizes, group sizes, patch sizes, shard-independent small counts
MAX_SHARDS = 100_000  # safetensors shards of one checkpoint
