"""The Transformer (section 3, Figure 1): encoder and decoder stacks, embeddings, output softmax.

`Transformer.forward(src, tgt_in)` is the training pass; `encode`, `start_decoding` and
`decode_step` are what a search calls to decode one position at a time with cached keys and
values. The model knows nothing of search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.cache import KVCache, WindowCache
from aiayn.model.dropout import dropout
from aiayn.model.embedding import (
    LearnedPositions,
    OutputLayer,
    SinusoidalPositions,
    TokenEmbedding,
    hold_row_at_zero,
)
from aiayn.model.layers import DecoderLayer, EncoderLayer, LayerSettings


class Encoder(nn.Module):
    """3.1: a stack of N identical layers over embedded inputs (batch, len, d_model).

    It takes vectors, not token ids, so any embedding (words, image patches) can feed it.
    """

    def __init__(self, config: LayerSettings):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.use_final_norm else None

    def forward(self, x: Tensor, mask: Tensor | None = None, weights: list[Tensor] | None = None) -> Tensor:
        """x (batch, len, d_model); mask (batch, 1, 1, len) True at real tokens, or None.

        If `weights` is a list, each layer's attention weights (batch, heads, len, len) are appended.
        """
        for layer in self.layers:
            x, w = layer(x, mask, need_weights=weights is not None)
            if weights is not None:
                weights.append(w)
        return self.norm(x) if self.norm is not None else x


class Decoder(nn.Module):
    """3.1: a stack of N decoder layers; self-attention is masked so position i sees only < i+1."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.decoder_layers))
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.use_final_norm else None

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None,
        memory_mask: Tensor | None,
        state: DecoderState | None = None,
        weights: dict[str, list[Tensor]] | None = None,
        self_mask: Tensor | None = None,
    ) -> Tensor:
        """x (batch, tgt_len, d_model) -> (batch, tgt_len, d_model); `self_mask`: what the new
        positions may see of the cached ones (`DecoderLayer.forward`)."""
        for i, layer in enumerate(self.layers):
            cache = state.self_kv[i] if state is not None else None
            memory_kv = state.cross_kv[i] if state is not None else None
            x, w = layer(x, memory, memory_mask, cache, memory_kv, weights is not None, self_mask)
            if weights is not None:
                weights["decoder"].append(w[0])
                weights["cross"].append(w[1])
        return self.norm(x) if self.norm is not None else x


@dataclass
class DecoderState:
    """What incremental decoding carries between steps, for a batch of (sentence x beam) rows.

    self_kv: one KVCache per layer (a WindowCache of the last r + 1 positions with an attention
    window r), a row per hypothesis; cross_kv: per layer the encoder's keys
    and values (`MultiHeadAttention.cached_kv`: K^T (n, heads, d_k, src_len), V (n, heads, src_len,
    d_v)), computed once, a row per sentence: its `beam` hypotheses query them together;
    memory_mask (n, 1, 1, src_len) or None. `native` is not the model's: a native decoding step
    keeps its view of these tensors there, made again where they change.
    """

    self_kv: list[KVCache]
    cross_kv: list[tuple[Tensor, Tensor]]
    memory_mask: Tensor | None
    beam: int = 1
    step: int = 0
    native: Any = field(
        default=None, repr=False, compare=False
    )  # a native step's (aiayn.runtime.native_step)

    def reorder(self, index: Tensor) -> None:
        """Keep the self-attention prefixes of rows `index` (batch,) (beam search's survivors).

        Rows must stay within their sentence: the encoder's keys and values are not moved.
        """
        for cache in self.self_kv:
            cache.reorder(index)

    def select(self, index: Tensor) -> None:
        """Keep only rows `index` (batch',) everywhere: drops finished sentences from the batch.

        When `index` keeps whole sentences (their `beam` rows together: beam search) the encoder's
        keys and values stay one per sentence; otherwise (samples end one by one) one per row.
        """
        for cache in self.self_kv:
            cache.reorder(index)
        sentences = index // self.beam  # (batch',) the sentence of each kept row
        groups = sentences.view(-1, self.beam) if sentences.numel() % self.beam == 0 else None
        if groups is not None and bool(groups.eq(groups[:, :1]).all()):
            sentences = groups[:, 0]  # (n',)
        else:
            self.beam = 1
        self.cross_kv = [(k[sentences], v[sentences]) for k, v in self.cross_kv]
        if self.memory_mask is not None:
            self.memory_mask = self.memory_mask[sentences]


class Transformer(nn.Module):
    """Encoder-decoder Transformer with the paper's shared embeddings (3.4) and defaults (Table 3).

    When the decoder starts from <pad> (the default), the <pad> row of the target embedding is held
    at zero, so the first decoder input is the position encoding alone (tensor2tensor, Marian).
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.tgt_embed = TokenEmbedding(config.vocab_size, d, config.scale_embedding)
        if config.tie_embeddings == "all":
            self.src_embed = self.tgt_embed  # one Parameter for source, target and output (3.4)
        else:
            self.src_embed = TokenEmbedding(config.source_vocab_size, d, config.scale_embedding)
        self.src_pos, self.tgt_pos = self._positions(config), self._positions(config)
        self.encoder, self.decoder = Encoder(config), Decoder(config)
        if config.tie_embeddings == "none":
            self.output_weight = nn.Parameter(torch.empty(config.vocab_size, d))
            nn.init.xavier_uniform_(self.output_weight)
        else:
            self.output_weight = self.tgt_embed.weight
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size)) if config.final_logits_bias else None
        self.output_layer = OutputLayer()
        if config.zero_start:
            hold_row_at_zero(self.tgt_embed.weight, config.pad_id)
        self._init_projections()
        self._n_parameters = sum(p.numel() for p in self.parameters())  # shared ones once

    @staticmethod
    def _positions(config: ModelConfig) -> nn.Module:
        if config.positions == "learned":
            return LearnedPositions(config.max_positions, config.d_model)
        return SinusoidalPositions(config.d_model, config.sinusoid_layout)

    def _init_projections(self) -> None:
        """Xavier-uniform for every projection, each of Q, K, V on its own; zero biases."""
        fused = {
            id(linear): sizes
            for module in self.modules()
            if isinstance(module, MultiHeadAttention)
            for linear, sizes in module.projections()
        }
        for module in self.modules():
            if isinstance(module, nn.Linear):
                for part in module.weight.data.split(fused.get(id(module), module.out_features), dim=0):
                    nn.init.xavier_uniform_(part)
                nn.init.zeros_(module.bias)

    # -- pieces ---------------------------------------------------------------------------------
    def num_parameters(self) -> int:
        """The model's parameters (Table 3's "params"), each shared tensor counted once.

        Counted when the model was built: a layer put in place of one of its own later, from outside
        (one that keeps its weights in another form, without float Parameters), stands for the same
        parameters.
        """
        return self._n_parameters

    def _embed(self, tokens: Tensor, embed: TokenEmbedding, pos: nn.Module, offset: int = 0) -> Tensor:
        """3.4 + 3.5: scaled embedding plus positions, then dropout (5.4). -> (batch, len, d_model)"""
        x = embed(tokens) + pos(tokens.size(1), offset).to(embed.weight.dtype)
        return dropout(x, self.config.dropout, self.training)

    def source_mask(self, src: Tensor) -> Tensor | None:
        """(batch, 1, 1, src_len) True at real tokens; None when nothing is padded.

        A row that is all padding keeps its first position visible, so attention never divides
        by zero (its outputs are meaningless but finite). Off the CPU and under torch.compile the
        mask is always returned: asking whether anything is padded would wait for the GPU (a host
        sync) or split the compiled graph; an all-True mask changes no result (it changes the kernel:
        PyTorch's flash attention takes no mask, its memory-efficient attention does).
        """
        real = src.ne(self.config.pad_id)  # (batch, src_len)
        if src.device.type == "cpu" and not torch.compiler.is_compiling() and bool(real.all()):
            return None
        real[:, 0] |= ~real.any(dim=1)
        return real[:, None, None, :]

    def logits(self, h: Tensor) -> Tensor:
        """Pre-softmax linear transformation (3.4): (..., d_model) -> (..., vocab)."""
        return self.output_layer(h, self.output_weight, self.output_bias)

    # -- the passes -----------------------------------------------------------------------------
    def encode(self, src: Tensor, weights: list[Tensor] | None = None) -> tuple[Tensor, Tensor | None]:
        """src (batch, src_len) -> memory (batch, src_len, d_model), mask (batch, 1, 1, src_len) | None."""
        mask = self.source_mask(src)
        memory = self.encoder(self._embed(src, self.src_embed, self.src_pos), mask, weights)
        return memory, mask

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        memory_mask: Tensor | None,
        weights: dict[str, list[Tensor]] | None = None,
    ) -> Tensor:
        """Teacher-forced decoder: tgt_in (batch, tgt_len) -> hidden states (batch, tgt_len, d_model).

        Target padding must be on the right: the causal mask then hides it from every real position.
        """
        x = self._embed(tgt_in, self.tgt_embed, self.tgt_pos)
        return self.decoder(x, memory, memory_mask, weights=weights)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """src (batch, src_len), tgt_in (batch, tgt_len) = bos + target[:-1] -> (batch, tgt_len, vocab)."""
        memory, mask = self.encode(src)
        return self.logits(self.decode(tgt_in, memory, mask))

    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> dict[str, list[Tensor]]:
        """Attention weights of every layer for visualisation (the paper's section 7 figures).

        Returns {"encoder": [(batch, heads, src, src)], "decoder": [(batch, heads, tgt, tgt)],
        "cross": [(batch, heads, tgt, src)]}, one tensor per layer.
        """
        maps: dict[str, list[Tensor]] = {"encoder": [], "decoder": [], "cross": []}
        memory, mask = self.encode(src, maps["encoder"])
        self.decode(tgt_in, memory, mask, weights=maps)
        return maps

    # -- incremental decoding -------------------------------------------------------------------
    def start_decoding(
        self, memory: Tensor, memory_mask: Tensor | None, max_len: int, beam: int = 1
    ) -> DecoderState:
        """Cache the encoder's keys/values for every decoder layer and allocate self-attention caches.

        memory (n, src_len, d_model), one row per sentence; the state has one row per hypothesis
        (n * beam, sentence-major). Keys and values are projected and kept once per sentence.
        With an attention window r the self-attention caches hold at most r + 1 positions.
        """
        c = self.config
        kind = (memory.dtype, memory.device, c.value_dim)
        rows, r = memory.size(0) * beam, c.attention_window
        caches = [
            KVCache(rows, c.n_heads, max_len, c.key_dim, *kind)
            if r is None
            else WindowCache(rows, c.n_heads, r, max_len, c.key_dim, *kind)
            for _ in self.decoder.layers
        ]
        cross = [layer.cross_attn.cached_kv(memory) for layer in self.decoder.layers]
        return DecoderState(caches, cross, memory_mask, beam)

    def embed_step(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """tokens (batch,) at position state.step -> their embeddings plus position (batch, d_model)."""
        return self._embed(tokens[:, None], self.tgt_embed, self.tgt_pos, offset=state.step)[:, 0]

    def decode_step(self, tokens: Tensor, state: DecoderState) -> Tensor:
        """tokens (batch,) at position state.step -> logits (batch, vocab); advances the state."""
        x = self.embed_step(tokens, state)[:, None]  # (batch, 1, d_model)
        h = self.decoder(x, None, state.memory_mask, state=state)  # (batch, 1, d_model)
        state.step += 1
        return self.logits(h[:, 0])

    def embed_tokens(self, tokens: Tensor, positions: Tensor) -> Tensor:
        """tokens (batch, q) at `positions` (batch, q) -> embeddings plus positions, then dropout
        (3.4, 3.5, 5.4) (batch, q, d_model): a row's own positions, as `embed_step` gives them."""
        table = self.tgt_pos(int(positions.max()) + 1)  # (positions, d_model)
        x = self.tgt_embed(tokens) + table[positions].to(self.tgt_embed.weight.dtype)
        return dropout(x, self.config.dropout, self.training)

    def decode_tokens(
        self, tokens: Tensor, positions: Tensor, state: DecoderState, self_mask: Tensor
    ) -> Tensor:
        """Several new positions per row in one pass over the cached prefix (speculative decoding
        checks a draft so: aiayn.decode.speculative): tokens (batch, q) at `positions` (batch, q),
        which the caches of `state` place; self_mask (batch, 1, q, keys) True where a new position
        may attend (its row's cached prefix and the new positions up to itself). -> logits
        (batch, q, vocab). state.step is left alone: the caller keeps each row's length."""
        x = self.embed_tokens(tokens, positions)  # (batch, q, d_model)
        return self.logits(self.decoder(x, None, state.memory_mask, state=state, self_mask=self_mask))
