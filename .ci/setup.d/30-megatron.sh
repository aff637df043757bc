#!/usr/bin/env bash
# The pinned megatron-core and megatron-bridge as a peer of the main venv (its CPU torch 2.13.0): installed with
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
# The pins live in one table (dayone.adapters.pins.RELEASES); the generators and the checks read it too.
pin() { "$py" -c "from dayone.adapters.pins import RELEASES; print(RELEASES['$1'].version)"; }
core=$(pin megatron-core)
bridge=$(pin megatron-bridge)
if [ -d "$target/megatron_core-$core.dist-info" ] && [ -d "$target/megatron_bridge-$bridge.dist-info" ] \
  && [ -d "$target/omegaconf-2.3.0.dist-info" ]; then
  exit 0
fi
"$py" -m pip install -q --no-deps --target "$target" "megatron-core==$core" "megatron-bridge==$bridge" \
  omegaconf==2.3.0 antlr4-python3-runtime==4.9.3
