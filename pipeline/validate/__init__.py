"""Numerics verdicts: the candidate tier against a reference (the reference tier, transformers, or a golden file)
on fixed tokens, per capture point, streamed layer by layer; golden files; the reload check; torchrun splitting.

    report = validate("ckpt/", Options(reference="auto"))   # a dashboard Report (stage "validate") as a dict
"""

from dayone.validate.run import Options, validate

__all__ = ["Options", "validate"]
