"""The network of a Marian export (`export-hf`'s directory) as the torch modules `export-onnx` traces.

They compute what MarianMTModel computes from the same config.json and weights, the paper's
post-norm encoder-decoder (section 3.1): scaled dot-product attention over heads (3.2.1-3.2.2),
each sub-layer LayerNorm(x + Sublayer(x)), ReLU / GELU / Swish feed-forward layers (3.3), the
embeddings scaled by sqrt(d_model) where config.json says so (3.4) plus Marian's [sin | cos]
sinusoidal positions (3.5). Written out here rather than traced through Transformers, so that the
graphs take and return exactly the tensors ONNX Runtime's seq2seq runners and transformers.js feed
(Optimum's names), and so that exporting needs no Transformers at all.

`MarianDecoderGraph` is one decoder step in either of the two forms that `onnx_merge` joins into
decoder_model_merged.onnx: the first step (no past: the cross-attention keys and values are
projected from the encoder output and returned) and a later step (the past self-attention and
cross-attention keys and values come in; the new self-attention ones and the cross ones go out).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "silu": F.silu}
KV_NAMES = ("decoder.key", "decoder.value", "encoder.key", "encoder.value")  # per layer, this order


def past_names(layers: int, prefix: str = "past_key_values") -> list[str]:
    """Optimum's cache names: {prefix}.{i}.decoder.key, ..., {prefix}.{i}.encoder.value per layer."""
    return [f"{prefix}.{i}.{kv}" for i in range(layers) for kv in KV_NAMES]


def marian_positions(n: int, d_model: int) -> Tensor:
    """(n, d_model) Marian's sinusoids (3.5): sin(pos / 10000^(2j/d)) in the first half, cos in the second."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    rates = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (ceil(d/2),)
    angles = pos * rates  # (n, ceil(d/2))
    return torch.cat([angles.sin(), angles.cos()[:, : d_model // 2]], dim=1).float()


def _linear(state: dict[str, Tensor], name: str) -> nn.Linear:
    weight = state[f"{name}.weight"]
    layer = nn.Linear(weight.size(1), weight.size(0))
    layer.weight.data, layer.bias.data = weight, state[f"{name}.bias"]
    return layer


def _norm(state: dict[str, Tensor], name: str) -> nn.LayerNorm:
    layer = nn.LayerNorm(state[f"{name}.weight"].numel(), eps=1e-5)  # Marian's eps (export-hf checks it)
    layer.weight.data, layer.bias.data = state[f"{name}.weight"], state[f"{name}.bias"]
    return layer


class _Attention(nn.Module):
    """Multi-head attention (3.2.2) with Marian's q_proj, k_proj, v_proj, out_proj."""

    def __init__(self, state: dict[str, Tensor], prefix: str, heads: int):
        super().__init__()
        self.q, self.k, self.v, self.out = (
            _linear(state, f"{prefix}.{n}_proj") for n in ("q", "k", "v", "out")
        )
        self.heads = heads

    def split(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, heads, T, d_model / heads)."""
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def attend(self, x: Tensor, k: Tensor, v: Tensor, bias: Tensor) -> Tensor:
        """softmax(Q K^T / sqrt(d_k) + bias) V (3.2.1), heads concatenated and projected: (B, T, d_model)."""
        q = self.split(self.q(x))  # (B, H, T, d_k)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) + bias  # (B, H, T, L)
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).flatten(2))


def _padding_bias(mask: Tensor) -> Tensor:
    """(B, S) 1 = token, 0 = padding -> (B, 1, 1, S) additive bias: 0 or the lowest float."""
    return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min


class _Stack(nn.Module):
    """What the encoder and decoder graphs share: embeddings and Marian's position table."""

    def __init__(self, state: dict[str, Tensor], config: dict[str, Any], side: str):
        super().__init__()
        shared = state.get("model.shared.weight")
        table = shared if shared is not None else state[f"model.{side}.embed_tokens.weight"]
        self.embed = nn.Parameter(table, requires_grad=False)
        self.scale = math.sqrt(config["d_model"]) if config["scale_embedding"] else 1.0
        positions = marian_positions(config["max_position_embeddings"], config["d_model"])
        self.register_buffer("positions", positions, persistent=False)
        self.heads = config[f"{side}_attention_heads"]
        self.act = ACTIVATIONS[config["activation_function"]]

    def embed_at(self, ids: Tensor, start: Tensor | int) -> Tensor:
        """ids (B, T) at positions start.. start+T-1 -> (B, T, d_model)."""
        return F.embedding(ids, self.embed) * self.scale + self.positions[start : start + ids.size(1)]

    def ffn(self, layer: nn.ModuleDict, h: Tensor) -> Tensor:
        return layer["ffn_norm"](h + layer["fc2"](self.act(layer["fc1"](h))))


class MarianEncoderGraph(_Stack):
    """encoder_model.onnx: (input_ids, attention_mask) (B, S) -> last_hidden_state (B, S, d_model)."""

    def __init__(self, state: dict[str, Tensor], config: dict[str, Any]):
        super().__init__(state, config, "encoder")
        self.layers = nn.ModuleList()
        for i in range(config["encoder_layers"]):
            p = f"model.encoder.layers.{i}"
            self.layers.append(
                nn.ModuleDict(
                    {
                        "attn": _Attention(state, f"{p}.self_attn", self.heads),
                        "attn_norm": _norm(state, f"{p}.self_attn_layer_norm"),
                        "fc1": _linear(state, f"{p}.fc1"),
                        "fc2": _linear(state, f"{p}.fc2"),
                        "ffn_norm": _norm(state, f"{p}.final_layer_norm"),
                    }
                )
            )

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        h, bias = self.embed_at(input_ids, 0), _padding_bias(attention_mask)  # (B, S, d), (B, 1, 1, S)
        for layer in self.layers:
            attn = layer["attn"]
            h = layer["attn_norm"](h + attn.attend(h, attn.split(attn.k(h)), attn.split(attn.v(h)), bias))
            h = self.ffn(layer, h)
        return h


class MarianDecoderGraph(_Stack):
    """One decoder step: decoder_model.onnx (with_past False) or decoder_with_past_model.onnx (True).

    forward(input_ids (B, T), encoder_attention_mask (B, S), encoder_hidden_states (B, S, d_model),
    past: 4 tensors per layer as `past_names` orders them (with_past only)) -> logits (B, T, vocab)
    and the 4 present tensors per layer, each (B, heads, length, d_model / heads).
    """

    def __init__(self, state: dict[str, Tensor], config: dict[str, Any], with_past: bool):
        super().__init__(state, config, "decoder")
        self.with_past = with_past
        output = state.get("lm_head.weight")
        self.output = nn.Parameter(output, requires_grad=False) if output is not None else self.embed
        self.register_buffer("bias", state["final_logits_bias"].reshape(-1), persistent=False)
        self.layers = nn.ModuleList()
        for i in range(config["decoder_layers"]):
            p = f"model.decoder.layers.{i}"
            modules = {"self": _Attention(state, f"{p}.self_attn", self.heads)}
            modules["self_norm"] = _norm(state, f"{p}.self_attn_layer_norm")
            modules["cross"] = _Attention(state, f"{p}.encoder_attn", self.heads)
            modules["cross_norm"] = _norm(state, f"{p}.encoder_attn_layer_norm")
            modules.update(fc1=_linear(state, f"{p}.fc1"), fc2=_linear(state, f"{p}.fc2"))
            modules["ffn_norm"] = _norm(state, f"{p}.final_layer_norm")
            self.layers.append(nn.ModuleDict(modules))

    def forward(
        self,
        input_ids: Tensor,
        encoder_attention_mask: Tensor,
        encoder_hidden_states: Tensor,
        past: list[Tensor],
    ) -> tuple[Tensor, ...]:
        start = past[0].size(2) if self.with_past else 0  # tokens already decoded
        h = self.embed_at(input_ids, start)  # (B, T, d)
        steps = input_ids.size(1)
        query_pos = torch.arange(steps)[:, None] + start  # (T, 1)
        causal = torch.where(
            torch.arange(start + steps)[None, :] > query_pos, torch.finfo(torch.float32).min, 0.0
        )  # (T, start + T): a position sees itself and those before it
        cross_bias, presents = _padding_bias(encoder_attention_mask), []
        for i, layer in enumerate(self.layers):
            attn, cross = layer["self"], layer["cross"]
            k, v = attn.split(attn.k(h)), attn.split(attn.v(h))  # (B, H, T, d_k)
            if self.with_past:
                k, v = torch.cat([past[4 * i], k], dim=2), torch.cat([past[4 * i + 1], v], dim=2)
                cross_k, cross_v = past[4 * i + 2], past[4 * i + 3]  # (B, H, S, d_k)
            else:
                cross_k = cross.split(cross.k(encoder_hidden_states))
                cross_v = cross.split(cross.v(encoder_hidden_states))
            h = layer["self_norm"](h + attn.attend(h, k, v, causal))
            h = layer["cross_norm"](h + cross.attend(h, cross_k, cross_v, cross_bias))
            h = self.ffn(layer, h)
            presents += [k, v, cross_k, cross_v]
        return (F.linear(h, self.output) + self.bias, *presents)  # logits (B, T, vocab)
