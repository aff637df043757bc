"""A stage's cache key covers the code it runs, the programs it starts by module name included
(dayone.run.code): an edit to the Megatron checks that generate runs with `python -m` reruns generate."""

from __future__ import annotations

from dayone.programs.megatron.checks import ADAPTER_CHECKS
from dayone.run.code import code_files
from dayone.run.stages import GENERATE_CODE


def test_generate_covers_the_programs_it_runs_with_python_m():
    files = code_files(GENERATE_CODE)
    started = {"dayone.programs.megatron.verify", *ADAPTER_CHECKS.values()}
    assert started <= set(files), started - set(files)
    # and what those programs import in their turn
    assert "dayone.programs.megatron.same_bytes" in files and "dayone.adapters.megatron" in files


def test_a_module_name_in_a_sentence_is_not_followed_unless_it_is_the_whole_string():
    from dayone.run import code

    assert code._NAMED.findall('run "dayone.cli" or "see dayone.cli for more" or "dayone.conform.*"') == ["dayone.cli"]
