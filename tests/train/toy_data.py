"""Helpers of the training tests: a small data directory (SentencePiece model + binarized
shards) built from generated text, and a tiny model config that trains in well under a second per
step on the CPU. A module of its own name, so that `from toy_data import ...` finds this file
whichever conftest.py pytest imported first."""

import json
import random

from aiayn.config import ModelConfig, RunConfig, TrainConfig

WORDS = ["ala", "bek", "cor", "dun", "eli", "fam", "gor", "hul"] + ["ix", "jep", "kor", "lum", "mon", "nef"]
TRANSLATION = {w: w[::-1] + "o" for w in WORDS}  # a word-for-word "language"


def make_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        src = [rng.choice(WORDS) for _ in range(rng.randint(2, 9))]
        pairs.append((" ".join(src), " ".join(TRANSLATION[w] for w in reversed(src))))
    return pairs


def write_data_dir(path, n_train=240, n_valid=24, vocab_size=80):
    from aiayn.data.dataset import ShardWriter
    from aiayn.data.tokenizer import Tokenizer

    path.mkdir(parents=True, exist_ok=True)
    splits = {"train": make_pairs(n_train, 1), "valid": make_pairs(n_valid, 2)}
    texts = [side for pair in splits["train"] for side in pair]
    tok = Tokenizer.train(texts, path / "spm.model", vocab_size)
    for split, pairs in splits.items():
        writer = ShardWriter(path, split, tok.vocab_size)
        writer.add(tok.encode([p[0] for p in pairs]), tok.encode([p[1] for p in pairs]))
        writer.close()
    meta = {"pairs": {k: len(v) for k, v in splits.items()}, "src_lang": "xx", "tgt_lang": "yy"}
    (path / "meta.json").write_text(json.dumps(meta))
    return path


def tiny_config(**train) -> RunConfig:
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
