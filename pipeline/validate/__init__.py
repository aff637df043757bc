"""Numerics verdicts: the candidate tier against a reference (the reference tier, transformers, or a golden file)
on fixed tokens, per capture point, streamed layer by layer; golden files; the reload check; torchrun splitting.

    checkpoint = open_checkpoint("ckpt/")                   # parsed once, at the caller's entry
    verdict = validate(checkpoint, spec_for_checkpoint(checkpoint, None), Options(reference="auto"))
    verdict.report                                          # a dashboard Report (stage "validate"); None off rank 0
"""

from dayone.validate.run import Options, Verdict, validate

__all__ = ["Options", "Verdict", "validate"]
