"""Well-formed trees only: a mask on the search's next-token log-probabilities (section 6.3's parser,
with the linearisation of aiayn.parse.trees).

`TreeConstraint` is a `Stepper` (aiayn.decode.rules) around the model's stepper, put there by
`TreeMask`, the `Controls.mask` of aiayn.decode.generate: it follows each hypothesis (row) through
the tokens the search feeds it (and its reorder / select) and sets to -inf the log-probability of
every token that cannot lead to one tree with exactly `n_words` terminals within the row's
`max_len` tokens. The search itself is unchanged, so every finished hypothesis is such a tree:

- an opening "(L": first token, or inside the tree while words remain, if the shortest completion
  (each remaining word, then a closing token per open constituent) still fits in `max_len`;
- the terminal XX: inside the tree while words remain;
- a closing ")L": only L, the label of the innermost open constituent, once that constituent has
  a child; the root closes only after the last word;
- EOS: once the root is closed. Every other token (word pieces, pad, bos, unk): never.

With max_len >= n_words + 2 (root, words, root close) some token is always allowed, and the tree is
complete by the time the search forces EOS after `max_len` tokens. Per row the state is the depth,
the words used, whether the root was opened, whether the last token opened a constituent, and the
stack of open labels; all updates are tensor operations (no host sync).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.decode.rules import Stepper
from aiayn.errors import AiaynError
from aiayn.parse.trees import TERMINAL

OTHER, OPEN, CLOSE, WORD = 0, 1, 2, 3


@dataclass(frozen=True)
class TreeVocab:
    """Target ids of the tree tokens: open_ids[i] is "(" + labels[i], close_ids[i] is ")" + labels[i]."""

    labels: tuple[str, ...]
    open_ids: tuple[int, ...]
    close_ids: tuple[int, ...]
    terminal_id: int
    eos_id: int
    size: int  # the vocabulary size

    @classmethod
    def build(cls, labels: Sequence[str], piece_id: Callable[[str], int | None], eos_id: int, size: int):
        """Ids from a piece -> id lookup; a tree token missing from the vocabulary is an AiaynError."""

        def find(piece: str) -> int:
            found = piece_id(piece)
            if found is None:
                raise AiaynError(
                    f"the model's vocabulary has no tree token {piece!r}: not a parser for this data"
                )
            return found

        labels = tuple(labels)
        return cls(
            labels,
            tuple(find("(" + label) for label in labels),
            tuple(find(")" + label) for label in labels),
            find(TERMINAL),
            eos_id,
            size,
        )

    def tables(self, device: torch.device | str) -> tuple[Tensor, Tensor]:
        """(kind, label): per vocabulary id, OPEN / CLOSE / WORD / OTHER and the label index (size,)."""
        kind = torch.zeros(self.size, dtype=torch.long)
        label = torch.zeros(self.size, dtype=torch.long)
        index = torch.arange(len(self.labels))
        kind[list(self.open_ids)], label[list(self.open_ids)] = OPEN, index
        kind[list(self.close_ids)], label[list(self.close_ids)] = CLOSE, index
        kind[self.terminal_id] = WORD
        return kind.to(device), label.to(device)


class TreeConstraint:
    """A `Stepper` that masks `inner`'s log-probabilities to well-formed trees (module docstring).

    n_words, max_lens: (rows,) per hypothesis row, in the search's row order.
    """

    def __init__(self, inner: Stepper, vocab: TreeVocab, n_words: Tensor, max_lens: Tensor, device):
        short = (max_lens < n_words + 2).nonzero()
        if short.numel():
            row = int(short[0, 0])
            raise AiaynError(
                f"a sentence of {int(n_words[row])} words needs at least {int(n_words[row]) + 2} output "
                f"tokens but may have {int(max_lens[row])}; raise --max-len-b"
            )
        rows = n_words.numel()
        self.inner, self.vocab = inner, vocab
        self.kind, self.label_of = vocab.tables(device)
        self.open_ids = torch.tensor(vocab.open_ids, device=device)
        self.close_ids = torch.tensor(vocab.close_ids, device=device)
        self.n_words, self.max_lens = n_words.to(device), max_lens.to(device)
        self.stack = torch.zeros(rows, int(max_lens.max()) + 1, dtype=torch.long, device=device)
        self.depth = torch.zeros(rows, dtype=torch.long, device=device)
        self.words = torch.zeros(rows, dtype=torch.long, device=device)
        self.started = torch.zeros(rows, dtype=torch.bool, device=device)
        self.just_opened = torch.zeros(rows, dtype=torch.bool, device=device)
        self.steps = 0

    def step(self, tokens: Tensor) -> Tensor:
        """tokens (rows,) -> masked log-probabilities (rows, vocab)."""
        if self.steps:  # the first tokens are the decoder's start token
            self._advance(tokens)
        self.steps += 1
        return self._mask(self.inner.step(tokens))

    def reorder(self, index: Tensor) -> None:
        self._take(index)
        self.inner.reorder(index)

    def select(self, index: Tensor) -> None:
        self._take(index)
        self.inner.select(index)

    def _take(self, index: Tensor) -> None:
        for name in ("n_words", "max_lens", "stack", "depth", "words", "started", "just_opened"):
            setattr(self, name, getattr(self, name)[index])

    def _advance(self, tokens: Tensor) -> None:
        """Follow each row's newest token (rows,)."""
        kind = self.kind[tokens]  # (rows,)
        is_open = kind.eq(OPEN)
        width = self.stack.size(1)
        at = self.depth.clamp(0, width - 1)[:, None]  # (rows, 1): the slot an opening token fills
        pushed = torch.where(is_open[:, None], self.label_of[tokens][:, None], self.stack.gather(1, at))
        self.stack.scatter_(1, at, pushed)
        self.depth = (self.depth + is_open.long() - kind.eq(CLOSE).long()).clamp(min=0)
        self.words += kind.eq(WORD).long()
        self.started |= is_open
        self.just_opened = is_open

    def _mask(self, logp: Tensor) -> Tensor:
        """logp (rows, vocab) -> a copy with -inf wherever the rules above forbid the token."""
        left = self.max_lens - self.steps  # (rows,) tokens that may follow the one chosen now
        depth, words, n = self.depth, self.words, self.n_words
        inside = self.started & depth.gt(0)
        words_left = words.lt(n)
        can_open = (~self.started & (n + 1).le(left)) | (
            inside & words_left & (n - words + depth + 1).le(left)
        )
        can_close = inside & ~self.just_opened & (depth.gt(1) | ~words_left)
        top = self.stack.gather(1, (depth - 1).clamp(min=0)[:, None])  # (rows, 1) innermost label
        close = self.close_ids[top]  # (rows, 1)
        out = torch.full_like(logp, -math.inf)
        out[:, self.open_ids] = logp[:, self.open_ids].masked_fill(~can_open[:, None], -math.inf)
        t, e = self.vocab.terminal_id, self.vocab.eos_id
        out[:, t] = logp[:, t].masked_fill(~(inside & words_left), -math.inf)
        out[:, e] = logp[:, e].masked_fill(~(self.started & depth.eq(0)), -math.inf)
        out.scatter_(1, close, logp.gather(1, close).masked_fill(~can_close[:, None], -math.inf))
        return out


@dataclass(frozen=True)
class TreeMask:
    """The `StepMask` (aiayn.decode.generate.Controls.mask) of sentences with n_words (n,) words each:
    `Controls(mask=TreeMask(vocab, n_words))` makes any search emit only well-formed trees."""

    vocab: TreeVocab
    n_words: Tensor  # (n,) long, CPU

    def subset(self, index: list[int]) -> TreeMask:
        return TreeMask(self.vocab, self.n_words[index])

    def wrap(self, stepper: Stepper, max_lens: Tensor, rows: int, device: torch.device) -> Stepper:
        """max_lens (n,): the search's limits; `rows` hypotheses per sentence, sentence-major."""
        per_row = self.n_words.repeat_interleave(rows), max_lens.repeat_interleave(rows)
        return TreeConstraint(stepper, self.vocab, *per_row, device)
