"""Serving plan: does the model fit on N GPUs, how much memory is left for requests, and the batch-1 decode bound.

Every figure is arithmetic on the manifest and the GPU's datasheet numbers, shown with its inputs so a reader can
check it: the decode bound is weight bytes read per token over aggregate HBM bandwidth (no kernel is that fast).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dayone.spec.manifest import Manifest, build_manifest
from dayone.spec.params import count_params, decode_bytes_per_token
from dayone.spec.schema import ModelSpec


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int  # HBM capacity
    hbm_bytes_per_s: float


GPUS = {
    "h100": GPU("H100 SXM", 80 * 10**9, 3.35e12),
    "h200": GPU("H200", 141 * 10**9, 4.8e12),
    "b200": GPU("B200", 180 * 10**9, 8.0e12),
    "gb300": GPU("GB300", 288 * 10**9, 8.0e12),
}
# Fraction of HBM an engine gives to weights + cache (SGLang's mem_fraction_static is ~0.9 on large GPUs); the rest
# is activations, CUDA graphs and the allocator's slack.
MEMORY_FRACTION = 0.9
PLAN_CONTEXT_TOKENS = 8192  # the request length used for "requests that fit"


@dataclass(frozen=True)
class Plan:
    spec: str
    gpu: str
    gpus: int
    params_total: int
    params_activated: int
    stored_bytes_by_dtype: dict[str, int]
    stored_bytes: int
    served_bytes: int
    served_note: str
    kda_state_bytes_per_request: int
    mla_cache_bytes_per_token: int
    usable_bytes: int
    free_bytes_for_requests: int
    fits: bool
    min_gpus: int  # of this GPU kind
    min_gpus_by_kind: dict[str, int]  # the smallest count that fits, for every GPU kind in GPUS
    requests_at_context: int
    context_tokens: int
    decode_bytes_per_token: int
    aggregate_hbm_bytes_per_s: float
    decode_bound_tokens_per_s: float

    def as_dict(self) -> dict:
        return asdict(self)

    def smallest_fits(self) -> str:
        """ "the smallest counts that fit are 22 x h100, 13 x h200, ...": what a plan that does not fit says."""
        return "the smallest counts that fit are " + ", ".join(f"{n} x {k}" for k, n in self.min_gpus_by_kind.items())


def kda_state_bytes(spec: ModelSpec) -> int:
    """Recurrent state (H x K x V fp32) plus the conv window ((W-1) x 3 x H*K in the activation dtype, bf16)."""
    if spec.kda is None:
        return 0
    k = spec.kda
    layers = spec.attention_kinds.count("kda")
    state = k.num_heads * k.head_dim * k.head_dim * 4
    conv = (k.conv_kernel_size - 1) * 3 * k.num_heads * k.head_dim * 2
    return layers * (state + conv)


def mla_cache_bytes_per_token(spec: ModelSpec) -> int:
    """The latent (kv_lora_rank) plus the shared key part (rope dims), bf16, per MLA layer."""
    if spec.mla is None:
        return 0
    return spec.attention_kinds.count("mla") * (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) * 2


def smallest_fit(served_bytes: int, device: GPU) -> int:
    """The fewest GPUs of `device` whose usable memory holds the weights with room left for requests (the plan's
    `fits`: usable - served > 0)."""
    count = max(1, math.ceil(served_bytes / (device.memory_bytes * MEMORY_FRACTION)))
    while int(count * device.memory_bytes * MEMORY_FRACTION) <= served_bytes:  # an exact fit leaves no room
        count += 1
    return count


def make_plan(spec: ModelSpec, gpu: str = "h200", gpus: int | None = 8, manifest: Manifest | None = None) -> Plan:
    """The plan on `gpus` GPUs of kind `gpu`; gpus=None: on the smallest count of that kind that fits."""
    manifest = manifest or build_manifest(spec)
    device = GPUS[gpu]
    counts = count_params(spec, manifest)
    by_dtype = manifest.bytes_by_dtype()
    stored = sum(by_dtype.values())
    # Engines serve MXFP4 experts packed (native FP4 on Blackwell, dequantized in-kernel on Hopper), so the served
    # weights are the stored ones; the vision tower is served too.
    served = stored
    smallest = {kind: smallest_fit(served, d) for kind, d in GPUS.items()}
    gpus = smallest[gpu] if gpus is None else gpus
    note = "as stored: MXFP4 experts stay packed" if spec.quantization else "as stored"
    usable = int(gpus * device.memory_bytes * MEMORY_FRACTION)
    free = usable - served
    per_request = kda_state_bytes(spec) + PLAN_CONTEXT_TOKENS * mla_cache_bytes_per_token(spec)
    read = decode_bytes_per_token(spec, manifest)
    aggregate = gpus * device.hbm_bytes_per_s
    return Plan(
        spec=spec.name,
        gpu=gpu,
        gpus=gpus,
        params_total=counts.total,
        params_activated=counts.activated,
        stored_bytes_by_dtype=by_dtype,
        stored_bytes=stored,
        served_bytes=served,
        served_note=note,
        kda_state_bytes_per_request=kda_state_bytes(spec),
        mla_cache_bytes_per_token=mla_cache_bytes_per_token(spec),
        usable_bytes=usable,
        free_bytes_for_requests=free,
        fits=free > 0,
        min_gpus=smallest[gpu],
        min_gpus_by_kind=smallest,
        requests_at_context=max(0, free // per_request) if per_request else 0,
        context_tokens=PLAN_CONTEXT_TOKENS,
        decode_bytes_per_token=read,
        aggregate_hbm_bytes_per_s=aggregate,
        decode_bound_tokens_per_s=aggregate / read,
    )
