import os
import sys
from pathlib import Path

import pytest

# `python -m pytest` from the checkout puts the checkout on sys.path (xdist's workers too: `python -c`), where its
# top-level folders are dayone's subpackages by their bare names: `kernels` would hide Hugging Face's `kernels`, which
# transformers >= 5.25 imports. dayone itself is installed (editable), so the checkout is taken off sys.path here,
# before anything imports transformers; the tests' own `python -m dayone...` children pass -P for the same reason.
CHECKOUT = Path(__file__).resolve().parent.parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != CHECKOUT]

# Under xdist each worker computes on its share of the cores, and so does everything it starts (`integrate`, the
# engines' ranks: dayone.programs.engines.cores divides OMP_NUM_THREADS among them). With torch's default thread
# count, two workers' torch processes on 2 cores spin at each other's barriers: one validate of the tiny K3 took 11 s
# alone and 566 s beside a second (the README run's validate: 9.5 s alone, 126 s in the suite). Set before torch is
# imported (libgomp reads it once); a value the user set is kept.
# What `integrate` asks of PyTorch's allocator for itself and its children (dayone.core.huge_pages), asked here too:
# the tests call dayone's functions in this process (synth, the conformance driver) and start programs directly.
from dayone.core.huge_pages import prefer_huge_pages

prefer_huge_pages()

if os.environ.get("PYTEST_XDIST_WORKER"):
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // _workers)))

# Triton decides when it decorates a kernel whether the kernel is interpreted, and test modules of any folder import
# kernel modules while being collected (through adapters.rl, validate, ...): the interpreter flag of the session's
# test device (DAYONE_TEST_DEVICE, tests/kernels/conftest.py) is settled here, before any collection, and only here,
# not when that folder is reached (kernels imported earlier stayed compiled-mode and every interpreter kernel test
# failed in a full run).
# Every kernel module is imported here, interpreted: a command run in-process later (CliRunner) drops the flag while
# it works, and a kernel module first imported then would stay compiled-mode for the rest of the session.
if os.environ.get("DAYONE_TEST_DEVICE", "cpu") == "cpu":
    import importlib
    import pkgutil

    os.environ["TRITON_INTERPRET"] = "1"
    import dayone.kernels

    for module in pkgutil.walk_packages(dayone.kernels.__path__, "dayone.kernels."):
        importlib.import_module(module.name)
else:
    os.environ.pop("TRITON_INTERPRET", None)  # cuda: kernels compiled for the GPU

# tests/ holds shared helpers (cli_runner) imported by test modules in subfolders; engine_reports' checks are
# asserts, rewritten as a test module's are so that a failure shows the values.
sys.path.insert(0, str(Path(__file__).parent))
pytest.register_assert_rewrite("engine_reports")

# Session fixtures shared across test folders (one demo run per session).
from readme_demo import readme_demo  # noqa: F401

# Folders whose tests read the README's run (tests/readme_demo.py: minutes, once per session and worker): one group.
READS_THE_README_RUN = ("cli", "run", "workflow")


@pytest.fixture(scope="session", autouse=True)
def shared_kernel_cache(tmp_path_factory):
    """Every `integrate compile` and `integrate run` of the session (the README's run, the resumed and edited runs, the
    workflow's) compiles into one kernel cache (dayone.compile_stage.KERNEL_CACHE_ENV), shared by the xdist workers: a
    cubin is keyed by all that decides it, so a second build of the same kernel reads it instead of running ptxas
    again (the README run's compile stage builds what tests/cli's K3 compile built)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kernel-cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAYONE_KERNEL_CACHE", str(shared))
        yield shared


# The groups, costliest first: seconds of one worker in a run of the whole suite on 2 cores, caches empty as on a
# new runner (timestamps of each test's start and end per worker, 2026-12-05: readme 569, kernels 211, conform 198,
# megatron 191, generate 156, drill 121, hostile 115, checkpoint 94, validate 82, model 74, tools 44, package 40,
# benchmarks 33, dashboard 26, spec 17, synth 17, release 15). Groups start in this order, each on the first worker
# free (longest first), so the long ones overlap from the start and the last minutes are short groups filling both
# workers, not one long group running alone (that run, in the order before, ended with validate alone for 29 s).
GROUP_COST_ORDER = ("readme", "kernels", "conform", "megatron", "generate", "drill", "hostile", "checkpoint", "validate",
                    "model", "tools", "package", "benchmarks", "dashboard", "spec", "synth", "release")  # fmt: skip


def group_of(nodeid: str) -> str:
    """A test's group: its folder of tests/ (a file at the top is its own group), the README run's readers together."""
    parts = nodeid.split("::", 1)[0].split("/")
    folder = parts[1] if len(parts) > 2 else parts[-1]
    return "readme" if folder in READS_THE_README_RUN else folder


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`-n auto`, the README's test command) each group of tests goes whole to one worker, so the
    session and module fixtures its folder builds (checkpoints, compiled kernels, peer probes, the README's run) are
    built once. Groups start in the collection's order, which pytest_collection_modifyitems makes GROUP_COST_ORDER."""
    from xdist.scheduler import LoadScopeScheduling

    class FolderScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return FolderScheduling(config, log)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a test of more than ~20 s on one core (deselect with -m 'not slow')")


# What makes a test slow (tens of seconds to minutes): a real engine, trainer or browser, a fresh venv, or the README's
# run. Such a test is marked slow here, by its module or by the session fixture it reads, so that
# `pytest -m "not slow"` is the inner loop; CI runs everything.
SLOW_MODULES = frozenset({
    "conform/test_conform_planted_mistakes.py", "conform/test_run_stage.py", "conform/test_sglang_cpu_rope.py",
    "conform/test_sglang_forward.py", "conform/test_sglang_probe.py", "conform/test_spec_variants.py",
    "conform/test_sglang_variants.py", "conform/test_vllm_conformance.py", "conform/test_vllm_faithful.py",
    "dashboard/test_dashboard_browser.py",
    "drill/test_drill.py",
    "megatron/test_bridge_provider.py", "megatron/test_bridge_round_trip.py", "megatron/test_megatron_batch.py",
    "megatron/test_megatron_model.py",
    "megatron/test_megatron_planted_mistakes.py", "megatron/test_miles_end_to_end.py", "megatron/test_miles_plugin.py",
    "megatron/test_refit.py", "megatron/test_standalone_packages.py", "megatron/test_train_step.py",
    "package/test_wheel_install.py",
    # and by measured cost (below): a module-scoped fixture of 4 s or more
    "benchmarks/test_gpu_check.py",
    "cli/test_compile_command.py",
    "kernels/test_autotune.py",
    "kernels/test_kda_fla.py",
    "model/test_kernels.py",
    "model/test_mla_rope_targets.py",
    "package/test_package_command.py",
})  # fmt: skip
SLOW_FIXTURES = frozenset({"readme_demo", "probed", "checkout"})  # the README run, the SGLang batch, a fresh clone
# Tests measured at 2 s or more (setup + call, all their parameters) in a CI run of the whole suite on 2 cores
# (`PYTEST_ADDOPTS=--durations=300 bash .ci/run`, 2026-12-03; those of one call of 3 s or more in the checkout's run,
# 2026-12-05): with them out, `-m "not slow"` is the three-minute loop.
SLOW_TESTS = frozenset({
    "checkpoint/test_bad_input.py::test_pickle_is_refused_without_the_flag",
    "checkpoint/test_coverage.py::test_full_size_k3_skeleton_is_fully_covered",
    "cli/test_json_documents.py::test_json_result_is_one_document_with_the_documented_keys",
    "cli/test_lazy_imports.py::test_package_publish_dashboard",
    "cli/test_lazy_imports.py::test_spec_derive_and_inspect",
    "cli/test_progress_off_a_terminal.py::test_a_skipped_stage_says_so_on_its_line",
    "cli/test_spec_and_plan_commands.py::test_the_runs_plan_stage_fails_when_the_model_does_not_fit",
    "cli/test_text_output.py::test_convert_names_the_side_files_it_copied_as_written",
    "cli/test_text_output.py::test_validate_prints_a_hostile_checkpoint_name_escaped",
    "conform/test_probe_output.py::test_conform_prints_a_line_per_level_and_world_size_off_a_terminal",
    "conform/test_probe_output.py::test_conform_reports_a_malformed_probe_output_as_a_failed_run",
    "dashboard/test_dashboard_fuzz.py::test_any_details_are_drawn_or_shown_malformed",
    "generate/test_degenerate_layouts.py::test_layout_generates_and_checks",
    "generate/test_generate_command.py::test_generate_all_targets_and_check",
    "generate/test_generate_command.py::test_generate_from_a_checkpoint_folder",
    "generate/test_generate_command.py::test_regenerating_gives_the_same_bytes",
    "generate/test_names_from_the_model.py::test_a_checkpoint_is_named_after_its_model_wherever_it_lies",
    "generate/test_names_from_the_model.py::test_generated_names_come_from_the_model",
    "generate/test_weight_table.py::test_shipped_specs_tables_pass_every_check",
    "hostile/test_children_die_with_run.py::test_a_timeout_kills_the_whole_group",
    "hostile/test_dtype_variation.py::test_other_float_dtypes_are_findings_and_validation_uses_them",
    "hostile/test_fuzz.py::test_inspect_of_two_shards_survives_any_mutation",
    "hostile/test_fuzz.py::test_reading_commands_survive_any_mutation",
    "hostile/test_fuzz_index_and_state.py::test_fuzz_index_maps",
    "hostile/test_names_and_bounds.py::test_fuzz_any_name",
    "hostile/test_output_errors.py::test_a_full_or_read_only_disk",
    "hostile/test_output_errors.py::test_run_stays_resumable_after_a_full_disk",
    "hostile/test_publish_deadlines.py::test_5xx_is_retried_with_backoff_and_a_timeout_is_not",
    "hostile/test_publish_deadlines.py::test_the_publish_deadline_bounds_the_whole",
    "kernels/test_aot.py::test_a_kernel_compiled_to_a_trap_is_refused",
    "kernels/test_aot.py::test_compile_cache_and_budget",
    "kernels/test_aot.py::test_spills_are_read_from_ptxas",
    "kernels/test_kda_triton_backward.py::test_a_planted_wrong_gradient_is_caught",
    "kernels/test_kda_triton_backward.py::test_bf16_inputs",
    "kernels/test_kda_triton_backward.py::test_gradients_match_fp64_recurrence",
    "kernels/test_kda_triton_backward.py::test_megatron_call_shape_matches_the_cpu_training_path",
    "kernels/test_kernel_limits.py::test_compile_head_dim_96_for_sm_90_and_sm_100",
    "kernels/test_spec_decode.py::test_bitwise_without_avx512",
    "megatron/test_router_forms.py::test_megatron_core_routes_grouped_tokens_as_the_reference",
    "model/test_k3.py::test_prefill_then_decode_equals_full_forward_reference",
    "model/test_mla_cache.py::test_decode_benchmark_runs",
    "model/test_mla_rope_megatron.py::test_megatron_rotary_mla_matches_the_reference_tier",
    "package/test_generated_from_a_checkpoint.py::test_header_command_reproduces_the_files_and_package_needs_no_spec",
    "package/test_pep517.py::test_a_failing_hook_fails_the_build_with_its_reason",
    "package/test_pep517.py::test_the_files_are_the_commands_byte_for_byte",
    "run/test_stand_in.py::test_plan_at_the_named_specs_widths",
    "spec/test_conventions.py::test_kimi_k4_by_a_conventions_file",
    "spec/test_shipped_specs.py::test_entry_table_answers_like_the_expanded_manifest",
    "synth/test_faithful.py::test_written_stand_in_derives_back",
    "synth/test_synth.py::test_release_format",
    "synth/test_synth.py::test_same_seed_same_bytes",
    "tools/test_convert.py::test_bad_inputs",
    "tools/test_convert.py::test_pair_split_across_files",
    "tools/test_convert.py::test_rerun_skips_finished_and_redoes_damaged_files",
    "tools/test_convert.py::test_torchrun_job_equals_one_process",
    "tools/test_convert.py::test_two_ranks_then_finalize_equal_one_process",
    "tools/test_prune.py::test_prune_of_a_converted_checkpoint",
    "tools/test_tool_outputs_validate.py::test_converted_prune_passes_validate",
    "tools/test_tool_outputs_validate.py::test_cover_prune_passes_validate",
    "validate/test_distributed.py::test_two_ranks_equal_one",
    "validate/test_reference_choice.py::test_cli_says_why_and_refuses",
    "validate/test_reference_fallback.py::test_auto_falls_back_to_naive_with_the_reason",
    "validate/test_reference_fallback.py::test_explicit_transformers_is_refused_in_one_line",
    "validate/test_validate.py::test_golden_round_trip",
    "validate/test_validate.py::test_synthetic_kimi_linear_against_transformers",
    "validate/test_validate.py::test_tiny_k3_validates_green_end_to_end",
    "validate/test_validate_bad_input.py::test_checkpoint_not_matching_its_spec",
    "validate/test_validate_bad_input.py::test_nonfinite_weight",
    "validate/test_validate_bad_input.py::test_tokens",
    "workflow/test_release_workflow.py::test_a_tag_without_a_checkpoint_fails_naming_the_file",
    "workflow/test_release_workflow.py::test_tag_mode",
})  # fmt: skip


def pytest_collection_modifyitems(config, items):
    rank = {group: i for i, group in enumerate(GROUP_COST_ORDER)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))  # stable: file order kept in a group
    tests = Path(__file__).parent
    for item in items:
        module = Path(str(item.fspath)).relative_to(tests).as_posix()
        test = f"{module}::{item.nodeid.split('::', 1)[1].split('[')[0]}"
        if module in SLOW_MODULES or test in SLOW_TESTS or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
