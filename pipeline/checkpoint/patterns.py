"""Group tensor names that differ only in their numbers: 5,376 missing expert scales read as one line,
`layers.{1..92}.block_sparse_moe.experts.{0..895}.w2.weight_scale`."""

from __future__ import annotations

import re
from collections import defaultdict

_NUMBER = re.compile(r"(?<=\.)\d+(?=\.|$)")


def group_names(names: list[str] | set[str]) -> list[str]:
    """Collapse names by template (each dotted integer field a placeholder); a template seen once stays literal."""
    groups: dict[str, list[list[int]]] = defaultdict(list)
    for name in names:
        numbers = [int(m) for m in _NUMBER.findall(name)]
        literal = name.replace("{", "{{").replace("}", "}}")  # braces in a name are text, not placeholders
        groups[_NUMBER.sub("{}", literal)].append(numbers)
    out = []
    for template, rows in groups.items():
        if len(rows) == 1:
            out.append(template.format(*rows[0]))
            continue
        fields = [_ranges(sorted({row[i] for row in rows})) for i in range(len(rows[0]))]
        out.append(template.format(*fields))
    return sorted(out)


def _ranges(values: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '{0..2,5,7..8}'; a single value stays bare."""
    if len(values) == 1:
        return str(values[0])
    spans: list[str] = []
    start = prev = values[0]
    for v in values[1:] + [None]:  # type: ignore[list-item]
        if v is not None and v == prev + 1:
            prev = v
            continue
        spans.append(str(start) if start == prev else f"{start}..{prev}")
        if v is not None:
            start = prev = v
    return "{" + ",".join(spans) + "}"
