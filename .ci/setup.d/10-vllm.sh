#!/usr/bin/env bash
# The vLLM peer environment for conformance (`integrate conform`): the pinned vLLM release in its own venv,
# .venv/peers/vllm, kept apart from the main venv (which keeps CPU torch 2.13). vLLM is installed with --no-deps and
# only what its import, ModelConfig inspection and model construction on a CPU need; its GPU-only requirements
# (flashinfer, cutlass, tilelang, ...) are left out. torch 2.14.1 is the build vLLM 0.33.0 is compiled against
# (it asks for 2.14.0; the patch release is ABI-compatible) and lies on this machine's disk with its CUDA
# libraries, which import on a CPU machine; pip takes them from there without a download.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The pin lives in one table (dayone.checks.releases.RELEASES); the generators and the checks read it too.
version=$(.venv/bin/python -c 'from dayone.checks.releases import RELEASES; print(RELEASES["vllm"].version)')
peer=.venv/peers/vllm
py=$peer/bin/python
if [ -x "$py" ] && "$py" -c "import vllm, sys; sys.exit(vllm.__version__ != '$version')" 2>/dev/null; then
  exit 0
fi

python3 -m venv "$peer"
"$py" -m pip install -q --upgrade pip 2>&1 | grep -v "is ignored" || true
pip_install() { "$py" -m pip install -q --no-deps "$@" 2>&1 | grep -v "is ignored" || true; }
# torch with its own requirements (CUDA libraries from disk), then vLLM alone.
"$py" -m pip install -q torch==2.14.1 2>&1 | grep -v "is ignored" || true
pip_install "vllm==$version"
# What `import vllm`, its model registry, ModelConfig and the layers a generated adapter builds import, at the
# versions vLLM's own metadata asks for where it pins one.
pip_install \
  "transformers>=5.16.1,<5.21.0" "huggingface_hub>=1.31.0" "tokenizers>=0.23.2" "safetensors>=0.6.2" \
  "compressed-tensors==0.17.0" "xgrammar==0.2.8" "llguidance>=1.7.0,<1.8.0" "fastapi>=0.133.0,<0.137.0" \
  "starlette>=1.0.1" "pydantic>=2.12.0" pydantic_core typing-inspection annotated-types annotated-doc \
  typing_extensions packaging psutil pyzmq urllib3 regex tqdm httpx2 httpcore2 truststore h11 idna anyio sniffio \
  pyyaml cbor2 aiohttp multidict attrs yarl propcache aiohappyeyeballs aiosignal frozenlist requests certifi \
  openai openai-harmony pillow pybase64 cachetools msgspec cloudpickle uvloop py-cpuinfo prometheus_client \
  apache-tvm-ffi partial-json-parser einops loguru numpy sympy mpmath networkx jinja2 markupsafe fsspec filelock
"$py" -c "import vllm, sys; sys.exit(vllm.__version__ != '$version')"
