"""`integrate plan SPEC`: memory and decode-speed arithmetic for serving on N GPUs. Exit 1 when the model does not
fit them (the plan then names the smallest count that fits for every GPU kind it knows)."""

from __future__ import annotations

import click
from dayone.present import console, emit_json, human_bytes, human_count, shown
from dayone.spec.planner import GPUS, MEMORY_FRACTION, make_plan
from dayone.spec.registry import load_spec


@click.command()
@click.argument("spec_arg", metavar="SPEC")
@click.option("--gpu", type=click.Choice(sorted(GPUS)), default="h200", show_default=True)
@click.option("--gpus", type=click.IntRange(1, 4096), default=8, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plan(spec_arg: str, gpu: str, gpus: int, as_json: bool) -> None:
    """Parameters, bytes, per-request state, memory left and the batch-1 decode bound."""
    p = make_plan(load_spec(spec_arg), gpu, gpus)
    if as_json:
        emit_json(p.as_dict())
    else:
        _show(p, gpu, gpus)
    if not p.fits:
        raise SystemExit(1)


def _show(p, gpu: str, gpus: int) -> None:
    device = GPUS[gpu]
    console.print(
        f"[bold]{shown(p.spec)}[/] on {gpus} x {device.name} "
        f"({human_bytes(device.memory_bytes)}, {device.hbm_bytes_per_s / 1e12:.2f} TB/s each)"
    )
    console.print(
        f"  parameters: {human_count(p.params_total)} total, {human_count(p.params_activated)} activated per token"
    )
    dtypes = ", ".join(f"{d} {human_bytes(b)}" for d, b in sorted(p.stored_bytes_by_dtype.items()))
    console.print(
        f"  weights stored: {human_bytes(p.stored_bytes)} ({dtypes}); served: {human_bytes(p.served_bytes)}"
        f" ({p.served_note})"
    )
    console.print(
        f"  KDA state per request: {human_bytes(p.kda_state_bytes_per_request)}; "
        f"MLA latent cache per token: {human_bytes(p.mla_cache_bytes_per_token)}"
    )
    console.print(
        f"  memory: {gpus} x {human_bytes(device.memory_bytes)} x {MEMORY_FRACTION} = "
        f"{human_bytes(p.usable_bytes)} usable - {human_bytes(p.served_bytes)} weights = "
        f"{human_bytes(p.free_bytes_for_requests)} for requests"
    )
    if p.fits:
        console.print(f"  fits: {p.requests_at_context:,} requests of {p.context_tokens:,} tokens at once")
    else:
        console.print(
            f"  [red]does not fit[/]: the weights alone need at least {p.min_gpus} x {device.name} "
            f"({human_bytes(p.served_bytes)} / {human_bytes(device.memory_bytes * MEMORY_FRACTION)})"
        )
        console.print(f"  {p.smallest_fits()}")
    console.print(
        f"  batch-1 decode bound: {human_bytes(p.decode_bytes_per_token)} read per token / "
        f"{p.aggregate_hbm_bytes_per_s / 1e12:.2f} TB/s aggregate = "
        f"{p.decode_bound_tokens_per_s:,.1f} tok/s at most"
    )


COMMAND = plan
