"""The token sequences a validation runs on (teacher forcing: the same ids go through both sides).

--tokens FILE: a JSON list of token-id lists, one per sequence, all the same length.
--tokens IDS:  a comma-separated list of ids, one sequence.
Without it: BUILTIN_SHAPE ids drawn from a fixed generator over the whole vocabulary. 72 tokens cross KDA's
64-token chunk boundary and leave a partial chunk, so the chunked kernel's state hand-over is exercised.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from dayone.core import untrusted_json
from dayone.core.errors import InputError

BUILTIN_SHAPE = (2, 72)
BUILTIN_SEED = 20260727
_ID_LIST = re.compile(r"^\s*\d+(\s*,\s*\d+)*\s*,?\s*$")


def builtin_tokens(vocab_size: int) -> torch.Tensor:
    """[2, 72] int64, the same for every run of a vocabulary size."""
    gen = torch.Generator().manual_seed(BUILTIN_SEED)
    return torch.randint(0, vocab_size, BUILTIN_SHAPE, generator=gen)


def parse_tokens(arg: str | None, vocab_size: int) -> tuple[torch.Tensor, str]:
    """(input ids [B, T] int64, where they came from) for a --tokens value (None: the built-in set)."""
    if arg is None:
        return builtin_tokens(vocab_size), "builtin"
    path = Path(arg)
    if _is_file(path):
        rows, where = _read_json(path), str(path)
    elif _ID_LIST.match(arg):
        try:
            rows, where = [[int(x) for x in arg.replace(" ", "").rstrip(",").split(",")]], "--tokens"
        except ValueError:  # Python refuses integers of more than 4300 digits
            raise InputError("--tokens: a token id has too many digits") from None
    else:
        raise InputError(f"--tokens {arg!r}: neither a file nor a comma-separated list of token ids")
    ids = _as_tensor(rows, where)
    check_ids(ids, vocab_size, where)
    return ids, where


def check_ids(ids: torch.Tensor, vocab_size: int, where: str) -> None:
    bad = (ids < 0) | (ids >= vocab_size)
    if bool(bad.any()):
        b, t = (int(x) for x in torch.nonzero(bad)[0])
        raise InputError(
            f"{where}: token id {int(ids[b, t])} at [{b}, {t}] is outside the vocabulary (0..{vocab_size - 1})"
        )


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a long id list is not a file name (ENAMETOOLONG)
        return False


def _read_json(path: Path) -> list:
    return untrusted_json.read(path)


INT64 = 1 << 63


def _as_tensor(rows: object, where: str) -> torch.Tensor:
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
        raise InputError(f"{where}: expected a non-empty list of token-id lists")
    for b, row in enumerate(rows):
        if not row:
            raise InputError(f"{where}: sequence {b} is empty")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in row):
            raise InputError(f"{where}: sequence {b} holds something other than integer ids")
        if not all(-INT64 <= x < INT64 for x in row):  # torch.tensor would overflow; check_ids names the id
            raise InputError(f"{where}: sequence {b} holds an id beyond int64")
        if len(row) != len(rows[0]):
            raise InputError(
                f"{where}: sequence {b} has {len(row)} tokens, sequence 0 has {len(rows[0])} (all must be equal)"
            )
    return torch.tensor(rows, dtype=torch.int64)
