"""The one HF config <-> spec table (dayone.spec.hf_keys) both ways: spec -> config -> spec is the identity on the
shipped specs, config -> spec -> config keeps every mapped key of the published configs, and the table itself names
real spec fields, each once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.hf_keys import CONFIG_MAPPING, TEXT_CONFIG, VISION, lookup
from dayone.spec.registry import load_spec
from dayone.spec.schema import ModelSpec
from pydantic import BaseModel

# copies of /work/shared/reference/*.config.json, the configs the releases publish
PUBLISHED = Path(__file__).resolve().parents[1] / "data"
MODELS = ["kimi-k3", "kimi-linear-48b-a3b"]


def published(name: str) -> dict:
    return json.loads((PUBLISHED / f"{name}.config.json").read_text())


def scope(config: dict, hf: str) -> dict:
    """Where a key lives: vision_config and the token ids from the top, the rest in the text config."""
    if hf.startswith(VISION + ".") or TEXT_CONFIG not in config:
        return config
    return config[TEXT_CONFIG]


def mapped_values(config: dict) -> dict[str, object]:
    """spec path -> the value a config gives it under any of the key's names ({} for keys the config lacks)."""
    out = {}
    for k in CONFIG_MAPPING:
        for name in k.names:
            found, value = lookup(scope(config, k.hf), name)
            if not found and k.spec.startswith("token_ids."):
                found, value = lookup(config, name)  # a composite config keeps the token ids at its top
            if found:
                out[k.spec] = value
                break
    return out


@pytest.mark.parametrize("name", MODELS)
def test_spec_config_spec_is_the_identity(name):
    spec = load_spec(name)
    config = json.loads(json.dumps(to_hf_config(spec)))
    back = derive_spec(config, name, num_shards=spec.release.num_shards)
    assert back.model_dump(exclude={"release"}) == spec.model_dump(exclude={"release"})


# Keys of a section the spec does not hold: Kimi Linear publishes rope_theta for an MLA that is NoPE
# (mla_use_nope: true), so the spec has no mla.rope and the key, which nothing reads, is not written back.
UNUSED = {"kimi-k3": {}, "kimi-linear-48b-a3b": {"mla.rope.theta": 10000.0}}


@pytest.mark.parametrize("name", MODELS)
def test_config_spec_config_keeps_every_mapped_key(name):
    config = published(name)
    given = mapped_values(config)
    assert len(given) >= 30  # the published configs use most of the table: the test is not vacuous
    written = mapped_values(to_hf_config(derive_spec(config, name)))
    # a null the writer leaves out (q_lora_rank of a model without the query down-projection) reads back as null
    lost = {path: value for path, value in given.items() if written.get(path) != value and value is not None}
    assert lost == UNUSED[name]


def test_transformers5_names_are_written_back_as_the_published_ones():
    """Aliases are read, never written: a config that says num_local_experts comes back saying num_experts."""
    config = published("kimi-linear-48b-a3b")
    config["num_local_experts"] = config.pop("num_experts")
    written = to_hf_config(derive_spec(config, "x"))
    assert written["num_experts"] == 256 and "num_local_experts" not in written


def _field(model: type[BaseModel], path: str) -> bool:
    """Does the dotted path name a field of the schema (through optional and union-typed sections)?"""
    head, _, rest = path.partition(".")
    if head not in model.model_fields:
        return False
    if not rest:
        return True
    annotation = model.model_fields[head].annotation
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    for candidate in list(candidates):
        candidates += getattr(candidate, "__args__", ())
    models = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
    return any(_field(m, rest) for m in models)


def test_every_key_names_a_spec_field_once():
    assert [k.spec for k in CONFIG_MAPPING if not _field(ModelSpec, k.spec)] == []
    specs = [k.spec for k in CONFIG_MAPPING]
    names = [name for k in CONFIG_MAPPING for name in k.names]
    assert len(set(specs)) == len(specs) and len(set(names)) == len(names)
