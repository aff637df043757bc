"""`integrate validate`: the candidate tier against a reference on fixed tokens, capture point by capture point.

Order of work, per part (embedding, layer 0 .. L-1, head): the reference runs the part (loading it, then freeing
it), then the candidate loads the same part, runs it with the reference's routing replayed (--routing replay, the
default), is optionally reload-checked, and is freed; the two sets of capture points are compared and dropped. Only
one part's weights and one part's activations are ever resident, which is what lets a model far larger than memory
be validated. Under torchrun the layers are split across ranks (see distributed.py).

Besides the replayed runs, the candidate carries a second end-to-end state routed by itself, and a bf16 run of the
reference tier (the noise floor, floor.py) carries its own: the un-replayed figures are judged against the floor's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from dayone.adapters.model import TIERS, Capture
from dayone.adapters.model.attn_residual import Stream
from dayone.adapters.model.batch import Batch
from dayone.checkpoint.reader import Checkpoint
from dayone.core import vocabulary
from dayone.core.errors import InputError
from dayone.core.vocabulary import Point, layer_point
from dayone.present import step
from dayone.reports.model import Report
from dayone.spec.schema import ModelSpec
from dayone.validate import distributed
from dayone.validate.floor import FLOOR_TIER, figures
from dayone.validate.metrics import logprob_metrics, rows_for, tensor_row, topk_disagreement, topk_row
from dayone.validate.references import (
    GoldenReference,
    NaiveReference,
    TransformersReference,
    load_golden,
    resolve_reference,
)
from dayone.validate.report import build_report
from dayone.validate.source import ShardReader, open_source
from dayone.validate.streamed import StreamedModel
from dayone.validate.tokens import check_ids, parse_tokens

# A layer's tensor capture points in the order they are computed (the first failing one is where the report
# points); its expert ids are compared by agreement (topk_row), not as tensors.
LAYER_POINTS = tuple(point for point in vocabulary.LAYER_POINTS if point not in vocabulary.ROUTE_POINTS)
HEAD_POINTS = vocabulary.HEAD_POINTS
ROUTINGS = ("replay", "own")


@dataclass
class Options:
    reference: str = "auto"  # auto | naive | transformers | golden:FILE
    tokens: str | None = None  # FILE | IDS | None (built-in)
    candidate: str = "fast"  # the tier under test
    routing: str = "replay"  # replay: the candidate uses the reference's experts; own: its own choice
    reload_check: bool = True
    device: str = "auto"  # auto | cpu | cuda
    kernels: str = "auto"  # the fast tier's kernels: auto (Triton on a GPU, torch on a CPU) | triton | torch

    def __post_init__(self) -> None:
        # Checked where the options are made (the command's entry), before a checkpoint is opened.
        if self.candidate not in TIERS:
            raise InputError(f"--candidate {self.candidate!r}: choose from {', '.join(TIERS)}")
        if self.routing not in ROUTINGS:
            raise InputError(f"--routing {self.routing!r}: choose from {', '.join(ROUTINGS)}")


@dataclass(frozen=True)
class Verdict:
    """What validate() returns on each rank: the status, which every rank shares, and the report, which rank 0 (or
    the only rank) holds; the other ranks of a torchrun hold None."""

    status: str  # pass | fail
    report: Report | None = None


@dataclass
class RankResult:
    """What one rank found: checks in the order they ran (numerics rows, router rows, reload, log-probs)."""

    checks: list[dict] = field(default_factory=list)
    logprobs: dict | None = None
    seconds: dict[str, float] = field(default_factory=lambda: {"reference": 0.0, "candidate": 0.0, "floor": 0.0})
    backends: dict[str, str] = field(default_factory=dict)  # op -> "triton" | "torch", for the layers this rank ran
    # without routing replay: per layer, the candidate's and the floor's drift from the reference (layer output,
    # own top-k agreement); at the head, both sides' end-to-end figures (floor.figures)
    unreplayed_layers: list[dict] = field(default_factory=list)
    unreplayed: dict | None = None


@dataclass
class Track:
    """A residual state carried from part to part beside the streamed models' own (the candidate's un-replayed
    state when its main run replays the reference's routing)."""

    dtype: torch.dtype
    stream: Stream | None = None
    batch: Batch | None = None


def validate(checkpoint: Checkpoint, spec: ModelSpec, options: Options) -> Verdict:
    """Validate the open `checkpoint` against `spec`, both as the caller parsed them at its entry (neither is opened
    or derived again here); the Verdict holds the report (a dashboard Report, stage "validate") on rank 0."""
    ranks = distributed.init(options.device)
    ok = False
    try:
        source = open_source(checkpoint, spec)
        choice = resolve_reference(options.reference, source)
        kind = choice.kind
        golden = load_golden(kind, spec.vocab_size) if kind.startswith("golden:") else None
        if golden is not None:
            ids, token_source = golden.input_ids, f"{golden.path} (input_ids)"
            if options.tokens is not None:
                given, _ = parse_tokens(options.tokens, spec.vocab_size)
                if not torch.equal(given, ids):
                    raise InputError(f"--tokens: differ from the input_ids of {golden.path} (leave --tokens out)")
        else:
            ids, token_source = parse_tokens(options.tokens, spec.vocab_size)
        check_ids(ids, spec.vocab_size, token_source)

        if kind == "naive":
            reference = NaiveReference(source, ranks.device)
        elif kind == "transformers":
            reference = TransformersReference(source, ids, choice.take_model())  # auto's model: not loaded again
        else:
            assert golden is not None
            reference = GoldenReference(golden)
        class_name, rows = rows_for(options.candidate, reference.precision, reference.independent)
        candidate = StreamedModel(
            spec, options.candidate, ShardReader(source.checkpoint), source.manifest, ranks.device, options.kernels
        )
        # the noise floor of a bf16 comparison; an fp32 one is judged by the table alone (floor.py)
        floor = None
        if class_name == "bf16":
            floor = StreamedModel(spec, FLOOR_TIER, ShardReader(source.checkpoint), source.manifest, ranks.device)
        result = _run(spec, ids, reference, candidate, floor, rows, options, ranks)
        result.backends = candidate.model.backends()
        results = distributed.gather(result, ranks)
        report = None
        if ranks.first:
            assert results is not None
            report = build_report(
                spec=spec,
                source=source,
                results=results,
                meta={
                    "candidate": options.candidate,
                    "reference": reference.name,
                    "reference_reason": source.reference_note,  # why not transformers, where it was not
                    "comparison": class_name,
                    "rows": rows,
                    "routing": "replayed" if options.routing == "replay" else "own",
                    "device": str(ranks.device),
                    "tokens": {"batch": int(ids.shape[0]), "length": int(ids.shape[1]), "source": token_source},
                    "reload_check": options.reload_check,
                    "ranks": ranks.world,
                },
            )
        status = distributed.broadcast(report.status if report is not None else None, ranks)
        ok = True
        return Verdict(status, report)
    finally:
        distributed.finish(ranks, ok)


def _run(spec, ids, reference, candidate: StreamedModel, floor: StreamedModel | None, rows, options: Options,
         ranks) -> RankResult:  # fmt: skip
    out = RankResult()
    B, T = ids.shape
    N, D = B * T, spec.hidden_size
    batch = Batch((T,) * B, (0,) * B)
    reload_check = options.reload_check
    replay = options.routing == "replay"
    # the candidate's un-replayed end-to-end state: a second one under replay, else its main run is un-replayed
    own = Track(candidate.dtype, batch=batch) if replay else None
    sides = (reference.model if reference.streamed else None, candidate, own, floor)
    carried = [side for side in sides if side is not None]  # the states handed from rank to rank, in this order

    def timed(side: str, fn):
        start = time.perf_counter()
        value = fn()
        out.seconds[side] += time.perf_counter() - start
        return value

    def reloaded() -> None:
        for entry in candidate.drain_reload():
            out.checks.append({"kind": "reload", **entry, "passed": entry["identical"]})

    def compare_points(names, layer: int, rc: dict, cc: dict | None, prefix: str = "", kind: str = "numerics",
                       judged: bool = True) -> None:  # fmt: skip
        for point in names:
            name = prefix + point
            if cc is not None and name in rc and name in cc:
                row = tensor_row(point, layer, cc[name], rc[name], rows.activations)
                out.checks.append({"kind": kind, **row, "judged": judged})

    def router(layer: int, rc: dict, cc: dict | None, kind: str) -> None:
        p = layer_point(layer, "")
        if cc is not None and p + Point.OWN_TOPK_IDS in cc and p + Point.TOPK_IDS in rc:
            row = topk_row(layer, cc[p + Point.OWN_TOPK_IDS], rc[p + Point.TOPK_IDS], rows.topk)
            out.checks.append({"kind": kind, **row, "judged": kind == "router"})

    def drift(layer: int, rc: dict, oc: dict, fc: dict | None) -> None:
        """Un-replayed drift at layer i: the layer output and the routing, candidate and floor against reference."""
        p = layer_point(layer, "")
        row: dict = {"layer": layer}
        for side, cap in (("candidate", oc), ("floor", fc)):
            if cap is None:
                continue
            if p + Point.OUT in rc and p + Point.OUT in cap:
                point = tensor_row(Point.OUT, layer, cap[p + Point.OUT], rc[p + Point.OUT], rows.activations)
                row[f"{side}_rel_rms"] = point["rel_rms"]
            if p + Point.TOPK_IDS in rc and p + Point.TOPK_IDS in cap:
                row[f"{side}_topk_agreement"] = 1 - topk_disagreement(cap[p + Point.TOPK_IDS], rc[p + Point.TOPK_IDS])
        if len(row) > 1:
            out.unreplayed_layers.append(row)

    if ranks.first:
        rc = timed("reference", lambda: reference.embed(ids))
        cc = Capture()
        timed("candidate", lambda: candidate.embed(ids, cc, reload_check))
        reloaded()
        compare_points((Point.EMBED,), -1, rc, cc)  # the embedding has no input state: local and end to end agree
        if own is not None:
            own.stream = candidate.stream  # one embedding; a layer never changes the state it reads
        if floor is not None:
            timed("floor", lambda: floor.embed(ids))
    else:
        bank = sum(layer.snapshot for layer in spec.layers[: ranks.layers(spec.num_layers).start])
        for side in carried:
            side.stream = distributed.recv_stream(ranks.rank - 1, (N, D), side.dtype, bank, ranks.device)
            side.batch = batch

    for i in ranks.layers(spec.num_layers):
        step(f"validate: layer {i + 1} of {spec.num_layers}")  # a faithful-scale layer takes minutes on a CPU
        state = reference.state(i)  # the reference's input to layer i, for the layer-local run
        rc = timed("reference", lambda i=i: reference.layer(i))
        p = layer_point(i, "")
        routes = {p + Point.TOPK_IDS: rc[p + Point.TOPK_IDS]} if replay and p + Point.TOPK_IDS in rc else {}
        cc = Capture(routes=routes)
        lc = Capture(routes=routes) if state is not None else None
        extra = [(state, lc)] if lc is not None else []
        oc = Capture(p + Point.OUT, p + Point.TOPK_IDS) if own is not None else cc
        if own is not None:
            extra.append((own.stream, oc))
        outputs = timed("candidate", lambda i=i, cc=cc, extra=extra: candidate.layer(i, cc, reload_check, extra))
        if own is not None:
            own.stream = outputs[-1]
        reloaded()
        fc = Capture(p + Point.OUT, p + Point.TOPK_IDS) if floor is not None else None
        if floor is not None:
            timed("floor", lambda i=i, fc=fc: floor.layer(i, fc))
        for point in LAYER_POINTS:
            compare_points((point,), i, rc, lc, p)
            if point == "router_logits":
                router(i, rc, lc, "router")
        for point in LAYER_POINTS:
            compare_points((point,), i, rc, cc, p, "end_to_end", judged=False)
            if point == "router_logits":
                router(i, rc, cc, "router_end_to_end")
        drift(i, rc, oc, fc)
        del rc, cc, lc, oc, fc, extra, state, outputs

    if not ranks.last:
        for side in carried:
            assert isinstance(side.stream, Stream)
            distributed.send_stream(side.stream, ranks.rank + 1)
    else:
        state = reference.state(spec.num_layers)
        rc = timed("reference", reference.head)
        cc = Capture()
        lc = Capture() if state is not None else None
        extra = [(state, lc)] if lc is not None else []
        oc = Capture(Point.LOGITS) if own is not None else cc
        if own is not None:
            extra.append((own.stream, oc))
        logits = timed("candidate", lambda: candidate.head(cc, reload_check, extra))
        reloaded()
        compare_points(HEAD_POINTS, spec.num_layers, rc, lc)
        compare_points(HEAD_POINTS[:-1], spec.num_layers, rc, cc, "", "end_to_end", judged=False)
        compare_points((Point.LOGITS,), spec.num_layers, rc, cc, "", "end_to_end", judged=True)  # what users see
        V = logits.shape[-1]
        ref_logprobs = reference.logprobs(rc[Point.LOGITS].reshape(B, T, V)).cpu()
        out.logprobs = logprob_metrics(logits.reshape(B, T, V).cpu(), ref_logprobs, ids, rows)

        def unreplayed(side_logits: torch.Tensor) -> dict:
            row = tensor_row(Point.LOGITS, spec.num_layers, side_logits, rc[Point.LOGITS], rows.activations)
            metrics = logprob_metrics(side_logits.reshape(B, T, V).float().cpu(), ref_logprobs, ids, rows)
            return figures(row, metrics, B * T)

        out.unreplayed = {"candidate": unreplayed(oc[Point.LOGITS])}
        if floor is not None:
            out.unreplayed["floor"] = unreplayed(timed("floor", floor.head))
    return out
