"""One SentencePiece BPE vocabulary shared by source and target (section 5.1).

The paper encodes sentences with byte-pair encoding into a shared source-target vocabulary (about
37,000 tokens for English-German); we train SentencePiece's BPE on the train split only (or
copy a trained model's, `copy_to`, to fine-tune it on new data). Special ids
are the ones `ModelConfig` expects: pad 0, unk 1, bos 2, eos 3. `encode` returns the pieces' ids
without bos/eos; the dataset appends eos and the batch prepends bos.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from aiayn.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from aiayn.errors import AiaynError

CHARACTER_COVERAGE = 0.99995  # rare characters (a stray Hebrew letter) map to unk
MAX_TRAIN_SENTENCES = 1_000_000  # a uniform sample of this many lines trains the vocabulary


def cores() -> int:
    """The CPU cores this process may run on: SentencePiece's threads unless told otherwise."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Tokenizer:
    """A trained SentencePiece model: text <-> piece ids."""

    def __init__(self, processor: spm.SentencePieceProcessor, path: Path, threads: int | None = None) -> None:
        self._sp = processor
        self.path = path
        self.threads = threads or cores()  # encoding's threads (the pieces do not depend on them)
        for name, expected in (("pad", PAD_ID), ("unk", UNK_ID), ("bos", BOS_ID), ("eos", EOS_ID)):
            actual = getattr(processor, f"{name}_id")()
            if actual != expected:
                raise AiaynError(f"{path}: SentencePiece {name}_id is {actual}, aiayn needs {expected}")
        self._special = frozenset({PAD_ID, BOS_ID, EOS_ID})

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        model_path: str | Path,
        vocab_size: int,
        seed: int = 1,
        user_symbols: Sequence[str] = (),
        threads: int | None = None,
    ) -> Tokenizer:
        """Train joint BPE on `texts` (source and target lines) and write `model_path` and its .vocab.

        A corpus too small for `vocab_size` gets a smaller vocabulary (see `.vocab_size`), not an error.
        `user_symbols` become pieces of their own, with the ids right after the special ones (the
        tree tokens of parse data, aiayn.parse).
        """
        model_path = Path(model_path)
        if model_path.suffix != ".model":
            raise AiaynError(f"{model_path}: a SentencePiece model path must end in .model")
        spm.set_random_generator_seed(seed)
        try:
            cls._train_bpe(texts, model_path, vocab_size, user_symbols, threads or cores())
        except RuntimeError as err:
            raise AiaynError(_training_error(str(err), vocab_size)) from None
        _settle(model_path)
        return cls.load(model_path, threads)

    @staticmethod
    def _train_bpe(
        texts: Iterable[str], model_path: Path, vocab_size: int, user_symbols: Sequence[str], threads: int
    ):
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_prefix=str(model_path.with_suffix("")),
            vocab_size=vocab_size,
            model_type="bpe",
            character_coverage=CHARACTER_COVERAGE,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            input_sentence_size=MAX_TRAIN_SENTENCES,
            shuffle_input_sentence=True,
            hard_vocab_limit=False,
            num_threads=threads,
            minloglevel=2,
            **({"user_defined_symbols": list(user_symbols)} if user_symbols else {}),
        )

    @classmethod
    def load(cls, path: str | Path, threads: int | None = None) -> Tokenizer:
        path = Path(path)
        if not path.is_file():
            raise AiaynError(f"{path}: no SentencePiece model there")
        processor = spm.SentencePieceProcessor()
        try:
            processor.Load(str(path))
        except (OSError, RuntimeError) as err:
            raise AiaynError(f"{path}: not a SentencePiece model ({err})") from None
        return cls(processor, path, threads)

    def copy_to(self, model_path: str | Path) -> Tokenizer:
        """Copy the model file unchanged (runs compare it byte for byte), write its .vocab beside it."""
        model_path = Path(model_path)
        shutil.copyfile(self.path, model_path)
        with open(model_path.with_suffix(".vocab"), "w", encoding="utf-8") as f:
            f.writelines(
                f"{self._sp.id_to_piece(i)}\t{self._sp.get_score(i):g}\n" for i in range(self.vocab_size)
            )
        return Tokenizer.load(model_path, self.threads)

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Piece ids of each text, without bos or eos."""
        return self._sp.encode(texts, out_type=int, num_threads=self.threads)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Text of each id sequence; pad, bos and eos are skipped wherever they are."""
        return self._sp.decode([[int(i) for i in seq if int(i) not in self._special] for seq in ids])

    def pieces(self, ids: list[int]) -> list[str]:
        """The subword string of each id (for labelling attention axes)."""
        return [self._sp.id_to_piece(int(i)) for i in ids]

    # One vocabulary for both sides (section 5.1): the target side is the source side.
    encode_target = encode
    target_pieces = pieces


def _training_error(message: str, vocab_size: int) -> str:
    """SentencePiece's training error -> one line; a vocabulary smaller than the corpus's characters
    (SentencePiece: "Vocabulary size is smaller than required_chars. 40 vs 75.") says the size to use."""
    found = re.search(r"required_chars\. \d+ vs (\d+)", message)
    if found:
        return (
            f"vocab_size {vocab_size} is smaller than the {found.group(1)} pieces this corpus's characters "
            f"need; use a vocab_size of at least {found.group(1)}"
        )
    return f"SentencePiece could not train a vocabulary of {vocab_size}: {message.splitlines()[0]}"


def _settle(model_path: Path) -> None:
    """Rewrite the model without what its training recorded of the machine (the temporary path it
    was written to, the threads): the same text gives the same file anywhere, with any --workers."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model_path.read_bytes())
    proto.trainer_spec.model_prefix = model_path.stem
    proto.trainer_spec.ClearField("num_threads")
    model_path.write_bytes(proto.SerializeToString())
