"""What the candidate is compared with: the reference tier ("naive"), transformers' kimi_linear, or a golden file.

Each reference answers, part by part, the capture points it can produce (names as in dayone.adapters.model.capture,
tokens packed [N, ...]): `embed(ids)`, `layer(i)`, `head()` (with "logits"), and `logprobs()` [B, T, vocab].
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path

import torch
from dayone.adapters.model import Capture
from dayone.adapters.model.attn_residual import Stream
from dayone.core.errors import InputError
from dayone.validate.golden import Golden, read_golden
from dayone.validate.source import ShardReader, Source
from dayone.validate.streamed import StreamedModel

TRANSFORMERS_TYPES = ("kimi_linear",)


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

    def __init__(self, source: Source, ids: torch.Tensor) -> None:
        self.caps = run_transformers(source.checkpoint.root, ids)
        self.plain = source.spec.residual.kind == "plain"

    def state(self, i: int):
        """The residual state entering layer i: the previous layer's output (plain residuals: the hidden state)."""
        if not self.plain:
            return None
        return Stream(self.caps["embed"] if i == 0 else self.caps[f"layers.{i - 1}.out"])

    def embed(self, ids: torch.Tensor) -> dict:
        return {k: v for k, v in self.caps.items() if k == "embed"}

    def layer(self, i: int) -> dict:
        prefix = f"layers.{i}."
        return {k: v for k, v in self.caps.items() if k.startswith(prefix)}

    def head(self) -> dict:
        return {k: v for k, v in self.caps.items() if k in ("final_norm", "logits")}

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
        name = f"layers.{i}.topk_ids"
        return {name: self.golden.routes[name]} if name in self.golden.routes else {}

    def head(self) -> dict:
        return {"logits": self.golden.logits.reshape(-1, self.golden.logits.shape[-1])}

    def logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        # from the stored fp32 logits in float64, as the candidate's: the stored fp32 log-probs carry their own
        # rounding (~1e-7), which a KL bound for fp32-vs-fp32 logits would otherwise measure
        return torch.log_softmax(logits.double(), -1)


def transformers_available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def resolve_reference(kind: str, source: Source) -> str:
    """auto -> transformers when it is installed and the checkpoint's model type is one it implements, else naive."""
    model_type = source.checkpoint.config.get("model_type")
    if kind == "auto":
        return "transformers" if transformers_available() and model_type in TRANSFORMERS_TYPES else "naive"
    if kind == "transformers":
        if model_type not in TRANSFORMERS_TYPES:
            raise InputError(
                f"--reference transformers: {source.where} is model_type {model_type!r}; transformers implements "
                f"{', '.join(TRANSFORMERS_TYPES)} (use --reference naive)"
            )
        if not transformers_available():
            raise InputError("--reference transformers: transformers is not installed (pip install 'dayone[oracle]')")
        return kind
    if kind == "naive" or kind.startswith("golden:"):
        return kind
    raise InputError(f"--reference {kind!r}: choose auto, naive, transformers or golden:FILE")


def load_golden(kind: str, vocab_size: int) -> Golden:
    return read_golden(Path(kind.removeprefix("golden:")), vocab_size)


@torch.no_grad()
def run_transformers(root: Path, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Capture points of transformers' forward over ids [B, T], packed [B*T, ...] like ours."""
    os.environ.setdefault("USE_HUB_KERNELS", "NO")  # its torch path: hub kernels (and fla) are not the oracle
    import logging

    import transformers
    from transformers import KimiLinearForCausalLM

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    logging.getLogger("transformers").setLevel(logging.ERROR)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zero-sized parts (no shared experts) warn on init; nothing is wrong
            hf = KimiLinearForCausalLM.from_pretrained(str(root), dtype=torch.float32).eval()
    except (OSError, ValueError, RuntimeError) as err:
        raise InputError(f"{root}: transformers cannot load it: {str(err).splitlines()[0]}") from None
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
            caps[prefix + "router_logits"] = logits.detach().clone()
            caps[prefix + "topk_ids"] = ids_.gather(-1, order).clone()
            caps[prefix + "topk_weights"] = weights.gather(-1, order).clone()

        return hook

    inner = hf.model
    handles = [inner.embed_tokens.register_forward_hook(keep("embed")),
               inner.norm.register_forward_hook(keep("final_norm"))]  # fmt: skip
    for i, layer in enumerate(inner.layers):
        p = f"layers.{i}."
        handles += [
            layer.input_layernorm.register_forward_hook(keep(p + "attn_in")),
            layer.self_attn.register_forward_hook(keep(p + "attn_out")),
            layer.post_attention_layernorm.register_forward_hook(keep(p + "mlp_in")),
            layer.mlp.register_forward_hook(keep(p + "mlp_out")),
            layer.register_forward_hook(keep(p + "out")),
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
    caps["logits"] = logits.float().reshape(-1, logits.shape[-1])
    del hf
    return caps
