"""`integrate golden CHECKPOINT -o FILE.safetensors`: a model's logits on fixed tokens, for `validate
--reference golden:FILE` (a vendor can ship these with pre-release weights)."""

from __future__ import annotations

from pathlib import Path

import click
from dayone.core.vocabulary import Point, layer_point
from dayone.present import console, shown
from dayone.spec.hf_keys import MODEL_TYPE


@click.command()
@click.argument("checkpoint")
@click.option("--tokens", help="JSON file of equal-length token-id lists, or comma-separated ids (one sequence).")
@click.option("--tier", default="reference", show_default=True, help="reference | fast.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--spec", "spec_arg", help="Spec NAME or FILE (default: derived from the checkpoint's config.json).")
@click.option("--device", default="auto", show_default=True, help="auto | cpu | cuda.")
def golden(checkpoint: str, tokens: str | None, tier: str, output: Path, spec_arg: str | None, device: str) -> None:
    """Write input_ids, fp32 logits and log-probs of CHECKPOINT (TIER, streamed layer by layer) to OUTPUT."""
    import torch
    from dayone.adapters.model import TIERS
    from dayone.checkpoint import open_checkpoint
    from dayone.checkpoint.spec_source import spec_for_checkpoint
    from dayone.core.errors import InputError
    from dayone.validate.golden import write_golden
    from dayone.validate.source import ShardReader, open_source
    from dayone.validate.streamed import StreamedModel
    from dayone.validate.tokens import parse_tokens

    if tier not in TIERS:
        raise InputError(f"--tier {tier!r}: choose from {', '.join(TIERS)}")
    opened = open_checkpoint(checkpoint)  # parsed here, once: the library gets the open checkpoint and its spec
    source = open_source(opened, spec_for_checkpoint(opened, spec_arg))
    spec = source.spec
    ids, _ = parse_tokens(tokens, spec.vocab_size)
    dev = torch.device("cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu")
    model = StreamedModel(spec, tier, ShardReader(source.checkpoint), source.manifest, dev)
    from dayone.adapters.model import Capture

    model.embed(ids)
    routes: dict[str, torch.Tensor] = {}
    for i in range(spec.num_layers):
        cap = Capture(layer_point(i, Point.TOPK_IDS))
        model.layer(i, cap)
        routes.update(cap)
    logits = model.head().float().cpu().reshape(*ids.shape, -1)
    model_type = str(source.checkpoint.config.get(MODEL_TYPE, ""))
    write_golden(output, ids, logits, {"tier": tier, "spec": spec.name, "model_type": model_type,
                                       "vocab_size": str(spec.vocab_size), "checkpoint": source.where},
                 routes)  # fmt: skip
    console.print(
        f"wrote {shown(output)}: {tier} tier, {ids.shape[0]} x {ids.shape[1]} tokens, vocab {spec.vocab_size}"
    )


COMMAND = golden
