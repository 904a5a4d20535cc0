"""A toy translation task: random Spanish word strings and their word-for-word English."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from aiayn.config import BOS_ID, EOS_ID, PAD_ID
from aiayn.data.tokenizer import Tokenizer
from aiayn.model.transformer import Transformer

LEXICON = {
    "el": "the", "un": "a", "casa": "house", "perro": "dog", "gato": "cat", "sol": "sun",
    "agua": "water", "verde": "green", "grande": "big", "come": "eats", "bebe": "drinks", "mira": "sees",
}  # fmt: skip


def toy_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng, words = random.Random(seed), list(LEXICON)
    pairs = []
    for _ in range(n):
        src = [rng.choice(words) for _ in range(rng.randint(1, 5))]
        pairs.append((" ".join(src), " ".join(LEXICON[w] for w in src)))
    return pairs


def padded(seqs: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s)
    return out


def train_toy(model: Transformer, tokenizer: Tokenizer, pairs: list[tuple[str, str]], steps: int) -> None:
    src_ids, tgt_ids = tokenizer.encode([s for s, _ in pairs]), tokenizer.encode([t for _, t in pairs])
    src = padded([s + [EOS_ID] for s in src_ids])  # (n, src_len)
    tgt_in, tgt_out = padded([[BOS_ID] + t for t in tgt_ids]), padded([t + [EOS_ID] for t in tgt_ids])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        rows = torch.arange(step * 64, step * 64 + 64) % len(pairs)
        logits = model(src[rows], tgt_in[rows])  # (64, tgt_len, vocab)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out[rows].flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
