"""Binarized token shards (section 5.1's sentence pairs as ids), memory-mapped from disk.

A split is three files in the data directory: `{split}.src.bin` and `{split}.tgt.bin` hold the token
ids of every sentence back to back (uint16 when the vocabulary fits, else int32), and
`{split}.index.npz` holds the offsets (int64, one more than the number of sentences) of each side
and the id dtype. Every sentence ends with EOS. Nothing but the offsets is read into memory, so a
WMT-sized corpus trains from a laptop's disk; `ShardWriter` appends chunk by chunk while encoding.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import numpy as np

from aiayn.config import EOS_ID
from aiayn.errors import AiaynError

SIDES = ("src", "tgt")


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.int32)


def _paths(data_dir: Path, split: str) -> tuple[Path, Path, Path]:
    return data_dir / f"{split}.src.bin", data_dir / f"{split}.tgt.bin", data_dir / f"{split}.index.npz"


def has_split(data_dir: str | Path, split: str) -> bool:
    """Whether `aiayn prepare` wrote `split` (its index) in data_dir; a damaged split still counts."""
    return _paths(Path(data_dir), split)[2].is_file()


class ShardWriter:
    """Streams sentence pairs of one split to disk: `add(src_ids, tgt_ids)` per chunk, then `close()`."""

    def __init__(self, data_dir: str | Path, split: str, vocab_size: int) -> None:
        self.dtype = token_dtype(vocab_size)
        self._src_path, self._tgt_path, self._index_path = _paths(Path(data_dir), split)
        self._files = [open(self._src_path, "wb"), open(self._tgt_path, "wb")]  # noqa: SIM115 (closed by close)
        self._lengths: list[list[np.ndarray]] = [[], []]  # per side: int64 lengths of each chunk

    def add(self, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]]) -> None:
        """Append a chunk of pairs (piece ids without EOS; EOS is appended here)."""
        if len(src_ids) != len(tgt_ids):
            raise ValueError(f"{len(src_ids)} source sentences but {len(tgt_ids)} target sentences")
        for side, chunk in enumerate((src_ids, tgt_ids)):
            ends = np.cumsum(np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk)))
            pieces = np.fromiter(
                chain.from_iterable(chunk), dtype=self.dtype, count=int(ends[-1]) if len(ends) else 0
            )
            self._files[side].write(np.insert(pieces, ends, EOS_ID).tobytes())  # EOS after each sentence
            self._lengths[side].append(np.diff(ends, prepend=0) + 1)

    def close(self) -> int:
        """Write the offsets index; returns the number of pairs written."""
        offsets = {}
        for side, name in enumerate(SIDES):
            self._files[side].close()
            lengths = np.concatenate(self._lengths[side]) if self._lengths[side] else np.zeros(0, np.int64)
            offsets[name] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        np.savez(self._index_path, **offsets, dtype=np.array(self.dtype.str))
        return len(offsets["src"]) - 1


def _read_index(path: Path) -> tuple[list[np.ndarray], np.dtype]:
    """{split}.index.npz -> ([src offsets, tgt offsets], token dtype), read once while the file stays
    the same (a start reads the train index for its checks and for the trainer: 576 MB at 36M pairs),
    the arrays read-only. A damaged file (truncated, empty, not an index) is a one-line AiaynError."""
    stat = path.stat()
    return _index_of(str(path), (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=2)
def _index_of(path: str, identity: tuple[int, ...]) -> tuple[list[np.ndarray], np.dtype]:
    """`_read_index` of the file at `path` whose stat says `identity` (a file written again is
    another); errors are not cached."""
    offsets, dtype = _load_index(Path(path))
    for side in offsets:
        side.flags.writeable = False  # shared by every reader of this index
    return offsets, dtype


def _load_index(path: Path) -> tuple[list[np.ndarray], np.dtype]:
    """`_read_index`, read. Never unpickles (np.load's allow_pickle stays False)."""
    try:
        with np.load(path) as index:
            offsets = [np.asarray(index["src"], dtype=np.int64), np.asarray(index["tgt"], dtype=np.int64)]
            dtype = np.dtype(str(index["dtype"]))
    except Exception as err:  # noqa: BLE001 - whatever numpy or zipfile finds wrong: a damaged file
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise AiaynError(f"{path}: damaged index ({reason}); prepare the data again with --force") from None
    if min(len(offsets[0]), len(offsets[1])) == 0 or offsets[0][0] != 0 or offsets[1][0] != 0:
        raise AiaynError(f"{path}: damaged index (offsets do not start at 0); prepare again with --force")
    return offsets, dtype


class TokenDataset:
    """One split of a data directory: `ds[i]` -> (src_ids, tgt_ids), each ending with EOS.

    `src_lengths` / `tgt_lengths` (int64, lengths including EOS) are what the batch sampler sorts by.
    """

    def __init__(self, data_dir: str | Path, split: str) -> None:
        src_path, tgt_path, index_path = _paths(Path(data_dir), split)
        if not index_path.is_file():
            raise AiaynError(f"{index_path}: no '{split}' split in {data_dir} (run `aiayn prepare` first)")
        self._offsets, dtype = _read_index(index_path)
        self._tokens = [self._memmap(path, dtype) for path in (src_path, tgt_path)]
        self.src_lengths = np.diff(self._offsets[0])  # (n,) int64
        self.tgt_lengths = np.diff(self._offsets[1])  # (n,) int64
        for side in (0, 1):
            if len(self._tokens[side]) != self._offsets[side][-1]:
                raise AiaynError(f"{index_path}: the index does not match the token file (truncated copy?)")

    @staticmethod
    def _memmap(path: Path, dtype: np.dtype) -> np.ndarray:
        if not path.is_file():
            raise AiaynError(f"{path}: missing token file; prepare the data again with --force")
        if path.stat().st_size == 0:  # np.memmap cannot map an empty file
            return np.zeros(0, dtype=dtype)
        return np.memmap(path, dtype=dtype, mode="r")

    def __len__(self) -> int:
        return len(self.src_lengths)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"index {i} out of range for {len(self)} pairs")
        i = int(i) % len(self)
        src = self._tokens[0][self._offsets[0][i] : self._offsets[0][i + 1]]  # (src_len,)
        tgt = self._tokens[1][self._offsets[1][i] : self._offsets[1][i + 1]]  # (tgt_len,)
        return src, tgt
