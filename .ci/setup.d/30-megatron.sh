#!/usr/bin/env bash
# megatron-core 0.16.1 and megatron-bridge 0.3.1 as a peer of the main venv (its CPU torch 2.13.0): installed with
# --no-deps into .venv/peers/megatron, which only the Megatron checks put on their path. megatron-core needs nothing
# beyond torch, numpy and packaging (already in the main venv); megatron-bridge's providers import omegaconf (pure
# Python, with its antlr4 runtime). No CUDA torch and no TransformerEngine is pulled: `import megatron.bridge` itself
# needs TransformerEngine, and the checks say so.
set -euo pipefail
cd "$(dirname "$0")/../.."

# PYTHON and PEERS_DIR let the release workflow install the same peer beside its own Python (sys.prefix/peers),
# where dayone.adapters.megatron.peer looks for it.
py=${PYTHON:-.venv/bin/python}
target=${PEERS_DIR:-.venv/peers}/megatron
if [ -d "$target/megatron_core-0.16.1.dist-info" ] && [ -d "$target/megatron_bridge-0.3.1.dist-info" ] \
  && [ -d "$target/omegaconf-2.3.0.dist-info" ]; then
  exit 0
fi
"$py" -m pip install -q --no-deps --target "$target" megatron-core==0.16.1 megatron-bridge==0.3.1 \
  omegaconf==2.3.0 antlr4-python3-runtime==4.9.3
