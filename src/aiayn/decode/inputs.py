"""From texts and their decoding controls to what the search takes: source ids cut to fit the model
(long texts split into sentences, never truncated), target prefixes and constraints as ids, each
checked with a one-line error that names the text, and the target-language tag that starts every
source of a multilingual model (aiayn.decode.languages). `Encoded` holds a batch's ids, tokenized
once: a caller that needed them before translating (the server, for its limits) passes them on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiayn.decode.document import split_sentences
from aiayn.errors import AiaynError, TextError

SplitHook = Callable[[int, int, int, int], None]  # (text index, its tokens, the limit, parts)


@dataclass
class Encoded:
    """Texts as ids: each one's source pieces (no EOS) and, None where no text has one, each one's
    prefix ([] for none), constraints (target ids; [] for none) and target-language tag (the ids
    that start each of its sources; [] for none)."""

    pieces: list[list[int]]
    prefix: list[list[int]] | None = None
    constraints: list[list[list[int]]] | None = None
    tags: list[list[int]] | None = None

    def sources(self, eos_id: int) -> list[list[int]]:
        """Each text whole, as the model reads it: tag + pieces + EOS; [] for an empty text."""
        tags = self.tags or [[] for _ in self.pieces]
        return [tag + ids + [eos_id] if ids else [] for tag, ids in zip(tags, self.pieces, strict=True)]

    def forced(self) -> list[int]:
        """The output tokens each text's prefix or constraints need (the search lengthens its
        output to hold them: aiayn.decode.generate.Controls.needed)."""
        prefixes = self.prefix or [[] for _ in self.pieces]
        constraints = self.constraints or [[] for _ in self.pieces]
        return [max(len(p), sum(map(len, c))) for p, c in zip(prefixes, constraints, strict=True)]


def _per_text(name: str, values: Sequence | None, n: int) -> None:
    if values is not None and (isinstance(values, str) or len(values) != n):
        got = "a string" if isinstance(values, str) else f"{len(values)} entries"
        raise AiaynError(f"{name}: {got} for {n} texts (one entry per text, None for none)")


_PUNCTUATION_BREAK = re.compile(r"(?<=[.!?;:\u3002\uff01\uff1f])\s+")


def _chunks(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def _parts(text: str, tokenizer: Any, limit: int, language: str) -> list[list[int]]:
    """Ids of the parts of an over-long text: its sentences (Moses' rules); a sentence still too
    long at every sentence-final punctuation mark (the rules want a capital after it, which
    lowercased text lacks); a piece still too long in pieces of limit - 1 tokens."""
    parts, sentences = [], split_sentences(text, language)
    for sentence, ids in zip(sentences, tokenizer.encode(sentences), strict=True):
        if len(ids) + 1 <= limit:
            parts.append(ids)
            continue
        pieces = [p for p in _PUNCTUATION_BREAK.split(sentence) if p.strip()]
        for piece_ids in tokenizer.encode(pieces):
            parts += _chunks(piece_ids, limit - 1)
    return parts


def source_units(
    texts: Sequence[str],
    tokenizer: Any,
    limit: int,
    eos_id: int,
    language: str,
    on_split: SplitHook,
    pieces: list[list[int]] | None = None,
    tags: list[list[int]] | None = None,
) -> list[list[list[int]]]:
    """For each text the sources it is translated as (tag + pieces + EOS): itself when it fits in
    `limit` tokens, else its parts (`_parts`), each starting with the text's tag (`tags`: its ids,
    [] for none), so that every source the model reads says the target language; `on_split` hears
    of every text that is split. [] for an empty text. `pieces`: the texts' ids when they were
    tokenized already."""
    units = []
    ids_of = tokenizer.encode(list(texts)) if pieces is None else pieces
    for i, (ids, tag) in enumerate(zip(ids_of, tags or [[] for _ in ids_of], strict=True)):
        room = limit - len(tag)
        if not ids:
            units.append([])
        elif len(ids) + 1 <= room:
            units.append([tag + ids + [eos_id]])
        else:
            parts = [tag + p + [eos_id] for p in _parts(texts[i], tokenizer, room, language)]
            on_split(i, len(tag) + len(ids) + 1, limit, len(parts))
            units.append(parts)
    return units


def tag_ids(tokenizer: Any, tags: Sequence[str | None]) -> list[list[int]] | None:
    """Each text's tag (">>de<<", or None) as the source ids it starts with, or None when no text
    has one: the ids the tag encodes to alone, which are those it starts a tagged sentence with
    (SentencePiece encodes ">>de<< x" as "▁", ">>de<<", then x's pieces)."""
    wanted = sorted({tag for tag in tags if tag})
    if not wanted:
        return None
    encoded = dict(zip(wanted, tokenizer.encode(wanted), strict=True))
    return [encoded[tag] if tag else [] for tag in tags]


def target_prefixes(
    prefix: Sequence[str | None] | None, n: int, encode, limit: int
) -> list[list[int]] | None:
    """Each text's prefix as target ids ([] for None or ""), or None when no text has one."""
    _per_text("prefix", prefix, n)
    if prefix is None:
        return None
    ids = encode([p or "" for p in prefix])
    for i, p in enumerate(ids):
        if len(p) > limit:
            raise TextError(i, f"prefix: {len(p)} tokens, over the output limit of {limit}")
    return ids if any(ids) else None


def target_constraints(
    constraints: Sequence[Sequence[str] | None] | None, n: int, encode, limit: int
) -> list[list[list[int]]] | None:
    """Each text's constraints as lists of target ids, or None when no text has any."""
    _per_text("constraints", constraints, n)
    if constraints is None:
        return None
    out = []
    for i, phrases in enumerate(constraints):
        if isinstance(phrases, str):
            raise TextError(i, "constraints: a list of phrases, not one string")
        ids = encode(list(phrases or []))
        for j, p in enumerate(ids):
            if not p:
                raise TextError(i, f"constraint {j + 1} is empty")
        if sum(map(len, ids)) > limit:
            raise TextError(i, f"constraints: {sum(map(len, ids))} tokens, over the output limit of {limit}")
        out.append(ids)
    return out if any(out) else None
