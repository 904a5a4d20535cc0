"""Translators whose word alignment is known, for the markup tests: each source word becomes one target
word (upper-cased), in the same order (`Copier`) or reversed (`Reverser`), and the alignment says so.
They answer `translate_batch` as aiayn.decode.Translator does (a list of Translations per text)."""

from __future__ import annotations

from aiayn.decode.translator import Translation


class Copier:
    """Word i -> word i, upper-cased; `calls` keeps every batch of texts it was given."""

    info = {"src_lang": "en", "tgt_lang": "de"}

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def order(self, n: int) -> list[int]:
        """The source word of each target word."""
        return list(range(n))

    def translate_batch(self, texts: list[str], options=None, align: bool = False, **controls):
        self.calls.append(list(texts))
        out = []
        for text in texts:
            words = text.split()
            order = self.order(len(words))
            target = " ".join(words[i].upper() for i in order)
            pairs = [(i, j) for j, i in enumerate(order)] if align else None
            out.append([Translation(target, 0.0, 0.0, [], pairs)])
        return out


class Reverser(Copier):
    """Word i -> word n - 1 - i, upper-cased."""

    def order(self, n: int) -> list[int]:
        return list(range(n))[::-1]
