"""A guard for tests of code that is handed typed objects: every path- or name-based way to open a checkpoint or make
a spec raises while it is on, so code that re-opens the checkpoint it was given (by its path) or re-derives the spec
(from config.json, a spec name or file) fails the test instead of quietly reading the files again."""

from __future__ import annotations

import pytest

# module -> names: the public entries and the functions they call through their module's globals, so a re-open
# through any of them is caught (open_checkpoint reaches open_local through resolve's namespace, spec_for_checkpoint
# reaches derive_spec and load_spec through spec_source's).
LOADERS = {
    "dayone.checkpoint": ("open_checkpoint",),
    "dayone.checkpoint.resolve": ("open_checkpoint", "open_local"),
    "dayone.checkpoint.reader": ("open_local",),
    "dayone.checkpoint.spec_source": ("spec_for_checkpoint", "derive_spec", "load_spec"),
    "dayone.spec.registry": ("load_spec", "parse_spec"),
    "dayone.spec.derive": ("derive_spec",),
}


def forbid_reparsing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every loader in LOADERS raise; returns the list of the ones called (for the assertion message)."""
    import importlib

    called: list[str] = []
    for module_name, names in LOADERS.items():
        module = importlib.import_module(module_name)
        for name in names:

            def refuse(*args, _name=f"{module_name}.{name}", **kwargs):
                called.append(_name)
                raise AssertionError(f"{_name} called with {args!r}: the caller's typed object was read again")

            monkeypatch.setattr(module, name, refuse)
    return called
