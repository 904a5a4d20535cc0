"""A toy translation task for tests, benchmarks and smoke runs: seeded random sentences over a small
vocabulary (`sentences`), word-for-word translations of them (`word_for_word`; `toy_pairs` is the
Spanish->English one), and a d_model=32 Transformer trained on `toy_pairs` for a few seconds
(`build_toy_model_dir`), so that it translates them, stops after a few words and has readable cross
attention; `build_toy_multilingual_model_dir`: the same Spanish into English or German, chosen by a
`>>en<<` / `>>de<<` tag at the start of the source, as a tagged recipe prepares it.
`stored_toy_model_dir`: the toy translator without training it, from its stored copy
(tests/decode/golden/toy_a: what `build_toy_model_dir` trains, the same weights bit for bit).

    toy_pairs(3, seed=1)          # [("el gato come", "the cat eats"), ...]
    build_toy_model_dir(Path("runs/toy/model"))
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from aiayn.config import EOS_ID, PAD_ID, ModelConfig
from aiayn.data.tokenizer import Tokenizer
from aiayn.model.io import load_model_dir, save_model_dir
from aiayn.model.transformer import Transformer
from aiayn.runtime.linear import route_linears

LEXICON = {
    "el": "the", "la": "the", "un": "a", "una": "a", "casa": "house", "perro": "dog", "gato": "cat",
    "sol": "sun", "luna": "moon", "agua": "water", "verde": "green", "grande": "big", "come": "eats",
    "bebe": "drinks", "mira": "sees", "duerme": "sleeps",
}  # fmt: skip


def _words(rng: random.Random, words: Sequence[str], lengths: tuple[int, int]) -> list[str]:
    return [rng.choice(words) for _ in range(rng.randint(*lengths))]


def sentences(words: Sequence[str], n: int, seed: int, lengths: tuple[int, int]) -> list[str]:
    """n seeded random sentences of `lengths` (least, most) words drawn from `words`."""
    rng, words = random.Random(seed), list(words)
    return [" ".join(_words(rng, words, lengths)) for _ in range(n)]


LEXICON_DE = {
    "el": "der", "la": "die", "un": "ein", "una": "eine", "casa": "haus", "perro": "hund", "gato": "katze",
    "sol": "sonne", "luna": "mond", "agua": "wasser", "verde": "gruen", "grande": "gross", "come": "isst",
    "bebe": "trinkt", "mira": "sieht", "duerme": "schlaeft",
}  # fmt: skip
TARGETS = {"de": LEXICON_DE, "en": LEXICON}  # the multilingual toy's target languages


def word_for_word(
    n: int,
    seed: int = 0,
    lexicon: Mapping[str, str] = LEXICON,
    lengths: tuple[int, int] = (1, 6),
    reverse: bool = False,
) -> list[tuple[str, str]]:
    """n seeded random (source, target) pairs: source words from `lexicon`, each translated by it
    (in reverse order with `reverse`)."""
    rng, words = random.Random(seed), list(lexicon)
    pairs = []
    for _ in range(n):
        src = _words(rng, words, lengths)
        tgt = [lexicon[w] for w in (reversed(src) if reverse else src)]
        pairs.append((" ".join(src), " ".join(tgt)))
    return pairs


def toy_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n random (Spanish, English) pairs of 1 to 6 words: what the toy translator is trained on."""
    return word_for_word(n, seed)


def write_parallel(pairs: Sequence[tuple[str, str]], src: Path, tgt: Path) -> tuple[Path, Path]:
    """The sources and the targets of `pairs`, one per line (UTF-8), in `src` and `tgt`."""
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return src, tgt


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


def build_toy_model_dir(out_dir: Path, steps: int = 400, reverse: bool = False, **model: int) -> Path:
    """config.json + model.safetensors + spm.model of the toy translator (2+2 layers, 4 heads);
    `model`: ModelConfig fields changed (a smaller draft model: n_layers=1, decoder_layers=1, ...);
    `reverse`: English->Spanish instead (the same vocabulary, trained on the same text)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pairs = toy_pairs(4096)
    tokenizer = Tokenizer.train([x for pair in pairs for x in pair], out_dir / "spm.model", vocab_size=80)
    languages = {"src_lang": "es", "tgt_lang": "en"}
    if reverse:
        pairs = [(t, s) for s, t in pairs]
        languages = {"src_lang": "en", "tgt_lang": "es"}
    torch.manual_seed(0)
    sizes = {"d_model": 32, "d_ff": 64, "n_heads": 4, "n_layers": 2, **model}
    config = ModelConfig(vocab_size=tokenizer.vocab_size, dropout=0.0, **sizes)
    model = route_linears(Transformer(config))  # products through oneDNN, as aiayn's trainer does
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small gain nothing from threads; a busy machine loses a lot
    try:
        _train(model, tokenizer, pairs, steps)
    finally:
        torch.set_num_threads(threads)
    return save_model_dir(model, out_dir, **languages)


STORED_TOY = Path(__file__).parent / "decode" / "golden" / "toy_a"  # build_toy_model_dir's output
STORED_REVERSE = Path(__file__).parent / "data" / "golden" / "toy_reverse"  # the same, reverse=True


def stored_toy_model_dir(out_dir: Path) -> Path:
    """The toy translator of `build_toy_model_dir` in a second instead of its training: the stored copy's
    weights and spm.model, written as today's model directory (config.json with every field and the
    version). Retrain the copy when the recipe changes (tests/decode/test_golden.py --models)."""
    model, info = load_model_dir(STORED_TOY)
    languages = {"src_lang": info["src_lang"], "tgt_lang": info["tgt_lang"]}
    return save_model_dir(model, out_dir, STORED_TOY / "spm.model", **languages)


def stored_toy_reverse_model_dir(out_dir: Path) -> Path:
    """The toy translator's reverse (English->Spanish, `build_toy_model_dir(reverse=True)`) from its
    stored copy: its weights and config.json, and toy_a's spm.model (the same text trains both)."""
    model, info = load_model_dir(STORED_REVERSE)
    languages = {"src_lang": info["src_lang"], "tgt_lang": info["tgt_lang"]}
    return save_model_dir(model, out_dir, STORED_TOY / "spm.model", **languages)


def tagged_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n pairs per target language of TARGETS, each source starting with its tag (">>de<< el gato")."""
    return [
        (f">>{lang}<< {src}", tgt)
        for lang, lexicon in TARGETS.items()
        for src, tgt in word_for_word(n, seed, lexicon)
    ]


def build_toy_multilingual_model_dir(out_dir: Path, steps: int = 300) -> Path:
    """The toy translator of Spanish into German and English (target_languages in config.json, the
    tags user-defined SentencePiece pieces, as `aiayn prepare` with a tagged recipe makes them)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pairs = tagged_pairs(2048)
    tags = [f">>{lang}<<" for lang in TARGETS]
    texts = [x for pair in pairs for x in pair]
    tokenizer = Tokenizer.train(texts, out_dir / "spm.model", vocab_size=120, user_symbols=tags)
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, dropout=0.0, d_model=32, d_ff=64, n_heads=4, n_layers=2
    )
    model = route_linears(Transformer(config))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _train(model, tokenizer, random.Random(0).sample(pairs, len(pairs)), steps)
    finally:
        torch.set_num_threads(threads)
    languages = {"target_languages": list(TARGETS), "target_tag": ">>{lang}<<"}
    return save_model_dir(model, out_dir, src_lang="es", tgt_lang="mul", **languages)
