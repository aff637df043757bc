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

# tests/ holds shared helpers (cli_runner) imported by test modules in subfolders.
sys.path.insert(0, str(Path(__file__).parent))

# Session fixtures shared across test folders (one demo run per session).
from readme_demo import readme_demo  # noqa: F401

# Folders whose tests read the README's run (tests/readme_demo.py: minutes, once per session and worker): one group.
READS_THE_README_RUN = ("cli", "run", "workflow")


@pytest.fixture(scope="session", autouse=True)
def shared_kernel_cache(tmp_path_factory):
    """Every `integrate run` of the session (the README's, the resumed and edited runs, the workflow's) compiles into
    one kernel cache (dayone.run.stages.KERNEL_CACHE_ENV), shared by the xdist workers: a cubin is keyed by all that
    decides it, so a second run of the same kernel reads it instead of running ptxas again."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kernel-cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAYONE_KERNEL_CACHE", str(shared))
        yield shared


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`-n auto`, the README's test command) each group of tests goes whole to one worker, so the
    session and module fixtures its folder builds (checkpoints, compiled kernels, peer probes, the README's run) are
    built once. A group is a folder of tests/ (a file at its top is its own group), the README run's readers together;
    groups start in collection order, so the long README group starts within the first minute."""
    from xdist.scheduler import LoadScopeScheduling

    class FolderScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            parts = nodeid.split("::", 1)[0].split("/")
            folder = parts[1] if len(parts) > 2 else parts[-1]
            return "readme" if folder in READS_THE_README_RUN else folder

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
    "megatron/test_bridge_provider.py", "megatron/test_bridge_round_trip.py", "megatron/test_megatron_model.py",
    "megatron/test_megatron_planted_mistakes.py", "megatron/test_miles_end_to_end.py", "megatron/test_miles_plugin.py",
    "megatron/test_refit.py", "megatron/test_standalone_packages.py", "megatron/test_train_step.py",
    "package/test_wheel_install.py",
})  # fmt: skip
SLOW_FIXTURES = frozenset({"readme_demo", "probed", "checkout"})  # the README run, the SGLang batch, a fresh clone


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).parent
    for item in items:
        module = Path(str(item.fspath)).relative_to(tests).as_posix()
        if module in SLOW_MODULES or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
