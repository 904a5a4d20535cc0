"""Read and validate a user's parallel text (section 5.1): two aligned files, or one TSV file.

A user's file is never silently mangled. Different line counts, invalid UTF-8 and TSV lines without
exactly one tab are errors that name the file and line; with `skip_bad_lines` the bad lines (the
pair they belong to) are skipped and counted instead. Lines are read as bytes and split on "\\n"
only, and runs of whitespace inside a line become one space, so that a stray "\\r", U+2028 or tab
cannot split a line when the text is written out and read again. A line of more than
`safe_io.MAX_LINE_BYTES` (a binary or a CR-only file has no "\\n") is an error at its file:line,
never read whole into memory; --skip-bad-lines cannot skip it (the next line's start is unknown).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiayn.errors import AiaynError
from aiayn.safe_io import capped_lines, input_file

HELD_OUT_MAX = 1000  # sentences in each of valid and test when they are split off the corpus
HELD_OUT_FRACTION = 50  # ... and at most 1/50 of the corpus each


class CorpusError(AiaynError):
    """A corpus file is missing or malformed; the message names the file (and line)."""


def _check_file(path: Path) -> Path:
    """`path` if it is a regular file (read twice: counted, then read), else a one-line CorpusError."""
    try:
        return input_file(path)
    except AiaynError as err:
        raise CorpusError(str(err)) from None


def count_lines(path: Path) -> int:
    """Lines in a file, counting a last line without a newline (reads 1 MiB at a time)."""
    count, last = 0, b"\n"
    with open(_check_file(path), "rb") as f:
        while chunk := f.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def decode_line(raw: bytes, path: Path, line_no: int) -> str:
    """One line's text with whitespace runs collapsed; invalid UTF-8 raises CorpusError at path:line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorpusError(
            f"{path}:{line_no}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}); "
            "fix the file or pass --skip-bad-lines to skip such lines"
        ) from None
    if line_no == 1:
        text = text.removeprefix("\ufeff")  # a byte-order mark is not text
    return " ".join(text.split())


@dataclass
class ParallelText:
    """Aligned sentence pairs from two files (`paths` = (src, tgt)) or one TSV file (`paths` = (tsv,)).

    Construction checks that the files exist and that two files have the same number of lines.
    Iterating yields (line number, source, target) for every line (numbers from 1); `bad_lines`
    counts the lines skipped.
    """

    paths: tuple[Path, ...]
    skip_bad_lines: bool = False

    def __post_init__(self) -> None:
        self.paths = tuple(Path(p) for p in self.paths)
        counts = [count_lines(p) for p in self.paths]
        if len(counts) == 2 and counts[0] != counts[1]:
            a, b = self.paths
            raise CorpusError(f"{a} has {counts[0]} lines but {b} has {counts[1]}; the files must be aligned")
        self.n_lines = counts[0]
        self.bad_lines = 0

    @classmethod
    def open(cls, src=None, tgt=None, tsv=None, skip_bad_lines: bool = False) -> ParallelText:
        if tsv is not None and src is None and tgt is None:
            return cls((tsv,), skip_bad_lines)
        if tsv is None and src is not None and tgt is not None:
            return cls((src, tgt), skip_bad_lines)
        raise CorpusError("give either a source and a target file, or one TSV file")

    def __iter__(self) -> Iterator[tuple[int, str, str]]:
        self.bad_lines = 0
        with ExitStack() as stack:
            handles = [capped_lines(stack.enter_context(open(p, "rb")), str(p)) for p in self.paths]
            for line_no, raws in enumerate(zip(*handles, strict=True), start=1):
                try:
                    yield (line_no, *self._pair(raws, line_no))
                except CorpusError:
                    if not self.skip_bad_lines:
                        raise
                    self.bad_lines += 1

    def _pair(self, raws: Sequence[bytes], line_no: int) -> tuple[str, str]:
        if len(raws) == 2:
            return decode_line(raws[0], self.paths[0], line_no), decode_line(raws[1], self.paths[1], line_no)
        fields = raws[0].rstrip(b"\r\n").split(b"\t")
        if len(fields) != 2:
            raise CorpusError(
                f"{self.paths[0]}:{line_no}: expected 2 tab-separated fields (source, target), "
                f"found {len(fields)}; fix the file or pass --skip-bad-lines to skip such lines"
            )
        return decode_line(fields[0], self.paths[0], line_no), decode_line(fields[1], self.paths[0], line_no)


def held_out_size(n_pairs: int) -> int:
    """Sentences in each of valid and test when both are split off a corpus of n_pairs."""
    return min(HELD_OUT_MAX, n_pairs // HELD_OUT_FRACTION) if n_pairs >= 3 * HELD_OUT_FRACTION else 0


def held_out_indices(n_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted line indices of the valid and the test split, drawn without replacement with `seed`."""
    size = held_out_size(n_pairs)
    chosen = np.random.default_rng(seed).choice(n_pairs, size=2 * size, replace=False)
    return np.sort(chosen[:size]), np.sort(chosen[size:])


def held_out_split(pairs: list[tuple[str, str]], seed: int) -> dict[str, list[tuple[str, str]]]:
    """A seeded train / valid / test split; valid/test pairs that share a side with train are removed."""
    valid_idx, test_idx = held_out_indices(len(pairs), seed)
    held = np.zeros(len(pairs), dtype=np.int8)  # 0 train, 1 valid, 2 test
    held[valid_idx], held[test_idx] = 1, 2
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for pair, split in zip(pairs, held.tolist(), strict=True):
        splits[("train", "valid", "test")[split]].append(pair)
    return remove_train_overlap(splits)


def remove_train_overlap(splits: dict[str, list[tuple[str, str]]]) -> dict[str, list[tuple[str, str]]]:
    """Drop the valid and test pairs whose source or target sentence also occurs in train (in place)."""
    sources, targets = {s for s, _ in splits["train"]}, {t for _, t in splits["train"]}
    for split in ("valid", "test"):
        splits[split] = [(s, t) for s, t in splits[split] if s not in sources and t not in targets]
    return splits
