"""The reference tier's runs of an engine's finished sequences (dayone.conform.forward.reference_runs) go through
packed together, as an engine batches requests of different lengths. Each must give what the same tier gives the
sequence run alone: that is the reference the forward level judges against."""

from __future__ import annotations

import pytest
import torch
from conform_fixtures import tiny
from dayone.adapters.model import Capture
from dayone.checkpoint.reader import open_local
from dayone.conform.forward import engine_prompts, reference_runs
from dayone.core.vocabulary import Point, layer_point
from dayone.spec.manifest import build_manifest
from dayone.synth.write import write_synthetic
from dayone.validate.floor import FLOOR_TIER
from dayone.validate.source import ShardReader
from dayone.validate.streamed import StreamedModel

# Per tier, the most a packed run may differ from the sequence alone. Packing changes the rows a matmul sees, so the
# summation order in the last bits. fp32: measured 4e-6 in log-prob on the README run's 93 layers, against the
# forward level's fp32 row of 1e-4. bf16 (the noise floor's tier): measured equal; one bf16 step of a log-prob near
# -6 is 0.03.
ATOL = {"reference": 2e-5, FLOOR_TIER: 0.05}


def alone(checkpoint, spec, ids: list[int], tier) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """One sequence through the tier by itself (StreamedModel.embed of one request)."""
    model = StreamedModel(spec, tier, ShardReader(checkpoint), build_manifest(spec), torch.device("cpu"))
    model.embed(torch.tensor([ids], dtype=torch.int64))
    layers = {}
    for i in range(spec.num_layers):
        cap = Capture(layer_point(i, Point.OUT))
        model.layer(i, cap)
        layers[i] = cap[layer_point(i, Point.OUT)].double()
    return torch.log_softmax(model.head().double(), -1), layers


@pytest.mark.parametrize("name", ["kimi-k3", "kimi-linear-48b-a3b"])
def test_packed_runs_match_each_sequence_alone(tmp_path, name):
    spec = tiny(name)
    write_synthetic(spec, tmp_path / "ck", seed=0, num_shards=2)
    checkpoint = open_local(tmp_path / "ck")
    gen = torch.Generator().manual_seed(7)
    sequences = [p["prompt"] + torch.randint(0, spec.vocab_size, (p["max_tokens"],), generator=gen).tolist()
                 for p in engine_prompts(spec.vocab_size)]  # fmt: skip
    assert len({len(s) for s in sequences}) > 1  # different lengths: a packed batch, not a rectangle
    for tier, atol in ATOL.items():
        runs = reference_runs(checkpoint, spec, sequences, tier)
        assert len(runs) == len(sequences)
        for sequence, run in zip(sequences, runs, strict=True):
            logprobs, layers = alone(checkpoint, spec, sequence, tier)
            assert run.logprobs.shape == logprobs.shape == (len(sequence), spec.vocab_size)
            torch.testing.assert_close(run.logprobs, logprobs, rtol=0, atol=atol)
            assert torch.equal(run.logprobs.argmax(-1), logprobs.argmax(-1))
            for i, out in layers.items():
                torch.testing.assert_close(run.layers[i], out, rtol=0, atol=atol)
