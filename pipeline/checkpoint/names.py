"""Tensor and file names a checkpoint supplies, refused when no safetensors writer produces them.

A name reaches terminals, logs, HTML, generated code and file paths. One holding a control character (ESC, BEL, a
newline) recoloured the terminal or forged an "ok" line; a NUL or a lone surrogate (valid JSON: "\\ud800") raised
ValueError or UnicodeEncodeError far from the reader; a name of 300 characters gave "File name too long". torch
parameter names and Hugging Face shard names are printable text well under 255 characters, so these are refused
where they are read, naming the file and the offending character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dayone.core.errors import InputError

MAX_NAME_CHARS = 255  # a file name's limit on every common filesystem; torch's longest names are ~100
# C0 and C1 controls, DEL, the surrogate range (only lone surrogates survive JSON decoding into a str), and the
# Unicode line and paragraph separators, which some terminals and editors take as line ends.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")


def check_name(name: object, where: str, what: str = "tensor name") -> None:
    """InputError naming `where` when `name` is not text a writer produces."""
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: an empty or non-text {what}")
    bad = _UNPRINTABLE.search(name)
    if bad is not None:
        raise InputError(
            f"{where}: {what} {_shown(name)} holds U+{ord(bad.group()):04X} (a control character or lone surrogate); "
            "no safetensors writer produces it"
        )
    if len(name) > MAX_NAME_CHARS:
        raise InputError(f"{where}: {what} {_shown(name)} is {len(name)} characters long (at most {MAX_NAME_CHARS})")


def check_names(names: Iterable[str], where: str, what: str = "tensor name") -> None:
    """check_name over many names: one regex pass over them all, and the per-name check only to name the first bad
    one (a K3 release has ~500k names)."""
    names = list(names)
    if not names:
        return
    # Joining cannot make a refused character out of allowed ones, nor hide one.
    plain = all(type(n) is str for n in names) and "" not in names
    if plain and _UNPRINTABLE.search("".join(names)) is None and max(map(len, names)) <= MAX_NAME_CHARS:
        return
    for name in names:
        check_name(name, where, what)


def _shown(name: str) -> str:
    """The name escaped and cut for a one-line message: repr escapes controls and surrogates."""
    shown = repr(name)
    return shown if len(shown) <= 80 else shown[:60] + "..." + shown[-12:]
