"""Incremental decoding (section 3.1's decoder with cached keys and values) where each row holds its
own number of decoded positions: what speculative decoding needs, whose rows accept drafts of
different lengths (aiayn.decode.speculative).

Each row r keeps its positions 0 .. lengths[r]-1 at the front of its cache. `RaggedDecoder.extend`
feeds q new tokens per row at positions lengths[r] .. lengths[r]+q-1: their keys and values are
written there (`RaggedCache`), their positions encoded there, and a key mask lets each new position
see its row's prefix and the new positions up to itself, nothing past them. `keep` then sets each
row's length, keeping any number of the new positions (the accepted ones) and dropping the rest:
what lies past a row's length is never read again, only overwritten. A model with a native decoder
attached (aiayn.runtime.native_step) computes `extend` in one native call (`decode_positions`);
otherwise Python does, and where every row has the same length the cache is the plain one (a slice
write, a causal mask, and for one token the model's own step).
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor

from aiayn.decode.shortlist import KeptOutput, Shortlist
from aiayn.model.attention import KVCache, causal_mask
from aiayn.model.transformer import Transformer
from aiayn.runtime.blockwise import row_max
from aiayn.runtime.native_step import (
    decode_positions,
    decode_step,
    fallback,
    native_decoder,
    native_target,
    propose_tokens,
)


class RaggedCache(KVCache):
    """A layer's self-attention cache whose rows each hold their own number of positions; `length`
    is the longest row's. Slots past a row's length hold finite values (zeros or dropped keys), so
    a masked key never turns an attention output into NaN (0 x NaN)."""

    def __init__(self, cache: KVCache, owner: RaggedDecoder):
        super().__init__(0, 0, 0, 0, cache.k.dtype, cache.k.device)
        self.k, self.v, self.length, self.owner = cache.k.zero_(), cache.v.zero_(), cache.length, owner

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k (rows, heads, q, d_k), v (rows, heads, q, d_v) written at each row's own positions
        (`RaggedDecoder.index`) -> the keys and values up to the longest row's last new position."""
        index = self.owner.index  # (rows, q) or None: every row at `length`
        if index is None:
            return super().append(k, v)
        rows = torch.arange(index.size(0), device=index.device)[:, None]  # (rows, 1)
        self.k[rows, :, index] = k.transpose(1, 2)  # (rows, q, heads, d_k) into (rows, heads, len, d_k)
        self.v[rows, :, index] = v.transpose(1, 2)
        end = self.owner.end
        return self.k[:, :, :end], self.v[:, :, :end]

    def reorder(self, index: Tensor) -> None:
        """Keep rows `index` (rows',), whole (their dropped slots stay finite)."""
        self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


class RaggedDecoder:
    """A model's decoder over a batch of sources, one row per sentence, rows of their own lengths."""

    def __init__(self, model: Transformer, src: Tensor, capacity: int, shortlist: Shortlist | None = None):
        """src (n, src_len) right-padded; capacity: the most positions a row will hold; `shortlist`:
        the batch's candidates restrict the output layer of `propose` (where it runs natively)."""
        memory, mask = model.encode(src)  # (n, src_len, d_model), (n, 1, 1, src_len) | None
        self.model, self.device, self.capacity = model, src.device, capacity
        self.output = None if shortlist is None else KeptOutput(model, shortlist.kept(src))
        self.state = model.start_decoding(memory, mask, capacity)
        self.state.self_kv = [RaggedCache(c, self) for c in self.state.self_kv]
        self.lengths = torch.zeros(src.size(0), dtype=torch.long)  # (rows,) CPU: positions held
        self.index: Tensor | None = None  # (rows, q) on the device: where `extend` writes
        self.end = 0  # the longest row's length after `extend`
        self._banned: tuple[Tensor, Tensor] | None = None  # `propose`'s banned ids and their kept columns
        self._targets: dict[bool, object] = {}  # the native target side, whole or shortlisted: made once

    def extend(self, tokens: Tensor) -> Tensor:
        """tokens (rows, q) at positions lengths .. lengths + q - 1 -> logits (rows, q, vocab).
        The rows' lengths stay as they were until `keep` says which new positions to keep."""
        self.end = int(self.lengths.max()) + tokens.size(1)
        return decode_positions(self.model, tokens, self.lengths, self.state, lambda: self._python(tokens))

    def _python(self, tokens: Tensor) -> Tensor:
        """`extend` in Python (`Transformer.decode_tokens`, or one step where the rows share a length)."""
        rows, q = tokens.shape
        device, longest = tokens.device, self.end - q
        if bool(self.lengths.eq(longest).all()):
            self.index = None
            self.state.step = longest
            if q == 1:
                return decode_step(self.model, tokens[:, 0], self.state)[:, None]
            positions = torch.arange(longest, self.end, device=device).expand(rows, q)  # (rows, q)
            mask = causal_mask(q, self.end, device)[None, None]  # (1, 1, q, end)
        else:
            positions = (self.lengths[:, None] + torch.arange(q)).to(device)  # (rows, q)
            self.index = positions
            keys = torch.arange(self.end, device=device)  # (end,)
            mask = (keys[None, None, :] <= positions[:, :, None])[:, None]  # (rows, 1, q, end)
        return self.model.decode_tokens(tokens, positions, self.state, mask)

    def propose(self, tokens: Tensor, newest: Tensor, k: int, banned: Tensor) -> Tensor:
        """This model's greedy continuation (a draft's proposals): tokens (rows, q) at positions
        lengths .., row r's newest at newest[r] (rows,) (CPU) -> (rows, k), each the most probable
        token after the ones before, never a `banned` id (ids,); each row then holds its tokens up to
        its newest and the first k - 1 proposals. One native call where the model has a native decoder."""
        native, model = None if self.output is None else self.output.native, self.model
        if native is None or native_decoder(model) is None or model.training or torch.is_grad_enabled():
            found = self._whole(tokens, newest, k, banned)
        else:
            found = self._shortlisted(tokens, newest, k, banned)
        if found is not None:
            self.keep(self.lengths + newest + k)
            return found
        rows = torch.arange(tokens.size(0), device=tokens.device)
        logits = self.extend(tokens)[rows, newest.to(tokens.device)]  # (rows, vocab)
        self.keep(self.lengths + newest + 1)
        proposals: list[Tensor] = []
        for j in range(k):
            if j:
                logits = self.extend(proposals[-1][:, None])[:, 0]  # (rows, vocab)
                self.keep(self.lengths + 1)
            logits[:, banned] = -math.inf
            proposals.append(row_max(logits)[1])
        return torch.stack(proposals, dim=1)

    def _whole(self, tokens: Tensor, newest: Tensor, k: int, banned: Tensor) -> Tensor | None:
        """`propose` over the whole vocabulary in one native call, or None where the model decodes in
        Python."""
        if False not in self._targets:
            if native_decoder(self.model) is None:
                return None
            self._targets[False] = native_target(self.model, self.capacity)
        return propose_tokens(
            self.model, tokens, self.lengths, newest, k, banned, self.state, self._targets[False]
        )

    @fallback(python=lambda self, *args: self._whole(*args), lose=lambda self, *_: self._lose_shortlist())
    def _shortlisted(self, tokens: Tensor, newest: Tensor, k: int, banned: Tensor) -> Tensor:
        """`propose` with the output layer restricted to the batch's shortlist, in one native call."""
        native, model, kept = self.output.native, self.model, self.output.kept  # kept (kept,) sorted ids
        if self._banned is None or self._banned[0] is not banned:  # the banned ids it keeps, once a search
            self._banned = (banned, (kept[None, :] == banned[:, None]).nonzero()[:, 1])
        if True not in self._targets:
            self._targets[True] = native_target(model, self.capacity, kept)
        x = model.embed_tokens(tokens, self.lengths[:, None] + torch.arange(tokens.size(1)))
        return kept[
            native.propose(self._targets[True], x, self.lengths, newest, k, self._banned[1], self.state)
        ]

    def _lose_shortlist(self) -> None:
        """The shortlisted native call failed: the draft proposes over the whole vocabulary from now on."""
        self.output.native.lose()
        self.output = None

    def keep(self, lengths: Tensor) -> None:
        """Each row now holds lengths (rows,) (CPU) positions: its prefix and the new ones it keeps."""
        self.lengths = lengths
        longest = int(lengths.max()) if lengths.numel() else 0
        for cache in self.state.self_kv:
            cache.length = longest

    def select(self, index: Tensor) -> None:
        """Keep only rows `index` (rows',) (CPU), in that order: finished sentences leave."""
        self.state.select(index.to(self.device))
        self.keep(self.lengths[index])


def __getattr__(name: str):
    """The older class names (RowDecoder, RowCache), with a DeprecationWarning."""
    new = {"RowDecoder": "RaggedDecoder", "RowCache": "RaggedCache"}.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    message = f"{name} is deprecated: it is aiayn.decode.ragged.{new} now"
    warnings.warn(message, DeprecationWarning, stacklevel=2)
    return globals()[new]
