#!/usr/bin/env bash
# The pinned SGLang release as a peer environment (.venv/peers/sglang, its own python), the judge of the generated
# SGLang adapters (pipeline/programs/engines/sglang_probe.py runs in it). Installed with --no-deps plus only what
# `sglang.srt` model code needs to import and build a model on a CPU. SGLang's import chain needs torchvision,
# whose index builds need the CUDA torch 2.14.1: both wheels, and the CUDA libraries torch links against, lie on
# this machine's disk (pip takes them without a download) and import and run on a CPU. No other torch is pulled.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The pin lives in one place: dayone's release table (the API checks and the generator read it too).
version=$(.venv/bin/python -c 'from dayone.adapters.pins import RELEASES; print(RELEASES["sglang"].version)')
peer=.venv/peers/sglang
# What torch 2.14.1 loads at import (libtorch links these), at the versions its metadata names.
cuda_libs=(nvidia-cublas==13.1.1.3 nvidia-cudnn-cu13==9.24.0.43 nvidia-cufft==12.0.0.61 nvidia-cufile==1.15.1.6
  nvidia-curand==10.4.0.35 nvidia-cusolver==12.0.4.66 nvidia-cusparse==12.6.3.3 nvidia-cusparselt-cu13==0.8.1
  nvidia-nccl-cu13==2.30.7 nvidia-nvshmem-cu13==3.4.5 nvidia-cuda-nvrtc==13.0.88 nvidia-nvjitlink==13.4.92
  nvidia-cuda-cupti==13.0.85)
# torch's own requirements, then what sglang.srt's import chain and model construction need (found by importing
# the model layers, the model config and the registry on a CPU); pins where sglang's metadata pins them.
python_deps=(filelock typing-extensions sympy mpmath networkx jinja2 markupsafe fsspec numpy safetensors==0.8.0
  triton==3.8.0 transformers==5.19.0 tokenizers==0.23.2 sentencepiece==0.2.1 compressed-tensors==0.18.0
  apache-tvm-ffi==0.1.11 openai==2.8.0 huggingface-hub==2.4.0 httpx2 httpcore2 httpx h11 truststore regex pyyaml
  packaging tqdm orjson psutil pybase64 requests urllib3 idna certifi pillow starlette anyio sniffio msgspec
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection pyzmq ipython traitlets pygments aiohttp
  aiohappyeyeballs aiosignal frozenlist multidict yarl propcache attrs dill gguf einops loguru partial-json-parser
  distro)
stamp="$peer/.dayone-sglang-$version"
if [ -x "$peer/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${cuda_libs[*]} ${python_deps[*]}" ]; then
  exit 0
fi
python3 -m venv "$peer"
pip=("$peer/bin/python" -m pip install -q --no-deps)
"${pip[@]}" torch==2.14.1 torchvision==0.29.1 "sglang==$version" 2> >(grep -v 'is ignored' >&2)
"${pip[@]}" "${cuda_libs[@]}" "${python_deps[@]}" 2> >(grep -v 'is ignored' >&2)
"$peer/bin/python" -c 'import sglang.srt.models.registry' 2>/dev/null
echo "${cuda_libs[*]} ${python_deps[*]}" >"$stamp"
