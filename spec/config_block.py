"""The `dayone` block of config.json: the spec fields Hugging Face's config has no key for, namespaced.

to_hf_config writes vendor keys wherever the vendor config defines one, and a field here only where it does not and
the spec's value differs from what derivation assumes without it (so a spec at the release's values writes a config
like the release's, without the block). derive_spec reads it back; an unknown key in it is refused like any typo.
FIELDS maps each field of the block to the spec field it carries.
"""

from __future__ import annotations

from typing import Annotated

from dayone.core.errors import InputError
from dayone.spec.bounds import MAX_DIM, MAX_INTERMEDIATE
from dayone.spec.registry import validation_message
from dayone.spec.schema import Conventions, Count, Real, Strict
from pydantic import Field, ValidationError

KEY = "dayone"


class KDAFields(Strict):
    gate_rank: int | None = Count(MAX_DIM, default=None, description="kda.gate.rank; absent: the KDA head dim")
    output_gate_rank: int | None = Count(
        MAX_DIM, default=None, description="kda.output_gate.rank of a low_rank output gate; absent: the KDA head dim"
    )
    a_log_shape: tuple[Annotated[int, Count(MAX_DIM)], ...] | None = Field(
        default=None, min_length=1, max_length=8, description="kda.a_log_shape; absent: the conventions' layout"
    )
    norm_eps: float | None = Real(default=None, gt=0, lt=1, description="kda.norm_eps; absent: rms_norm_eps")


class MLAFields(Strict):
    norm_eps: float | None = Real(default=None, gt=0, lt=1, description="mla.norm_eps; absent: the conventions'")


class MoEFields(Strict):
    shared_intermediate_size: int | None = Count(
        MAX_INTERMEDIATE, default=None, description="absent: moe_intermediate_size x num_shared_experts"
    )


class DayoneBlock(Strict):
    kda: KDAFields = KDAFields()
    mla: MLAFields = MLAFields()
    moe: MoEFields = MoEFields()
    conventions: Conventions | None = Field(default=None, description="the spec's own conventions block")


# (block section, block field) -> the spec field it carries, as a path into the spec's data.
FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("kda", "gate_rank"): ("kda", "gate", "rank"),
    ("kda", "output_gate_rank"): ("kda", "output_gate", "rank"),
    ("kda", "a_log_shape"): ("kda", "a_log_shape"),
    ("kda", "norm_eps"): ("kda", "norm_eps"),
    ("mla", "norm_eps"): ("mla", "norm_eps"),
    ("moe", "shared_intermediate_size"): ("moe", "shared_intermediate_size"),
}


def read_block(config: dict, where: str) -> DayoneBlock:
    """config.json's `dayone` block, or an empty one."""
    data = config.get(KEY)
    if data is None:
        return DayoneBlock()
    if not isinstance(data, dict):
        raise InputError(f"{where}: {KEY} must be an object")
    try:
        return DayoneBlock.model_validate(data)
    except ValidationError as err:
        raise InputError(validation_message(err, f"{where}: {KEY}")) from None


def write_block(block: DayoneBlock) -> dict:
    """The block as config.json data, without the fields at their defaults (empty when nothing differs)."""
    return block.model_dump(mode="json", exclude_defaults=True)
