"""A shard header compared byte for byte with the compact JSON its tensors would be written as: no JSON parsed per entry.

The safetensors library (`serialize` in safetensors/src/tensor.rs, which transformers' save_pretrained calls) writes
a shard's tensors by dtype alignment descending (its Dtype enum's order: F32, BF16, I8, U8, ...), then by name, each
one's data right after the previous one's, as compact JSON `{"__metadata__":{...},"name":{"dtype":"BF16",
"shape":[7168],"data_offsets":[0,14336]},...}` padded with spaces to a multiple of 8 bytes. So
given the names in the header's order and the manifest's (shape, dtype, bytes) for each, the whole text is known,
offsets included; `proven_by_dtype` generates it and compares it whole. Equal texts are a proof at least as
strict as parsing the header and checking every entry: each tensor has the manifest's shape and dtype, the offsets
tile the data region, nothing else is there. (__metadata__, a few strings in any order, is parsed and checked.)
"""

from __future__ import annotations

import json
import re
from collections import Counter
from itertools import accumulate, chain, compress, islice, repeat
from operator import itemgetter
from pathlib import Path

from dayone.checkpoint.safetensors_header import check_metadata
from dayone.core.errors import InputError

_METADATA_KEY = '{"__metadata__":'
JSON_SPACE = " \t\n\r"
_NBYTES_OF = itemgetter(2)


def _refuse_float(token: str):
    raise ValueError(f"non-integer number {token}")  # no header field is a float: the plain reader names it


METADATA_DECODER = json.JSONDecoder(parse_float=_refuse_float, parse_constant=_refuse_float)


def tensors_start(text: str, path: Path) -> int | None:
    """Where the first tensor's name (its opening quote) is: after `{` and a valid compact __metadata__ member, if
    any; None when the header does not begin that way."""
    if text.startswith(_METADATA_KEY):
        try:
            metadata, end = METADATA_DECODER.raw_decode(text, len(_METADATA_KEY))
            check_metadata(metadata, path)
        except (ValueError, RecursionError, InputError):
            return None
        if text[end : end + 1] != ",":
            return None
        start = end + 1
    elif text.startswith("{"):
        start = 1
    else:
        return None
    return start if text[start : start + 1] == '"' else None


# A name as it stands before its entry in compact JSON. Only a guess at which names the header lists, in which order:
# the text generated from them is then compared whole, so a wrong guess (an escaped quote, a name that holds this
# pattern) is refused there, never accepted.
_LISTED_NAME = re.compile(r'"([^"]*+)":\{"dtype":"')


def listed_names(text: str, start: int) -> list[str]:
    """The tensor names of a compact header in the order it lists them, by one C-level regex pass."""
    return _LISTED_NAME.findall(text, start)


# The safetensors library's Dtype enum in declaration order ("increasing alignment"; safetensors/src/tensor.rs, the same
# at v0.8.0-rc.0 and on main; 0.8.0 is installed here): `prepare` sorts a shard's tensors by it descending, then by
# name (bytewise, as Python orders str), lays their data out in that order, serializes __metadata__ first (its keys in
# hash-map order) and pads the header with spaces to a multiple of 8 bytes. tests/checkpoint checks this against files
# the installed library writes.
SAFETENSORS_DTYPE_ORDER = (
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
    "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64",
)  # fmt: skip
_WRITTEN_BEFORE = {dtype: -rank for rank, dtype in enumerate(SAFETENSORS_DTYPE_ORDER)}


def safetensors_order(names: list[str], entries: list[tuple]) -> tuple[list[str], list[tuple]] | None:
    """`names` and their `entries` (shape, dtype, bytes) in the order the safetensors library writes them; None for a
    dtype it does not know. Sorted per dtype: a K3 shard holds three or four."""
    dtypes = list(map(itemgetter(1), entries))
    kinds = set(dtypes)
    if not kinds <= _WRITTEN_BEFORE.keys():
        return None
    entry_of = dict(zip(names, entries))
    ordered: list[str] = []
    for dtype in sorted(kinds, key=_WRITTEN_BEFORE.__getitem__):
        ordered += sorted(compress(names, map(dtype.__eq__, dtypes)))
    return ordered, list(map(entry_of.__getitem__, ordered))


def middle(entry: tuple) -> str:
    """'":{"dtype":"U8","shape":[3072,112],"data_offsets":[': an entry's text between its name and offsets."""
    shape = ",".join(map(str, entry[0]))
    return f'":{{"dtype":"{entry[1]}","shape":[{shape}],"data_offsets":['


def proven_by_dtype(text: str, start: int, names: list[str], entries: list[tuple], data_size: int) -> dict | None:
    """Bytes per dtype when `text` from `start` on is exactly the compact JSON of `names` with the manifest's
    `entries` (shape list, dtype, bytes), their data laid out in this order from 0 to `data_size`, then `}` and
    JSON whitespace (safetensors pads with spaces); None otherwise.

    The names must be printable with no quote or backslash (written as is in JSON): the caller checks it once for
    the whole manifest (ManifestRuns.plain_names)."""
    bounds = list(map(str, accumulate(map(_NBYTES_OF, entries), initial=0)))
    if bounds[-1] != str(data_size):
        return None
    ids = list(map(id, entries))  # an expert group's entries are a few shared tuples: work per distinct entry
    distinct = dict(zip(ids, entries))
    middles = {key: middle(entry) for key, entry in distinct.items()}
    quotes = chain(('"',), repeat(',"'))  # '"' before the first name, ',"' between entries
    pieces = zip(
        quotes, names, map(middles.__getitem__, ids), bounds, repeat(","), islice(bounds, 1, None), repeat("]}")
    )
    body = "".join(chain.from_iterable(pieces))
    end = start + len(body)
    if not text.startswith(body, start) or text[end : end + 1] != "}" or text[end + 1 :].strip(JSON_SPACE):
        return None
    by_dtype: dict[str, int] = {}
    for key, count in Counter(ids).items():
        _, dtype, nbytes = distinct[key]
        by_dtype[dtype] = by_dtype.get(dtype, 0) + count * nbytes
    return by_dtype
