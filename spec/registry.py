"""Shipped specs (spec/models/*.yaml) and spec files: list, load by NAME or FILE, write back as YAML."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from dayone.core import untrusted_json, untrusted_yaml
from dayone.core.errors import InputError

if TYPE_CHECKING:  # pydantic and the schema are imported where a spec is validated: `spec list` needs neither
    from dayone.spec.schema import ModelSpec
    from pydantic import ValidationError

MODELS_DIR = Path(__file__).parent / "models"


def list_specs() -> list[str]:
    """Names of the shipped specs."""
    return sorted(p.stem for p in MODELS_DIR.glob("*.yaml"))


def shipped_summaries() -> list[dict]:
    """Name, architecture and layer count of every shipped spec, read from its YAML without validating it: the
    shipped specs are validated by the tests and by every command that loads one. A file without these fields is
    loaded in full, so that what is wrong is reported as for any spec."""
    rows = []
    for name in list_specs():
        data = untrusted_yaml.read(MODELS_DIR / f"{name}.yaml")
        hf = data.get("hf") if isinstance(data, dict) else None
        architecture = hf.get("architecture") if isinstance(hf, dict) else None
        layers = data.get("num_layers") if isinstance(data, dict) else None
        if not (isinstance(architecture, str) and type(layers) is int):
            spec = load_spec(name)
            architecture, layers = spec.hf.architecture, spec.num_layers
        rows.append({"name": name, "architecture": architecture, "num_layers": layers})
    return rows


def validation_message(err: ValidationError, where: str) -> str:
    """The first pydantic error as one line: file, field path, what is wrong."""
    first = err.errors()[0]
    loc = ".".join(str(part) for part in first["loc"]) or "(top level)"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{where}: {loc}: {first['msg']}{more}"


def parse_spec(data: object, where: str) -> ModelSpec:
    if not isinstance(data, dict):
        raise InputError(f"{where}: a spec must be a mapping of fields")
    from dayone.spec.kernel_limits import check_kernel_limits
    from dayone.spec.schema import ModelSpec
    from pydantic import ValidationError

    try:
        spec = ModelSpec.model_validate(data)
    except ValidationError as err:
        raise InputError(validation_message(err, where)) from None
    check_kernel_limits(spec, where)  # what the schema allows but no kernel build can serve
    return spec


NAMING_RULE = (
    "a spec name is 1-64 lowercase letters, digits, '.' and '-', starting with a letter or digit "
    "(spec/models/<name>.yaml)"
)


def unknown_spec_message(name: str) -> str:
    """One line for a name that is neither a shipped spec nor a file: the closest shipped names, and the naming
    rule (a mistyped `Kimi_K3` learns why `kimi-k3` is spelled so)."""
    import difflib

    shipped = list_specs()
    folded = name.lower().replace("_", "-")
    close = difflib.get_close_matches(folded, shipped, n=2, cutoff=0.6)
    guess = f"did you mean {' or '.join(close)}? " if close else ""
    return f"{name}: no such spec and no such file; {guess}{NAMING_RULE}; shipped: {', '.join(shipped)}"


def load_spec(name_or_file: str | Path) -> ModelSpec:
    """A shipped spec by name (`kimi-k3`) or a YAML/JSON spec file by path."""
    path = Path(name_or_file)
    if not path.suffix and (MODELS_DIR / f"{name_or_file}.yaml").is_file():
        path = MODELS_DIR / f"{name_or_file}.yaml"
    if not path.is_file():
        raise InputError(unknown_spec_message(str(name_or_file)))
    # Both readers bound the size, depth and numbers before anything walks the data; the YAML one refuses the
    # aliases and merge keys that make a short file expand without end.
    if path.suffix == ".json":
        data = untrusted_json.read(path, max_bytes=untrusted_yaml.MAX_BYTES)
    else:
        data = untrusted_yaml.read(path)
    return parse_spec(data, str(path))


def spec_to_dict(spec: ModelSpec) -> dict:
    """The spec as plain data, defaults left out so the YAML stays as short as a hand-written one."""
    return spec.model_dump(mode="json", exclude_defaults=True)


def spec_to_yaml(spec: ModelSpec) -> str:
    return yaml.safe_dump(spec_to_dict(spec), sort_keys=False, default_flow_style=None, width=120)


def json_schema() -> dict:
    """The JSON schema editors use to check spec files (spec/schema.json is this, written out)."""
    from dayone.spec.schema import ModelSpec

    return ModelSpec.model_json_schema()
