"""The tests' toy data, all drawn by toy.py's one generator (`sentences`, `word_for_word`):

- `toy_pairs` and `build_toy_model_dir`: the toy translator (the `toy_model_dir` fixture is its stored
  copy) and the Spanish->English pairs it is trained on; `toy_data_dir` (tests/conftest.py) holds 40 of them.
- `unrelated_pairs`: pairs of random English sentences (the `write_corpus` fixture of the prepare
  tests), where only the counts matter.
- `write_data_dir` and `tiny_config`: the training tests' data directory (a SentencePiece model and
  shards of a word-reversing made-up language) and a model that trains in well under a second a step.
- `write_toy_data_dir`: a data directory of the toy task in the toy translator's vocabulary
  (shortlists and distillation are built from one).

The Marian tests draw their own words (tests/interop/marian_helpers.py) with the same `sentences`.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.config import ModelConfig, RunConfig, TrainConfig
from aiayn.data.datadir import DataDir
from toy import build_toy_model_dir, sentences, toy_pairs, word_for_word, write_parallel

__all__ = [
    "build_toy_model_dir",
    "tiny_config",
    "toy_pairs",
    "unrelated_pairs",
    "write_data_dir",
    "write_toy_data_dir",
    "write_parallel",
]

COMMON_WORDS = [
    "the", "a", "of", "to", "and", "in", "that", "is", "for", "it", "with", "as", "was", "on", "be", "at",
    "by", "this", "had", "not", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you",
    "were", "all", "we", "when", "there", "can", "been", "has", "more", "if", "will", "would", "about",
    "so", "what", "their", "said", "each", "she", "do", "how", "up", "out", "them", "then", "many", "some",
    "time", "these", "two", "may", "into", "could", "people", "other", "than", "first", "water", "long",
    "day", "did", "get", "come", "made", "over", "sound", "most", "number", "now", "find", "know", "place",
    "year", "back", "give", "good"
]  # fmt: skip
MADE_UP = ["ala", "bek", "cor", "dun", "eli", "fam", "gor", "hul"] + ["ix", "jep", "kor", "lum", "mon", "nef"]
REVERSED_LANGUAGE = {w: w[::-1] + "o" for w in MADE_UP}  # word for word, in reverse order


def unrelated_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """n pairs of random sentences of 3 to 12 common English words, source and target unrelated."""
    text = sentences(COMMON_WORDS, 2 * n, seed, (3, 12))
    return list(zip(text[::2], text[1::2], strict=True))


def write_data_dir(path: Path, n_train: int = 240, n_valid: int = 24, vocab_size: int = 80) -> Path:
    """A data directory of the made-up language: spm.model, train and valid shards, a short meta.json."""
    from aiayn.data.dataset import ShardWriter
    from aiayn.data.tokenizer import Tokenizer

    path.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": word_for_word(n_train, 1, REVERSED_LANGUAGE, (2, 9), reverse=True),
        "valid": word_for_word(n_valid, 2, REVERSED_LANGUAGE, (2, 9), reverse=True),
    }
    data = DataDir(path)
    tok = Tokenizer.train([side for pair in splits["train"] for side in pair], data.spm_path, vocab_size)
    for split, pairs in splits.items():
        writer = ShardWriter(path, split, tok.vocab_size)
        writer.add(tok.encode([p[0] for p in pairs]), tok.encode([p[1] for p in pairs]))
        writer.close()
    data.write_meta({"pairs": {k: len(v) for k, v in splits.items()}, "src_lang": "xx", "tgt_lang": "yy"})
    return path


def write_toy_data_dir(path: Path, spm: Path, n_train: int = 300, n_test: int = 40) -> Path:
    """A data directory of toy_pairs encoded with `spm` (the toy translator's spm.model, copied):
    train shards and raw text, valid and test (raw text and shards), meta.json."""
    import shutil

    from aiayn.data.dataset import ShardWriter
    from aiayn.data.tokenizer import Tokenizer

    (path / "raw").mkdir(parents=True, exist_ok=True)
    data = DataDir(path)
    shutil.copyfile(spm, data.spm_path)
    tok = Tokenizer.load(data.spm_path)
    splits = {
        "train": toy_pairs(n_train, seed=3),
        "valid": toy_pairs(n_test, 5),
        "test": toy_pairs(n_test, 7),
    }
    for split, pairs in splits.items():
        writer = ShardWriter(path, split, tok.vocab_size)
        writer.add(tok.encode([p[0] for p in pairs]), tok.encode([p[1] for p in pairs]))
        writer.close()
        write_parallel(pairs, data.raw(split, "src"), data.raw(split, "tgt"))
    meta = {
        "pairs": {k: len(v) for k, v in splits.items()},
        "dropped": {},
        "src_lang": "es",
        "tgt_lang": "en",
    }
    data.write_meta(meta)
    return path


def tiny_config(**train) -> RunConfig:
    """A 1-layer d_model=32 model and a 6-step recipe; `train` overrides TrainConfig fields."""
    model = ModelConfig(d_model=32, d_ff=64, n_heads=2, n_layers=1, dropout=0.1)
    defaults = dict(
        max_tokens=200,
        accumulation=1,
        warmup_steps=10,
        lr_peak=3e-3,
        max_steps=6,
        eval_every=1000,
        log_every=2,
        save_every=None,
        save_minutes=None,
        keep_last=10,
        cpu_matmul="onednn",  # no timing-dependent choice: runs compared bit for bit must agree
    )
    return RunConfig(model=model, train=TrainConfig(**{**defaults, **train}))
