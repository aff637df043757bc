#!/usr/bin/env bash
# The wheel folder that benchmarks/gpu_check.sh installs from on a GPU machine with no network (docs/gpu.md):
# dayone built from this checkout, the KDA peer fla-core and einops, and what dayone needs that the GPU image lacks
# (pydantic and its small helpers). torch and triton are the GPU machine's own, never shipped.
#
#   bash benchmarks/gpu_wheels.sh [OUT]      (default .gpu-wheels; ignored by git; must stay under 64 MiB)
#
# pydantic-core is compiled: one wheel per CPython the check may meet (the GPU image's 3.12, this machine's 3.11 for
# the CPU dry run, 3.13), pip picks the one that fits. Versions are this venv's, so what was tested here travels.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-wheels}
py=${PYTHON:-.venv/bin/python}
limit_mib=64

version() { "$py" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-wheels.XXXXXX")
log="$work.log"
trap 'rm -rf "$work" "$log"' EXIT
quiet() { "$@" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }; }  # pip and setuptools warn at length; show on failure
quiet "$py" -m pip wheel --no-deps --no-build-isolation --wheel-dir "$work" .
download() { quiet "$py" -m pip download --no-deps --only-binary=:all: --dest "$work" "$@"; }
download fla-core==0.6.0 einops==0.8.2  # the peer, pinned as in .ci/setup
download "pydantic==$(version pydantic)" "annotated-types==$(version annotated-types)" \
  "typing-inspection==$(version typing-inspection)" "typing-extensions==$(version typing-extensions)"
for python in 3.11 3.12 3.13; do
  download --python-version "$python" --implementation cp --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 "pydantic-core==$(version pydantic-core)"
done

# Which code the dayone wheel holds: gpu_check.py copies this into its report (rebuild after changing the code).
echo "$(git describe --always --dirty 2>/dev/null || echo unknown) $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$work/BUILT_FROM"

size_mib=$(du -sm "$work" | cut -f1)
if [ "$size_mib" -ge "$limit_mib" ]; then
  echo "gpu_wheels.sh: $size_mib MiB of wheels, over the $limit_mib MiB a device call may carry" >&2
  exit 1
fi
rm -rf "$out.tmp" && mv "$work" "$out.tmp" && rm -rf "$out" && mv "$out.tmp" "$out"
rm -f "$log"
trap - EXIT
echo "$out: $(ls "$out"/*.whl | wc -l) wheels, $(du -sk "$out" | cut -f1) KiB, built from $(cat "$out/BUILT_FROM")"
