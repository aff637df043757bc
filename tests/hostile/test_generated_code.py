"""Hostile strings in every spec field the generators render: refused where they enter, and harmless even if one
got past the schema (the templates render strings as Python literals and names only as checked identifiers).

The proof for the second part is structural: a generation from a spec carrying hostile strings parses into the
same AST shape (constants aside) as the clean generation, or stops with an InputError before writing anything.
"""

from __future__ import annotations

import ast
import functools

import pytest
from dayone.adapters.targets import TARGETS, common, generator
from dayone.core.errors import InputError
from dayone.spec.derive import derive_spec
from dayone.spec.hf_config import to_hf_config
from dayone.spec.registry import load_spec, parse_spec, spec_to_dict

HOSTILE = (
    'Kimi"; __import__("os").system("touch /tmp/pwned"); X = "',
    "Kimi\nimport os\nos.system('id')\n#",
    "x'''\"\"\"\\",
    "class",
    "a.b(c)",
    "",
)
# Past the schema, one string carries every escape at once (quotes, triple quotes, newline, backslash, a call).
COMBINED = (HOSTILE[0] + HOSTILE[1] + HOSTILE[2],)

# (dotted path in the spec, rendered raw as a name somewhere) for every string a template reads.
STRING_FIELDS = (
    "hf.architecture",
    "hf.model_type",
    "hf.text_architecture",
    "hf.text_model_type",
    "checkpoint.prefix",
    "checkpoint.lm_head",
    "checkpoint.moe_block",
    "checkpoint.dense_block",
    "checkpoint.experts.gate",
    "release.repo",
)
TUPLE_FIELDS = ("checkpoint.float32", "quantization.ignore", "passthrough.prefixes")


def _hostile(field: str, payload: str):
    """The payload in the form the field takes (a prefix keeps its two parts, so the template takes the same
    branches as for "language_model.model.")."""
    if field in TUPLE_FIELDS:
        return (payload,)
    return (payload.replace(".", "_") or "a b") + ".model." if field == "checkpoint.prefix" else payload


def _set(data: dict, dotted: str, value) -> dict:
    *parents, leaf = dotted.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return data


def _with(spec, dotted: str, value):
    """spec with one nested field replaced, bypassing validation (model_copy does not validate)."""
    *parents, leaf = dotted.split(".")
    chain = [spec]
    for key in parents:
        chain.append(getattr(chain[-1], key))
    node = chain[-1].model_copy(update={leaf: value})
    for parent, key in zip(reversed(chain[:-1]), reversed(parents), strict=True):
        node = parent.model_copy(update={key: node})
    return node


class _DataAsOne(ast.NodeTransformer):
    """Every literal becomes one placeholder, containers of literals included: a tuple of 5 roles and one of 1 role
    are the same data, where a string that escaped its quotes would become names, calls and statements."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(None)

    def _collapse(self, node: ast.AST) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node, ast.Dict):
            children = [*node.keys, *node.values]
        else:
            children = [node.operand] if isinstance(node, ast.UnaryOp) else node.elts
        literal = all(child is None or isinstance(child, ast.Constant) for child in children)
        return ast.Constant(None) if literal and not isinstance(getattr(node, "ctx", None), ast.Store) else node

    visit_Dict = visit_List = visit_Tuple = visit_Set = visit_UnaryOp = _collapse


def _shape(text: str) -> str:
    """The AST with every literal blanked: what code the file runs, whatever its data says. Table rows are sorted by
    name in the generated file, so a renamed tensor may move: rows are compared as a set."""
    tree = _DataAsOne().visit(ast.parse(text))
    nodes = list(ast.walk(tree))
    for node in reversed(nodes):  # children first, so a row's key is already normalised
        if isinstance(node, ast.List | ast.Tuple):
            node.elts.sort(key=ast.dump)
    return ast.dump(tree, annotate_fields=False)


def _generate_all(spec) -> dict[str, str]:
    return {f"{t}/{path}": text for t in TARGETS for path, text in generator(t)(spec).items()}


@pytest.fixture(scope="module")
def unformatted(monkeypatch_module):
    # The AST is the same with or without ruff's formatting, and templates compile once: 30 generations in seconds.
    monkeypatch_module.setattr(common, "format_tree", lambda files: files)
    monkeypatch_module.setattr(common, "environment", functools.cache(common.environment))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def clean(unformatted):
    spec = load_spec("kimi-k3")
    files = _generate_all(spec)
    return spec, {path: _shape(text) for path, text in files.items() if path.endswith(".py")}


@pytest.mark.parametrize("field", STRING_FIELDS + TUPLE_FIELDS)
def test_the_schema_refuses_hostile_strings_where_they_enter(field):
    base = spec_to_dict(load_spec("kimi-k3"))
    for payload in HOSTILE[:3]:
        value = _hostile(field, payload)
        with pytest.raises(InputError) as err:
            parse_spec(_set(spec_to_dict(load_spec("kimi-k3")) | {}, field, value), "hostile.yaml")
        message = str(err.value)
        assert "\n" not in message and message.startswith("hostile.yaml: ")
        assert field.split(".")[-1] in message
    parse_spec(base, "clean.yaml")  # and the untouched spec still loads


@pytest.mark.parametrize("name", ["kimi-k3\nimport os", 'k3"; x', "K3", "-k3", "k3 k3"])
def test_spec_names_that_could_break_a_comment_or_a_file_name_are_refused(name):
    with pytest.raises(InputError, match="name"):
        parse_spec(spec_to_dict(load_spec("kimi-k3")) | {"name": name}, "hostile.yaml")


def test_a_config_architecture_that_is_not_a_name_is_an_input_error():
    config = to_hf_config(load_spec("kimi-linear-48b-a3b"))
    config["architectures"] = [HOSTILE[0]]
    with pytest.raises(InputError, match="architecture"):
        derive_spec(config, "x")


@pytest.mark.parametrize("field", STRING_FIELDS + TUPLE_FIELDS)
def test_hostile_strings_past_the_schema_add_no_code(clean, field):
    spec, clean_shapes = clean
    for payload in COMBINED:
        value = _hostile(field, payload)
        try:
            files = _generate_all(_with(spec, field, value))
        except InputError as err:
            assert "\n" not in str(err)  # a checked identifier refused it: nothing was generated
            continue
        shapes = {path: _shape(text) for path, text in files.items() if path.endswith(".py")}
        assert shapes.keys() == clean_shapes.keys()
        for path, shape in shapes.items():
            assert shape == clean_shapes[path], f"{field}={payload!r} changed the code of {path}"


def test_py_literals_round_trip_and_non_data_is_refused():
    for value in ('a"b\\c\n', 3, -1.5, True, None, ("x",), ["a", 1], {"k": ("v",)}):
        expected = tuple(value) if isinstance(value, list) else value
        assert ast.literal_eval(common.py_literal(value)) == expected
    with pytest.raises(InputError):
        common.py_literal(float("nan"))
    with pytest.raises(TypeError):
        common.py_literal(object())
    assert common.checked_identifier("KimiK3") == "KimiK3"
    for bad in ("import", "a b", "a;b", "1a", 5):
        with pytest.raises(InputError):
            common.checked_identifier(bad)
