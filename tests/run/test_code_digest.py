"""A stage's cache key covers the code it runs, the programs it starts by module name included
(dayone.run.code): an edit to the Megatron checks that generate runs with `python -m` reruns generate."""

from __future__ import annotations

from dayone.programs.megatron.checks import ADAPTER_CHECKS
from dayone.run.code import code_files
from dayone.run.runner import stage_code
from dayone.run.stages import generate_stage


def test_generate_covers_the_programs_it_runs_with_python_m():
    files = code_files(stage_code(generate_stage(None)))
    started = {"dayone.programs.megatron.verify", *ADAPTER_CHECKS.values()}
    assert started <= set(files), started - set(files)
    # and what those programs import in their turn
    assert "dayone.programs.megatron.same_bytes" in files and "dayone.adapters.megatron" in files


def test_a_module_name_in_a_sentence_is_not_followed_unless_it_is_the_whole_string():
    from dayone.run import code

    assert code._NAMED.findall('run "dayone.cli" or "see dayone.cli for more" or "dayone.conform.*"') == ["dayone.cli"]


def test_a_stages_modules_are_read_off_its_function():
    """What a stage imports (lazily included), what its global names were imported from (constants too), and what
    the helpers of its own module that it calls import; never the runner it runs in."""
    from dayone.run.code import function_modules
    from dayone.run.stages import conform_stage, spec_stage

    generate = stage_code(generate_stage(None))
    assert {"dayone.checks.static", "dayone.adapters.targets.common", "dayone.programs.megatron.runner"} <= set(
        generate
    )
    spec = stage_code(spec_stage(None))
    assert {"dayone.spec.registry", "dayone.core.vocabulary"} <= set(spec)  # spec_to_yaml; PASS, a str constant
    conform = stage_code(conform_stage(None))
    assert "dayone.conform.results" in conform  # imported only inside _why_not_run, a helper conform calls
    assert "dayone.run.runner" in function_modules(spec_stage(None).run)  # StageResult
    assert "dayone.run.runner" not in generate + spec + conform


def test_the_methods_of_the_run_context_a_stage_holds_are_its_code():
    """A stage calls ctx.report, which builds the dashboard Report: the report model is code the stage runs (a
    change to it changes every report), though the stage's function never names it."""
    from datetime import UTC, datetime
    from pathlib import Path

    from dayone.run.stages import RunContext, spec_stage

    ctx = RunContext(None, None, Path("out"), datetime(2026, 1, 1, tzinfo=UTC), ("sglang",), ("sm_90",))
    assert "dayone.reports.model" in stage_code(spec_stage(ctx))
    assert "dayone.reports.model" not in stage_code(spec_stage(None))  # built, never run: nothing held
