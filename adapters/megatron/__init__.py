"""The Megatron model of a spec, built from megatron-core's own pieces (needs megatron-core 0.16.1 importable).

    from dayone.adapters.megatron import block_spec, build_model, transformer_config
    model = build_model(spec)            # megatron-core's GPTModel, after parallel_state.initialize_model_parallel
    block_spec(spec)                     # its decoder's TransformerBlockSubmodules (Miles' --spec, Bridge's provider)

Megatron-core supplies the config (MLATransformerConfig), ModuleSpec layer specs, MLA self-attention, the MoE layer
with its token dispatcher and router, shared experts, parallel linears and the embedding; the modules megatron-core
lacks (KDA, attention residuals, the gated SiTU/SiLU activation, the MoE latent norm, NoPE MLA with an output gate,
experts named as TransformerEngine's grouped linear names them) are written here as megatron-core writes its own,
and call dayone's kernels (Triton on a GPU, their torch counterparts on a CPU).
Parameter names are the weight map's megatron layout: one table feeds Miles, Megatron-Bridge and this model.
"""

__all__ = ["block_spec", "build_model", "transformer_config"]


def __getattr__(name: str):
    # megatron-core is imported only when the model is asked for: the package itself imports without it
    if name == "transformer_config":
        from dayone.adapters.megatron.config import transformer_config

        return transformer_config
    if name == "build_model":
        from dayone.adapters.megatron.model import build_model

        return build_model
    if name == "block_spec":
        from dayone.adapters.megatron.layer_specs import block_spec

        return block_spec
    raise AttributeError(name)
