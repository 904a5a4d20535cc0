"""Sampling: outputs drawn from the model's distribution, for back-translation and diversity.

At each step the next token of every row is drawn from the model's log-probabilities divided by the
temperature and cut by top-k and then top-p (nucleus) filtering, renormalised (the order of
fairseq's `--sampling`, CTranslate2's `sampling_topk` / `sampling_topp` and HF `generate`).

The draw is the Gumbel-max trick: argmax(log q + G) with G = -log(-log U) is a sample of q. U
comes from a counter-based hash of (seed, the row's key, step, token), not from a stateful
generator, so a text's samples depend only on the seed, its key (its index in the caller's input)
and which sample it is: never on how texts were batched, sorted or merged with other requests.

Each output is reported with its log P under the model itself (no temperature, no filtering),
summed over its tokens and EOS, and the score log P / lp of beam search; a text's samples come
back best first. Sampling is the loop of greedy search (aiayn.decode.greedy) with a `Sampler`
choosing the tokens (`aiayn.decode.strategies.sample_search`).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.config import SamplingConfig

_MASK = (1 << 62) - 1  # hash values stay non-negative, so shifts are logical


def _mix(x: Tensor) -> Tensor:
    """A 62-bit integer mixer (the rounds of splitmix64, masked): int64 tensor -> int64 tensor."""
    x = ((x ^ (x >> 31)) * 0x7FB5D329728EA185) & _MASK
    x = ((x ^ (x >> 27)) * 0x1B873593F42A2D5B) & _MASK
    return x ^ (x >> 33)


def row_keys(seed: int, texts: Tensor, samples: int) -> Tensor:
    """The key of sample j of text t: texts (n,) int64 -> (n * samples,), text-major."""
    j = torch.arange(samples, dtype=torch.long)
    return _mix(_mix(torch.tensor(seed & _MASK) + texts[:, None] * 0x9E3779B97F4A7C1) + j).view(-1)


def gumbel_noise(keys: Tensor, step: int, vocab: int) -> Tensor:
    """Independent Gumbel(0, 1) noise (rows, vocab) in float64 for rows with these keys (rows,)."""
    step_key = (step * 0x632BE59BD9B4E019) & _MASK
    x = _mix(_mix(keys[:, None] + step_key) + torch.arange(vocab, dtype=torch.long))  # (rows, vocab)
    u = ((x >> 9).double() + 0.5) / 2.0**53  # (rows, vocab) uniform in (0, 1)
    return -torch.log(-torch.log(u))


def filter_log_probs(logp: Tensor, sampling: SamplingConfig) -> Tensor:
    """log q: logp (rows, vocab) / temperature, cut to top-k then top-p, renormalised.

    Top-k keeps ties with the k-th value; top-p keeps each token whose more probable tokens hold
    less than p of the mass (the smallest set holding at least p)."""
    x = logp / sampling.temperature
    if 0 < sampling.top_k < x.size(-1):
        kth = x.topk(sampling.top_k, dim=-1).values[:, -1:]  # (rows, 1)
        x = x.masked_fill(x < kth, -math.inf)
    if sampling.top_p < 1.0:
        ordered, order = x.sort(dim=-1, descending=True)
        probs = ordered.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the more probable tokens
        x = x.scatter(-1, order, ordered.masked_fill(before >= sampling.top_p, -math.inf))
    return x.log_softmax(dim=-1)


@dataclass
class Sampler:
    """Sampling's `Chooser` (aiayn.decode.greedy): each row's token drawn from `sampling`'s filtered
    distribution with the Gumbel noise of the row's key. keys (rows,): `row_keys`, one per row."""

    keys: Tensor
    sampling: SamplingConfig

    def __call__(self, logp: Tensor, step: int, rows: Tensor) -> tuple[Tensor, Tensor]:
        q = filter_log_probs(logp, self.sampling).double()  # (rows, vocab)
        noise = gumbel_noise(self.keys[rows], step, logp.size(-1)).to(q.device)  # (rows, vocab)
        tokens = (q + noise).argmax(dim=-1)  # (rows,)
        return tokens, logp.gather(1, tokens[:, None])[:, 0]


def __getattr__(name: str):
    """`sample_search` with the fields of `SearchRules` as keywords: deprecated (a DeprecationWarning),
    it is aiayn.decode.strategies.sample_search, given a `SearchRules`."""
    if name != "sample_search":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    search = importlib.import_module("aiayn.decode.search")  # the deprecated signatures (it imports this one)

    return search.deprecated(
        __name__, name, "aiayn.decode.strategies.sample_search", search.OLD_ENTRIES[name]
    )
