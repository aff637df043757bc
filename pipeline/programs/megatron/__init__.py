"""The Megatron peer's programs (.venv/peers/megatron: megatron-core, megatron-bridge, Miles), each run as
`python -m dayone.programs.megatron.<name>` with the peer on PYTHONPATH, and `runner`, which runs them from the
main environment and reads the JSON report each prints.
"""
