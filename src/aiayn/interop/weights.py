"""Weight names and layouts: aiayn's Transformer <-> Hugging Face's MarianMTModel.

Both are the post-norm encoder-decoder of section 3.1; only names and fusion differ. aiayn projects
self-attention Q, K, V with one fused matrix (rows [q; k; v]) and cross-attention K, V with one
([k; v]); Marian keeps q_proj, k_proj, v_proj apart. Everything else maps one to one.

`permute_model_dim` re-orders the d_model coordinates of every tensor that has them. The network
is equivariant to such a permutation (every LayerNorm, residual sum and matmul treats the model
dimension as an unordered set), so it computes exactly the same function; with the permutation
[0, 2, 4, ..., 1, 3, 5, ...] a model trained with the paper's interleaved sin/cos encoding (3.5)
becomes one with Marian's concatenated [sin | cos] encoding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.errors import AiaynError

# (aiayn module, Marian modules it fuses) inside one encoder / decoder layer.
ENCODER_LAYER = (
    ("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("self_attn.out_proj", ("self_attn.out_proj",)),
    ("attn_res.norm", ("self_attn_layer_norm",)),
    ("ffn.linear1", ("fc1",)),
    ("ffn.linear2", ("fc2",)),
    ("ffn_res.norm", ("final_layer_norm",)),
)
DECODER_LAYER = (
    ("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("self_attn.out_proj", ("self_attn.out_proj",)),
    ("self_res.norm", ("self_attn_layer_norm",)),
    ("cross_attn.q_proj", ("encoder_attn.q_proj",)),
    ("cross_attn.kv_proj", ("encoder_attn.k_proj", "encoder_attn.v_proj")),
    ("cross_attn.out_proj", ("encoder_attn.out_proj",)),
    ("cross_res.norm", ("encoder_attn_layer_norm",)),
    ("ffn.linear1", ("fc1",)),
    ("ffn.linear2", ("fc2",)),
    ("ffn_res.norm", ("final_layer_norm",)),
)


def layer_modules(config: ModelConfig) -> list[tuple[str, tuple[str, ...]]]:
    """Every (aiayn module, Marian modules) pair of the two stacks, with full names."""
    pairs = []
    for stack, n, table in (
        ("encoder", config.n_layers, ENCODER_LAYER),
        ("decoder", config.decoder_layers, DECODER_LAYER),
    ):
        for i in range(n):
            ours, theirs = f"{stack}.layers.{i}.", f"model.{stack}.layers.{i}."
            pairs += [(ours + a, tuple(theirs + m for m in ms)) for a, ms in table]
    return pairs


def _get(state: dict[str, Tensor], key: str) -> Tensor:
    if key not in state:
        raise AiaynError(f"weights have no tensor {key!r}")
    return state[key]


def marian_to_aiayn(
    hf: dict[str, Tensor], config: ModelConfig, embeddings: dict[str, Tensor]
) -> dict[str, Tensor]:
    """Marian state dict -> aiayn state dict (all float32).

    `embeddings` holds the already-resolved Marian "src", "tgt", "output" matrices and "bias"
    (tying differs between transformers versions, so the caller decides which tensors are used).
    """
    state = {}
    for ours, theirs in layer_modules(config):
        for p in ("weight", "bias"):
            state[f"{ours}.{p}"] = torch.cat([_get(hf, f"{m}.{p}") for m in theirs], dim=0)
    state["src_embed.weight"] = embeddings["src"]
    state["tgt_embed.weight"] = embeddings["tgt"]
    state["output_weight"] = embeddings["output"]
    state["output_bias"] = embeddings["bias"].reshape(-1)
    return {k: v.float().contiguous() for k, v in state.items()}


def aiayn_to_marian(state: dict[str, Tensor], config: ModelConfig) -> dict[str, Tensor]:
    """aiayn state dict (concat layout) -> MarianMTModel state dict, each tensor stored once."""
    hf = {}
    for ours, theirs in layer_modules(config):
        for p in ("weight", "bias"):
            for m, part in zip(theirs, state[f"{ours}.{p}"].chunk(len(theirs), dim=0), strict=True):
                hf[f"{m}.{p}"] = part
    if config.tie_embeddings == "all":
        hf["model.shared.weight"] = state["tgt_embed.weight"]
    else:
        hf["model.encoder.embed_tokens.weight"] = state["src_embed.weight"]
        hf["model.decoder.embed_tokens.weight"] = state["tgt_embed.weight"]
    if config.tie_embeddings == "none":
        hf["lm_head.weight"] = state["output_weight"]
    bias = state.get("output_bias")
    hf["final_logits_bias"] = (bias if bias is not None else torch.zeros(config.vocab_size))[None, :]
    return {k: v.detach().float().contiguous().clone() for k, v in hf.items()}


def concat_permutation(d_model: int) -> Tensor:
    """[0, 2, 4, ..., 1, 3, 5, ...]: interleaved sin/cos coordinates -> [sin | cos] (3.5)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


_READS_MODEL_DIM = ("qkv_proj.weight", "q_proj.weight", "kv_proj.weight", "linear1.weight", "embed.weight")
_WRITES_MODEL_DIM = (
    "out_proj.weight",
    "out_proj.bias",
    "linear2.weight",
    "linear2.bias",
    "norm.weight",
    "norm.bias",
)
_NO_MODEL_DIM = ("qkv_proj.bias", "q_proj.bias", "kv_proj.bias", "linear1.bias", "output_bias")


def permute_model_dim(state: dict[str, Tensor], perm: Tensor) -> dict[str, Tensor]:
    """Re-order the d_model coordinates of every tensor by `perm` (d_model,); the function is unchanged.

    Matrices that read the model dimension (embeddings, the output projection, input projections)
    permute their columns; those that write it (output projections, LayerNorm gains and biases)
    permute their rows.
    """
    out = {}
    for key, t in state.items():
        if key.endswith(_READS_MODEL_DIM) or key == "output_weight":
            out[key] = t[:, perm]
        elif key.endswith(_WRITES_MODEL_DIM):
            out[key] = t[perm]
        elif key.endswith(_NO_MODEL_DIM):
            out[key] = t
        else:
            raise AiaynError(f"cannot permute the model dimension of {key!r}: unknown tensor")
    return out
