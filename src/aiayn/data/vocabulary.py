"""The data directory's vocabulary (section 5.1: "a shared source-target vocabulary" of byte-pair
pieces): a joint BPE trained on the staged train text, or an existing SentencePiece model reused
(`--spm`, so that a trained model can be fine-tuned on the data), with the target-language tags of a
multilingual recipe each one piece, and meta.json's "tokenizer" entry."""

from __future__ import annotations

import sys
from itertools import chain
from pathlib import Path
from typing import Any

from aiayn.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from aiayn.data.datadir import SPM_FILE, DataDir
from aiayn.data.recipe import Recipe
from aiayn.data.stage import read_lines
from aiayn.data.tokenizer import CHARACTER_COVERAGE, Tokenizer
from aiayn.errors import AiaynError

DEFAULT_VOCAB_SIZE = 8000
UNK_NOTE = 0.005  # with a reused vocabulary, say so when more than this share of train tokens is unk


def target_tags(corpus) -> list[str]:
    """The target-language tags of a recipe with `tags: true` (each one piece of the vocabulary)."""
    if not (isinstance(corpus, Recipe) and corpus.tags):
        return []
    return [f">>{lang}<<" for lang in corpus.target_languages()]


def check_tag_pieces(tokenizer: Tokenizer, tags: list[str]) -> None:
    """A reused vocabulary (--spm) must hold each tag as one piece: split into several, the model
    would read a language's tag as ordinary text."""
    missing = [tag for tag in tags if tag not in tokenizer.pieces(tokenizer.encode([tag])[0])]
    if missing:
        raise AiaynError(
            f"--spm {tokenizer.path} has no piece for the target-language tag(s) {', '.join(missing)} "
            "(tags: true); leave --spm out to train a vocabulary with them"
        )


def reused_tokenizer(spm: str | Path, vocab_size: int | None) -> Tokenizer:
    """`--spm`: the SentencePiece model to encode with (a file, or a directory holding spm.model)."""
    path = Path(spm)
    tokenizer = Tokenizer.load(path / SPM_FILE if path.is_dir() else path)
    if vocab_size is not None and vocab_size != tokenizer.vocab_size:
        raise AiaynError(
            f"--spm {tokenizer.path} has {tokenizer.vocab_size} pieces but --vocab-size asks for "
            f"{vocab_size}; leave --vocab-size out to use that vocabulary"
        )
    return tokenizer


def tokenizer_meta(trained_on: str) -> dict[str, Any]:
    """meta.json's "tokenizer" entry for the data directory's spm.model."""
    return {
        "type": "sentencepiece",
        "model_type": "bpe",
        "model": SPM_FILE,
        "trained_on": trained_on,
        "character_coverage": CHARACTER_COVERAGE,
        **{"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID},
    }


def build_vocabulary(
    work: Path,
    vocabulary: Tokenizer | int,
    seed: int,
    progress: bool,
    symbols: list[str],
    workers: int | None,
) -> Tokenizer:
    """Train the joint BPE of `vocabulary` pieces on work/stage's train text (`symbols` each one
    piece), or copy the reused model unchanged; -> the tokenizer of work's spm.model."""
    if isinstance(vocabulary, Tokenizer):
        _say(f"encoding with the {vocabulary.vocab_size}-piece vocabulary {vocabulary.path}", progress)
        vocabulary.threads = workers or vocabulary.threads
        return vocabulary.copy_to(DataDir(work).spm_path)
    _say(f"training a {vocabulary}-piece joint BPE vocabulary on the train split", progress)
    train_text = chain(read_lines(work / "stage" / "train.src"), read_lines(work / "stage" / "train.tgt"))
    tokenizer = Tokenizer.train(
        train_text, DataDir(work).spm_path, vocabulary, seed=seed, user_symbols=symbols, threads=workers
    )
    if tokenizer.vocab_size < vocabulary:
        note = f"note: the train text only supports {tokenizer.vocab_size} pieces, not {vocabulary}"
        print(note, file=sys.stderr)
    return tokenizer


def note_unk(unk: dict[str, int], tokens: dict[str, int]) -> None:
    """Say so when a reused vocabulary leaves more than UNK_NOTE of the train tokens <unk>."""
    share = sum(unk.values()) / max(1, sum(tokens.values()))
    if share > UNK_NOTE:
        print(
            f"note: {share:.1%} of the train tokens are <unk>: the reused vocabulary lacks characters "
            "of this corpus (meta.json: unk)",
            file=sys.stderr,
        )


def _say(message: str, progress: bool) -> None:
    if progress:
        print(message, file=sys.stderr)
