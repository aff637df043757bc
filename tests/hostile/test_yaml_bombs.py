"""Issue 25 item 2: every YAML a user gives (spec files, conventions files) goes through one loader that refuses
aliases and merge keys, and bounds size and depth, before anything walks the data. A "billion laughs" spec hung
`spec show`, `plan` and `inspect --spec`; a merge-key bomb took 31.8 s.

The commands run as a user runs them (a subprocess with a deadline): without the defence the alias bomb expands to
9**9 nodes and the deadline kills it, which fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cli_runner import assert_bad_input, integrate
from dayone.core import untrusted_yaml
from dayone.core.errors import InputError
from dayone.spec.registry import load_spec, spec_to_yaml

DEADLINE_S = 60  # a Python start and a refusal take ~2 s; the bombs ran for minutes
LAUGHS = 'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)
)
# Each level merges the one before it twice over under new keys: 2**25 keys once expanded.
MERGES = "m0: &m0 {a: 1, b: 2}\n" + "".join(
    f"m{i}: &m{i}\n  <<: [*m{i - 1}]\n  x{i}: *m{i - 1}\n  y{i}: *m{i - 1}\n" for i in range(1, 26)
)


def _spec_with(tmp_path: Path, tail: str) -> Path:
    path = tmp_path / "bomb.yaml"
    path.write_text(spec_to_yaml(load_spec("kimi-linear-48b-a3b")) + tail)
    return path


@pytest.mark.parametrize("command", [["spec", "show"], ["plan"]], ids=["spec-show", "plan"])
def test_an_alias_bomb_in_a_spec_is_one_line_in_seconds(tmp_path, command):
    spec = _spec_with(tmp_path, "bomb:\n" + "".join(f"  {line}\n" for line in LAUGHS.splitlines()))
    result = integrate(*command, spec, timeout=DEADLINE_S)
    assert_bad_input(result, str(spec), "aliases")


def test_a_merge_key_bomb_is_refused_before_it_is_expanded(tmp_path):
    spec = tmp_path / "merge.yaml"
    spec.write_text(MERGES)
    result = integrate("spec", "show", spec, timeout=DEADLINE_S)
    assert_bad_input(result, str(spec), "line")


def test_inspect_with_a_bombed_spec_file(tmp_path):
    spec = _spec_with(tmp_path, LAUGHS)
    result = integrate("inspect", tmp_path / "no-checkpoint", "--spec", spec, timeout=DEADLINE_S)
    assert result.code == 2 and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: &x 1\nb: *x\n", "aliases (*x)"),
        ("a:\n  <<: {b: 1}\n", "merge keys (<<)"),
        ("[" * 65 + "]" * 65, "nested too deeply"),
        ("- 1\n" * (untrusted_yaml.MAX_NODES + 1), "YAML nodes"),
        ("a: !!python/object/apply:os.system [echo hi]\n", "not valid YAML"),
        ("a: [1, 2\n", "not valid YAML"),
        ("a: " + "9" * 5000 + "\n", "4300 digits"),
        (b"a: \xff\xfe\n", "not UTF-8"),
    ],
)
def test_the_one_loader_refuses_in_one_line(text, fragment):
    with pytest.raises(InputError) as err:
        untrusted_yaml.loads(text, "f.yaml")
    message = str(err.value)
    assert message.startswith("f.yaml: ") and fragment in message and "\n" not in message


def test_size_is_bounded_before_the_parse(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("# pad\n" * (untrusted_yaml.MAX_BYTES // 6 + 1))
    with pytest.raises(InputError, match="larger than 4 MiB"):
        untrusted_yaml.read(path)


def test_what_a_spec_writes_reads_back_unchanged():
    # The bounds must not refuse what the project itself writes: every shipped spec, as YAML, loads as PyYAML's own
    # safe loader loads it.
    for name in ("kimi-k3", "kimi-linear-48b-a3b"):
        text = spec_to_yaml(load_spec(name))
        assert untrusted_yaml.loads(text, name) == yaml.safe_load(text)


def test_a_plain_double_angle_value_is_not_a_merge_key():
    assert untrusted_yaml.loads("a: ['<<', {b: '<<'}]\n", "f.yaml") == {"a": ["<<", {"b": "<<"}]}
