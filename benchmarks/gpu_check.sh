#!/usr/bin/env bash
# The GPU check in one call (docs/gpu.md): install dayone, fla-core and what the GPU image lacks from the wheel
# folder that benchmarks/gpu_wheels.sh prepared (no network needed) into a temporary site on top of the machine's own
# torch and triton, then run benchmarks/gpu_check.py: kernel tests compiled on the GPU, the tiny models validated,
# kernel benchmarks against fla and the HBM limit, autotune for sm_90. Reports land in OUT.
#
#   bash benchmarks/gpu_check.sh OUT [--wheels DIR] [--dry-run] [--budget-s SECONDS]
#
# PYTHON picks the interpreter (default python3: on the GPU machines the one that holds PyTorch).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: bash benchmarks/gpu_check.sh OUT [--wheels DIR] [--dry-run] [--budget-s SECONDS]" >&2
  exit 2
fi
out=$1
shift
wheels=.gpu-wheels
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --wheels) wheels=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ ! -f "$(ls "$wheels"/dayone-*.whl 2>/dev/null | head -n1)" ]; then
  echo "gpu_check.sh: no dayone wheel in $wheels; prepare the folder with: bash benchmarks/gpu_wheels.sh $wheels" >&2
  exit 2
fi
py=${PYTHON:-python3}
site=$(mktemp -d "${TMPDIR:-/tmp}/dayone-site.XXXXXX")
trap 'rm -rf "$site"' EXIT
# --no-deps with the names listed: torch and triton stay the machine's; pip picks the pydantic-core for this Python.
"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
  --target "$site" --find-links "$wheels" \
  dayone fla-core einops pydantic pydantic-core annotated-types typing-inspection typing-extensions
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export DAYONE_FLA_PEER="$site"  # tests/kernels/test_kda_fla.py runs fla from here
export DAYONE_WHEELS_BUILT_FROM="$(cat "$wheels/BUILT_FROM" 2>/dev/null || echo unknown)"
mkdir -p "$out"
"$py" benchmarks/gpu_check.py "$out" ${args[@]+"${args[@]}"}
