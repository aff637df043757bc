"""What the candidate is compared with: the reference tier ("naive"), transformers' kimi_linear, or a golden file.

Each reference answers, part by part, the capture points it can produce (names as in dayone.adapters.model.capture,
tokens packed [N, ...]): `embed(ids)`, `layer(i)`, `head()` (with "logits"), and `logprobs()` [B, T, vocab].
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from dayone.adapters.model import Capture
from dayone.adapters.model.attn_residual import Stream
from dayone.core.errors import InputError
from dayone.core.vocabulary import Point, layer_point
from dayone.spec.schema import ModelSpec
from dayone.validate.golden import Golden, read_golden
from dayone.validate.source import ShardReader, Source
from dayone.validate.streamed import StreamedModel

TRANSFORMERS_TYPES = ("kimi_linear",)
# KimiLinearRMSNorm's default eps, which its MLA q_a/kv_a layernorms are built with (not config.rms_norm_eps)
HF_RMSNORM_EPS = 1e-6
# from_pretrained's loading info -> what it means for the reference
LOADING_GAPS = {
    "unexpected_keys": "does not read these checkpoint tensors",
    "missing_keys": "found no checkpoint tensor for these weights",
    "mismatched_keys": "reads these tensors at other shapes",
}


class NaiveReference:
    """The reference tier (fp32, token-by-token KDA, per-token experts), streamed like the candidate."""

    name, precision, independent, streamed = "naive", "fp32", False, True

    def __init__(self, source: Source, device: torch.device) -> None:
        self.model = StreamedModel(source.spec, "reference", ShardReader(source.checkpoint), source.manifest, device)

    def embed(self, ids: torch.Tensor) -> dict:
        cap = Capture()
        self.model.embed(ids, cap)
        return cap

    def state(self, i: int):
        """The residual state entering layer i (i = num_layers: the head's input)."""
        return self.model.stream

    def layer(self, i: int) -> dict:
        cap = Capture()
        self.model.layer(i, cap)
        return cap

    def head(self) -> dict:
        cap = Capture()
        self.model.head(cap)
        return cap

    def logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(logits.double(), -1)


class TransformersReference:
    """transformers' KimiLinearForCausalLM on the same checkpoint: fp32, eval, its torch path (hub kernels off).

    It is not streamed: transformers loads the whole model, runs the tokens once with hooks on every capture point
    it has (embedding, layernorm outputs, attention, router, MLP, layer output, final norm, logits), then lets go."""

    name, precision, independent, streamed = "transformers", "fp32", True, False

    def __init__(self, source: Source, ids: torch.Tensor, hf: torch.nn.Module | None = None) -> None:
        """hf: transformers' model when choosing the reference loaded it already (Choice.take_model); None loads it."""
        self.caps = run_transformers(source.checkpoint.root, ids, hf)
        self.plain = source.spec.residual.kind == "plain"

    def state(self, i: int):
        """The residual state entering layer i: the previous layer's output (plain residuals: the hidden state)."""
        if not self.plain:
            return None
        return Stream(self.caps[Point.EMBED] if i == 0 else self.caps[layer_point(i - 1, Point.OUT)])

    def embed(self, ids: torch.Tensor) -> dict:
        return {k: v for k, v in self.caps.items() if k == Point.EMBED}

    def layer(self, i: int) -> dict:
        prefix = layer_point(i, "")
        return {k: v for k, v in self.caps.items() if k.startswith(prefix)}

    def head(self) -> dict:
        return {k: v for k, v in self.caps.items() if k in (Point.FINAL_NORM, Point.LOGITS)}

    def logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(logits.double(), -1)


class GoldenReference:
    """Stored logits (and the golden run's routing); no per-layer capture points."""

    independent, streamed = False, False

    def __init__(self, golden: Golden) -> None:
        self.golden = golden
        self.name = f"golden:{golden.path}"
        self.precision = "fp32" if golden.tier == "reference" else "bf16"

    def embed(self, ids: torch.Tensor) -> dict:
        return {}

    def state(self, i: int):
        return None

    def layer(self, i: int) -> dict:
        """Only the routing of the golden run (when the file has it), for replay."""
        name = layer_point(i, Point.TOPK_IDS)
        return {name: self.golden.routes[name]} if name in self.golden.routes else {}

    def head(self) -> dict:
        return {Point.LOGITS: self.golden.logits.reshape(-1, self.golden.logits.shape[-1])}

    def logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        # from the stored fp32 logits in float64, as the candidate's: the stored fp32 log-probs carry their own
        # rounding (~1e-7), which a KL bound for fp32-vs-fp32 logits would otherwise measure
        return torch.log_softmax(logits.double(), -1)


def transformers_available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def transformers_gap(spec: ModelSpec) -> str | None:
    """What of the spec transformers' kimi_linear does not implement, in a phrase ("has no softmax router"), or None
    when it implements all of it. Read from transformers' modeling_kimi_linear: plain pre-norm residuals; SiLU
    (config.hidden_act) in the MLPs and the short convs; KDA with the plain softplus decay, f_a_proj and g_a_proj
    both head_dim wide, the low-rank output gate and A_log stored [1, 1, heads, 1]; MLA with no rotary embedding,
    no output gate and q_a/kv_a norms at RMSNorm's default eps; a sigmoid router over groups whose top-2 sum ranks
    them (so at least two experts a group), full-width experts (no latent MoE) and shared experts num_shared x the
    expert width."""
    if spec.residual.kind != "plain":
        return f"has no {spec.residual.kind} residuals"
    if spec.activation.kind != "silu":
        return f"has no {spec.activation.kind} activation"
    kda, mla, moe = spec.kda, spec.mla, spec.moe
    kinds = set(spec.attention_kinds)
    if kda is not None and "kda" in kinds:
        if kda.gate.kind != "plain":
            return f"has no {kda.gate.kind} KDA gate"
        if kda.gate.rank != kda.head_dim:
            return f"has no KDA gate rank {kda.gate.rank}, only head_dim {kda.head_dim}"
        if kda.output_gate.kind != "low_rank":
            return f"has no {kda.output_gate.kind} KDA output gate"
        if kda.output_gate.rank != kda.head_dim:
            return f"has no KDA output gate rank {kda.output_gate.rank}, only head_dim {kda.head_dim}"
        if tuple(kda.a_log_shape) != (1, 1, kda.num_heads, 1):
            return f"has no A_log stored as {list(kda.a_log_shape)} (it reads [1, 1, {kda.num_heads}, 1])"
        if kda.norm_eps != spec.norm_eps:
            return f"has no KDA o_norm eps {kda.norm_eps} apart from rms_norm_eps {spec.norm_eps}"
    if mla is not None and "mla" in kinds:
        if not mla.nope:
            return "has no MLA with RoPE"
        if mla.output_gate:
            return "has no MLA output gate"
        if mla.norm_eps != HF_RMSNORM_EPS:
            return f"has no MLA norm eps {mla.norm_eps} (its q_a/kv_a norms use {HF_RMSNORM_EPS})"
    if spec.quantization is not None and "moe" in spec.ffn_kinds:
        return f"has no {spec.quantization.format} experts"
    if moe is not None and "moe" in spec.ffn_kinds:
        router = moe.router
        if router.activation != "sigmoid":
            return f"has no {router.activation} router"
        if moe.num_experts % router.num_groups or moe.num_experts // router.num_groups < 2:
            return f"has no {router.num_groups} expert groups of {moe.num_experts} experts (it ranks groups by their top 2)"
        if moe.latent_size is not None:
            return "has no latent MoE"
        if moe.shared_intermediate_size != moe.num_shared_experts * moe.expert_intermediate_size:
            return (
                f"has no shared experts {moe.shared_intermediate_size} wide (it builds num_shared_experts x "
                f"expert width = {moe.num_shared_experts * moe.expert_intermediate_size})"
            )
    return None


@dataclass
class Choice:
    """The reference validation takes (auto resolved: naive | transformers | golden:FILE) and, where auto loaded
    transformers' model to read its loading info and took it, that model: handed on (take_model) to
    TransformersReference, so the checkpoint is loaded once."""

    kind: str
    hf: torch.nn.Module | None = None

    def take_model(self) -> torch.nn.Module | None:
        """The loaded model, once: the choice lets go of it, so that the reference frees it when it is done."""
        hf, self.hf = self.hf, None
        return hf


def resolve_reference(kind: str, source: Source) -> Choice:
    """auto -> transformers when it is installed, implements the checkpoint's model type and everything its spec
    asks for, and reads the checkpoint whole (its own loading info, read by loading the model, which the Choice
    then carries), else naive, with the reason in source.reference_note (and, when transformers' model decides, one
    line on the console). An explicit --reference transformers that transformers cannot honour is bad input: here,
    or (its loading info) when run_transformers loads the checkpoint."""
    model_type = source.checkpoint.config.get("model_type")
    implemented = model_type in TRANSFORMERS_TYPES
    gap = transformers_gap(source.spec) if implemented else None
    if kind == "auto":
        if gap is not None:
            _note(source, f"transformers' {model_type} {gap}: judged against the naive reference")
            return Choice("naive")
        if implemented and transformers_available():
            hf, refusal = _load_transformers(source.checkpoint.root)
            if refusal is None:
                return Choice("transformers", hf)
            _note(source, f"{refusal}: judged against the naive reference")
            return Choice("naive")
        # the report says why too; the console does not (the usual case for a model type transformers lacks)
        why = "is not installed" if implemented else f"implements no model_type {model_type!r}"
        source.reference_note = f"transformers {why}: judged against the naive reference"
        return Choice("naive")
    if kind == "transformers":
        if not implemented:
            raise InputError(
                f"--reference transformers: {source.where} is model_type {model_type!r}; transformers implements "
                f"{', '.join(TRANSFORMERS_TYPES)} (use --reference naive)"
            )
        if gap is not None:
            raise InputError(
                f"--reference transformers: {source.where}: transformers' {model_type} {gap} (use --reference naive)"
            )
        if not transformers_available():
            raise InputError("--reference transformers: transformers is not installed (pip install 'dayone[oracle]')")
        return Choice(kind)  # loaded by TransformersReference, once the tokens are known good
    if kind == "naive" or kind.startswith("golden:"):
        return Choice(kind)
    raise InputError(f"--reference {kind!r}: choose auto, naive, transformers or golden:FILE")


def _note(source: Source, line: str) -> None:
    source.reference_note = line
    if os.environ.get("RANK", "0") == "0":  # one line per run, not one per torchrun rank
        import click
        from dayone.present import plain

        # stderr, like every warning: stdout holds only the report (`--json` prints exactly one document there)
        click.echo(plain(line), err=True)


def load_golden(kind: str, vocab_size: int) -> Golden:
    return read_golden(Path(kind.removeprefix("golden:")), vocab_size)


def _load_transformers(root: Path) -> tuple[torch.nn.Module, str | None]:
    """transformers' KimiLinearForCausalLM from root in fp32, and why it would not judge the checkpoint whole, as a
    phrase naming the first tensors its loading info lists ("transformers' kimi_linear does not read these checkpoint
    tensors: ..."), or None when it reads it whole."""
    import logging

    import transformers
    from transformers import KimiLinearForCausalLM

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    logging.getLogger("transformers").setLevel(logging.ERROR)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zero-sized parts (no shared experts) warn on init; nothing is wrong
            hf, loading = KimiLinearForCausalLM.from_pretrained(
                str(root), dtype=torch.float32, output_loading_info=True
            )
    except (OSError, ValueError, RuntimeError) as err:
        raise InputError(f"{root}: transformers cannot load it: {str(err).splitlines()[0]}") from None
    # transformers judges what transformers_gap missed: a checkpoint tensor its model does not read (it loads past
    # one, e.g. an MLA output gate, with a note we silence) or a weight it left initialised at random. A weight the
    # checkpoint does not have is fine where it is empty or zero, as absent as in the checkpoint (no shared experts:
    # 0 wide; no router correction bias: the buffer transformers zeroes).
    params = dict(hf.named_parameters()) | dict(hf.named_buffers())
    loading["missing_keys"] = {n for n in loading.get("missing_keys", ()) if n not in params or params[n].any()}
    unread = {what: sorted(loading[key]) for key, what in LOADING_GAPS.items() if loading.get(key)}
    if not unread:
        return hf, None
    what, names = next(iter(unread.items()))
    return hf, f"transformers' kimi_linear {what}: {', '.join(names[:3])}"


@torch.no_grad()
def run_transformers(root: Path, ids: torch.Tensor, hf: torch.nn.Module | None = None) -> dict[str, torch.Tensor]:
    """Capture points of transformers' forward over ids [B, T], packed [B*T, ...] like ours. Its torch path is the
    oracle: the commands that validate set USE_HUB_KERNELS=NO at their entry (validate_cmd.transformers_torch_path).
    hf: the model as resolve_reference loaded it from root (it read the loading info), or None to load it here."""
    if hf is None:
        hf, refusal = _load_transformers(root)
        if refusal is not None:
            raise InputError(f"{root}: {refusal} (use --reference naive)")
    hf.eval()
    caps: dict[str, torch.Tensor] = {}

    def keep(name: str, index: int | None = None):
        def hook(_module, _inputs, output):
            value = output[index] if index is not None else output
            if isinstance(value, tuple):
                value = value[0]
            caps[name] = value.detach().reshape(-1, value.shape[-1]).clone()

        return hook

    def router(prefix: str):
        def hook(_module, _inputs, output):
            logits, weights, ids_ = output
            order = ids_.argsort(dim=-1)
            caps[prefix + Point.ROUTER_LOGITS] = logits.detach().clone()
            caps[prefix + Point.TOPK_IDS] = ids_.gather(-1, order).clone()
            caps[prefix + Point.TOPK_WEIGHTS] = weights.gather(-1, order).clone()

        return hook

    inner = hf.model
    handles = [inner.embed_tokens.register_forward_hook(keep(Point.EMBED)),
               inner.norm.register_forward_hook(keep(Point.FINAL_NORM))]  # fmt: skip
    for i, layer in enumerate(inner.layers):
        p = layer_point(i, "")
        handles += [
            layer.input_layernorm.register_forward_hook(keep(p + Point.ATTN_IN)),
            layer.self_attn.register_forward_hook(keep(p + Point.ATTN_OUT)),
            layer.post_attention_layernorm.register_forward_hook(keep(p + Point.MLP_IN)),
            layer.mlp.register_forward_hook(keep(p + Point.MLP_OUT)),
            layer.register_forward_hook(keep(p + Point.OUT)),
        ]
        if hasattr(layer.mlp, "gate"):
            handles.append(layer.mlp.gate.register_forward_hook(router(p)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # One teacher-forced pass needs no cache, and an all-KDA stack (a pruned checkpoint) has no attention
            # layer for transformers to size one from.
            logits = hf(input_ids=ids, use_cache=False).logits
    finally:
        for h in handles:
            h.remove()
    caps[Point.LOGITS] = logits.float().reshape(-1, logits.shape[-1])
    del hf
    return caps
