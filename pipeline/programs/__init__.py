"""Programs that run in a peer environment (another framework's installation), started by dayone as `python -m`.

They compose dayone's own pieces (a synthetic checkpoint from dayone.synth, the adapters) with a framework installed
in the peer only, so they sit in the domain layer like the stages that run them, and nothing below names them.
"""
