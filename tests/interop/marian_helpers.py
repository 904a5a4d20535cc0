"""Helpers for the Marian interop tests: SentencePiece models and vocabularies trained on synthetic
text (toy.py's generator over the words below), and random-initialised MarianMTModel directories
built locally (nothing is downloaded)."""

from __future__ import annotations

import contextlib
import json
import shutil
import warnings
from pathlib import Path

import sentencepiece as spm
import torch

from toy import sentences

SOURCE_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
SOURCE_WORDS += ["eta", "theta", "iota", "kappa", "lambda", "omicron"]
TARGET_WORDS = ["eins", "zwei", "drei", "vier", "fünf", "sechs"]
TARGET_WORDS += ["sieben", "acht", "neun", "zehn", "elf", "zwölf"]


def synthetic_text(words: list[str], n: int, seed: int) -> list[str]:
    """n seeded sentences of 3 to 9 of `words`."""
    return sentences(words, n, seed, (3, 9))


def train_spm(texts: list[str], prefix: Path, vocab_size: int, **ids: int) -> Path:
    """A BPE model; Marian-style ids (</s>=0, <unk>=1, no <s>/<pad>) unless `ids` says otherwise."""
    settings = dict(eos_id=0, unk_id=1, bos_id=-1, pad_id=-1) | ids
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type="bpe",
        minloglevel=2,
        **settings,
    )
    return prefix.with_suffix(".model")


def marian_vocab(models: list[Path], pad_at: int | None = None) -> dict[str, int]:
    """Marian's vocab.json: the pieces of `models`, </s>=0, <unk>=1, <pad> at `pad_at` (default: last)."""
    pieces = ["</s>", "<unk>"]
    for path in models:
        sp = spm.SentencePieceProcessor(model_file=str(path))
        pieces += [p for p in (sp.id_to_piece(i) for i in range(sp.get_piece_size())) if p not in pieces]
    pieces.insert(len(pieces) if pad_at is None else pad_at, "<pad>")
    return {p: i for i, p in enumerate(pieces)}


def vocab_sizes(tok_dir: Path) -> tuple[int, int]:
    src = json.loads((tok_dir / "vocab.json").read_text())
    tgt_file = tok_dir / "target_vocab.json"
    tgt = json.loads(tgt_file.read_text()) if tgt_file.is_file() else src
    return len(src), len(tgt)


def make_marian(
    out: Path,
    tok_dir: Path,
    *,
    d_model: int = 32,
    heads: int = 2,
    ffn: int = 64,
    enc_layers: int = 2,
    dec_layers: int = 1,
    activation: str = "swish",
    scale_embedding: bool = True,
    tie_word_embeddings: bool = True,
    seed: int = 0,
    std: float = 0.3,
    eos_bias: float = 0.0,
    **save_kwargs,
) -> Path:
    """A random MarianMTModel directory (weights, config, tokenizer files) like an OPUS-MT download."""
    from transformers import MarianConfig, MarianMTModel

    separate = (tok_dir / "target_vocab.json").is_file()
    src_vocab, tgt_vocab = vocab_sizes(tok_dir)
    pad = json.loads((tok_dir / "vocab.json").read_text())["<pad>"]
    config = MarianConfig(
        vocab_size=src_vocab,
        decoder_vocab_size=tgt_vocab,
        share_encoder_decoder_embeddings=not separate,
        tie_word_embeddings=tie_word_embeddings,
        d_model=d_model,
        encoder_layers=enc_layers,
        decoder_layers=dec_layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        activation_function=activation,
        scale_embedding=scale_embedding,
        max_position_embeddings=128,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():  # larger than HF's init: decisive logits, LayerNorms that are not the identity
        for name, p in model.named_parameters():
            if "embed_positions" not in name:  # fixed sinusoids (not saved)
                p.normal_(0.0, std if p.dim() > 1 else 0.5)
        model.final_logits_bias.normal_(0.0, 1.0)
        model.final_logits_bias[0, config.eos_token_id] += eos_bias
    model.save_pretrained(out, **save_kwargs)
    for f in tok_dir.iterdir():
        shutil.copyfile(f, out / f.name)
    return out


@contextlib.contextmanager
def quiet_sacremoses():
    """MarianTokenizer warns when sacremoses is missing; it does not change token ids either way."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*sacremoses", category=UserWarning)
        yield


def batch(config) -> tuple[torch.Tensor, torch.Tensor]:
    """Sources of 8, 4 and 2 tokens, padded (3, 8), and decoder inputs (3, 6)."""
    g = torch.Generator().manual_seed(2)
    src = torch.randint(4, config.source_vocab_size, (3, 8), generator=g)
    for row, n in enumerate([8, 4, 2]):
        src[row, n - 1] = config.eos_id
        src[row, n:] = config.pad_id
    tgt_in = torch.randint(4, config.vocab_size, (3, 6), generator=g)
    tgt_in[:, 0] = config.start_id
    return src, tgt_in
