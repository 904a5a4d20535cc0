"""The tests' toy translator: random Spanish word strings and their word-for-word English, and a
d_model=32 Transformer trained on them for a few seconds, so that it translates them, stops after a
few words and has readable cross attention.

Used by the `toy_model_dir` fixture (tests/conftest.py) and benchmarks/serve_load.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
import torch.nn.functional as F

from aiayn.config import EOS_ID, PAD_ID, ModelConfig
from aiayn.data.tokenizer import Tokenizer
from aiayn.model.io import save_model_dir
from aiayn.model.transformer import Transformer

LEXICON = {
    "el": "the", "la": "the", "un": "a", "una": "a", "casa": "house", "perro": "dog", "gato": "cat",
    "sol": "sun", "luna": "moon", "agua": "water", "verde": "green", "grande": "big", "come": "eats",
    "bebe": "drinks", "mira": "sees", "duerme": "sleeps",
}  # fmt: skip


def toy_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n random (Spanish, English) pairs of 1 to 6 words."""
    rng, words = random.Random(seed), list(LEXICON)
    pairs = []
    for _ in range(n):
        src = [rng.choice(words) for _ in range(rng.randint(1, 6))]
        pairs.append((" ".join(src), " ".join(LEXICON[w] for w in src)))
    return pairs


def _padded(seqs: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s)
    return out


def _train(model: Transformer, tokenizer: Tokenizer, pairs: list[tuple[str, str]], steps: int) -> None:
    src_ids, tgt_ids = tokenizer.encode([s for s, _ in pairs]), tokenizer.encode([t for _, t in pairs])
    src = _padded([s + [EOS_ID] for s in src_ids])  # (n, src_len)
    start = model.config.start_id  # <pad>: a zero vector (the default decoder start)
    tgt_in, tgt_out = _padded([[start] + t for t in tgt_ids]), _padded([t + [EOS_ID] for t in tgt_ids])
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    model.train()
    for step in range(steps):
        rows = torch.arange(step * 64, step * 64 + 64) % len(pairs)
        logits = model(src[rows], tgt_in[rows])  # (64, tgt_len, vocab)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out[rows].flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def build_toy_model_dir(out_dir: Path, steps: int = 400) -> Path:
    """config.json + model.safetensors + spm.model of the toy translator (2+2 layers, 4 heads)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pairs = toy_pairs(4096)
    tokenizer = Tokenizer.train([x for pair in pairs for x in pair], out_dir / "spm.model", vocab_size=80)
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0
    )
    model = Transformer(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small gain nothing from threads; a busy machine loses a lot
    try:
        _train(model, tokenizer, pairs, steps)
    finally:
        torch.set_num_threads(threads)
    return save_model_dir(model, out_dir, src_lang="es", tgt_lang="en")
