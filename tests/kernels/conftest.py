"""The kernel tests run on one device per session, named by DAYONE_TEST_DEVICE:

  cpu (the default)  Triton kernels in the interpreter (TRITON_INTERPRET=1), torch counterparts on the CPU.
  cuda               Triton kernels compiled for the GPU, torch counterparts on it too (benchmarks/gpu_check.py).

A test that launches a kernel takes the `device` fixture, parametrized with that one device, so its id says where it
ran (`test_x[cpu-triton]`, `test_x[cuda-triton]`): inputs are made on the CPU from the same seeds either way, moved
to the device for the kernel, and compared with references computed on the CPU. The interpreter flag is read when
triton decorates a kernel, and test modules of other folders import kernels while being collected, so tests/conftest.py
sets or clears it for this device before any collection.
"""

import os

import pytest

DEVICE = os.environ.get("DAYONE_TEST_DEVICE", "cpu")
if DEVICE not in ("cpu", "cuda"):
    raise pytest.UsageError(f"DAYONE_TEST_DEVICE must be cpu or cuda, got {DEVICE!r}")
if DEVICE == "cuda":
    import torch

    if not torch.cuda.is_available():
        raise pytest.UsageError("DAYONE_TEST_DEVICE=cuda, but torch sees no CUDA GPU")
    # References and torch counterparts that run on the GPU stay IEEE fp32 (cuDNN would take TF32 in convolutions).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", [DEVICE], scope="session")  # module fixtures (peers) may use it too
