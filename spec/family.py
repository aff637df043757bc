"""Family conventions as data: which conventions a model type uses, found in files or in a spec, `extends` resolved.

The search path, first match wins: folders given by the caller (`spec derive --conventions DIR`), then the folders
in $DAYONE_CONVENTIONS (separated by the OS path separator), then the shipped spec/conventions/. A file is named
after its model type (kimi_k4.yaml); what is in it is data: parsed by dayone.core.untrusted_yaml (no aliases or merge keys),
at most MAX_FILE_BYTES, checked by the schema's Conventions model, and an `extends` chain at most MAX_EXTENDS long.
Within a `searching` block (a command) each model type's file is looked up once: the derivation and the line that
reports which file it used get the same file, even if the search path changes in between.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from dayone.core import untrusted_yaml
from dayone.core.errors import InputError
from dayone.spec.registry import validation_message
from dayone.spec.schema import MODEL_TYPE_PATTERN, Conventions
from pydantic import ValidationError

SHIPPED_DIR = Path(__file__).parent / "conventions"
ENV_VAR = "DAYONE_CONVENTIONS"
MAX_FILE_BYTES = 64 * 1024  # a conventions file is a dozen lines
MAX_EXTENDS = 8
_MODEL_TYPE = re.compile(MODEL_TYPE_PATTERN)
REQUIRED = tuple(name for name in Conventions.model_fields if name != "extends")
# The files found within the current `searching` block: (model type, extra folders) -> path, or None for none found.
_FOUND: ContextVar[dict[tuple[str, tuple[str, ...]], Path | None] | None] = ContextVar(
    "conventions_found", default=None
)


@dataclass(frozen=True)
class FamilyConventions:
    """The resolved conventions of one model type; `source` says where they came from (a file, or a spec block),
    `chain` every file an `extends` passed through, the model type's own first."""

    model_type: str
    source: str
    chain: tuple[str, ...]
    architecture: str
    text_config: bool
    prefix: str
    lm_head: str
    float32: tuple[str, ...]
    a_log_layout: str
    a_log_pad_to: int
    passthrough: tuple[str, ...]
    mla_norm_eps: float | str
    mla_use_nope: bool


def search_path(extra: Sequence[Path] = ()) -> list[Path]:
    env = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
    return [*map(Path, extra), *env, SHIPPED_DIR]


@contextmanager
def searching(folders: Sequence[Path]) -> Iterator[None]:
    """Within the block, `folders` come first on every search, as if put at the front of $DAYONE_CONVENTIONS
    (so derivations deep inside a command, such as a checkpoint's, see them too), and a model type's file is looked
    up once: a later search for it in the block (the command saying which file it used) gets the same answer."""
    before = os.environ.get(ENV_VAR)
    if folders:
        os.environ[ENV_VAR] = os.pathsep.join([*map(str, folders), *([before] if before else [])])
    found = _FOUND.set({})
    try:
        yield
    finally:
        _FOUND.reset(found)
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before


def known_model_types(extra: Sequence[Path] = ()) -> list[str]:
    """Every model type a conventions file on the search path describes."""
    found = set()
    for folder in search_path(extra):
        if folder.is_dir():
            found.update(p.stem for p in folder.glob("*.yaml") if _MODEL_TYPE.fullmatch(p.stem))
    return sorted(found)


def conventions_for(
    model_type: object, extra: Sequence[Path] = (), inline: Conventions | None = None, where: str = "config.json"
) -> FamilyConventions:
    """The conventions of `model_type`: `inline` (a spec's or config's own block) when given, else its file.

    An unknown model type is an InputError naming it and the known ones; so is a bad file, naming the file."""
    if inline is not None:
        return _resolve(str(model_type), inline, f"{where}: conventions", extra, ())
    if not isinstance(model_type, str) or not _MODEL_TYPE.fullmatch(model_type) or not _find(model_type, extra):
        raise InputError(f"{where}: model_type {model_type!r} is not supported ({_known(extra)})")
    return _from_file(model_type, extra, (), where)


def lineage(model_type: str, inline: Conventions | None = None, extra: Sequence[Path] = ()) -> tuple[str, ...]:
    """`model_type` and the model types its conventions extend, nearest first ("kimi_k4" -> kimi_k4, kimi_k3)."""
    found = conventions_for(model_type, extra, inline)
    return (model_type, *(Path(source).stem for source in found.chain[1:]))


def _known(extra: Sequence[Path]) -> str:
    return f"known: {', '.join(known_model_types(extra)) or 'none'}; a new one needs a conventions file"


def _find(model_type: str, extra: Sequence[Path]) -> Path | None:
    found, key = _FOUND.get(), (model_type, tuple(map(str, extra)))
    if found is not None and key in found:
        return found[key]
    path = next((p for folder in search_path(extra) if (p := folder / f"{model_type}.yaml").is_file()), None)
    if found is not None:
        found[key] = path
    return path


def _from_file(model_type: str, extra: Sequence[Path], visited: tuple[str, ...], referrer: str) -> FamilyConventions:
    if model_type in visited:
        raise InputError(f"{referrer}: extends {model_type!r} makes a cycle ({' -> '.join([*visited, model_type])})")
    path = _find(model_type, extra)
    if path is None:
        raise InputError(f"{referrer}: extends {model_type!r}, which has no conventions file ({_known(extra)})")
    return _resolve(model_type, _read(path), str(path), extra, (*visited, model_type))


def _resolve(
    model_type: str, own: Conventions, source: str, extra: Sequence[Path], visited: tuple[str, ...]
) -> FamilyConventions:
    fields: dict = {}
    chain: tuple[str, ...] = (source,)
    if own.extends is not None:
        if len(visited) >= MAX_EXTENDS:
            raise InputError(f"{source}: extends chain longer than {MAX_EXTENDS} ({' -> '.join(visited)})")
        parent = _from_file(own.extends, extra, visited, source)
        fields = {name: getattr(parent, name) for name in REQUIRED}
        chain = (source, *parent.chain)
    fields.update(own.model_dump(exclude_none=True, exclude={"extends"}))
    missing = [name for name in REQUIRED if name not in fields]
    if missing:
        raise InputError(f"{source}: missing field {missing[0]!r} (state it, or extends a model type that has it)")
    fields["float32"], fields["passthrough"] = tuple(fields["float32"]), tuple(fields["passthrough"])
    return FamilyConventions(model_type=model_type, source=source, chain=chain, **fields)


def _read(path: Path) -> Conventions:
    """One conventions file, parsed as untrusted data."""
    data = untrusted_yaml.read(path, max_bytes=MAX_FILE_BYTES)
    if not isinstance(data, dict):
        raise InputError(f"{path}: a conventions file must be a mapping of fields")
    try:
        return Conventions.model_validate(data)
    except ValidationError as err:
        raise InputError(validation_message(err, str(path))) from None
