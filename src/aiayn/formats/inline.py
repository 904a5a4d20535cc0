"""Inline markup carried through a translation by its word alignment, as Bergamot (Firefox
Translations) carries HTML tags: the model translates the plain words, and every piece of markup
goes back around, or beside, the target words aligned to the source words it held.

A segment is a tree: a root `Span` whose children are text (`str`), `Atom`s (markup that holds no
words and is kept as it is: an HTML `<br>`, a comment, inline code, an XLIFF `<x/>`, a PO file's
`%s`) and `Span`s (paired markup around words: `<b>...</b>`, `<g>...</g>`). `source_words(root)`
gives the words the model translates (split at white space and at atoms, so an atom always sits
between words); `carry(root, words, pairs)` builds the target tree from the translation's words and
its (source word, target word) pairs (aiayn.decode.align: each target word has one source word).

Placement. A source word is inside the innermost span that holds any of its characters (the span
with more of them, then the first, when two do: `big<b>ger</b>` is one word, in `<b>`), and a target
word takes the spans of its aligned source word. Every span appears exactly
once and spans stay nested, so at each level a child span keeps its longest run of consecutive
target words (the first of equal runs) and its other words fall back to the parent, outside it. An
atom, or a span without words (`<a name="x"></a>`, `<b> </b>`), is kept verbatim between the targets
of the source words either side of it when they are neighbours (in either order), else before the
target of the nearest source word after it (at the start or end of its parent when it was there),
moved out of any sibling span it would fall inside. White space around atoms follows the
source (`%d files` -> `%d Dateien`, `file%s` -> `Datei%s`); white space at the start and end of the
segment is kept as it was; words are separated by one space.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Atom:
    """Markup that holds no words, written again as it was; `payload` is the format's."""

    payload: Any


@dataclass(eq=False)
class Span:
    """Paired markup around text; `payload` is what the format needs to write it again (None: the root)."""

    payload: Any
    children: list[Node] = field(default_factory=list)


Node = str | Atom | Span
Path = tuple[Span, ...]  # the spans around a word, outermost first (the root left out)


@dataclass(eq=False)
class _Zero:
    """A wordless node in the source: where it was (words before it) and the white space around it."""

    node: Atom | Span
    parent: Path
    at: int
    space_before: bool = False
    space_after: bool = False


@dataclass
class Layout:
    """A segment's source side: its words, each word's spans, the wordless nodes, each span's word range,
    and the white space before the first and after the last word or atom."""

    words: list[str]
    paths: list[Path]
    zeros: list[_Zero]
    ranges: dict[Span, tuple[int, int]]
    lead: str = ""
    trail: str = ""


def has_words(node: Node) -> bool:
    """Whether a node holds text besides white space (an atom holds none)."""
    if isinstance(node, str):
        return bool(node.strip())
    return isinstance(node, Span) and any(has_words(child) for child in node.children)


class _Reader:
    """Walks a segment's tree once, character by character, into a Layout."""

    def __init__(self) -> None:
        self.layout = Layout([], [], [], {})
        self.chars: list[str] = []  # every text character, in order
        self.word: list[str] = []
        self.owners: dict[Path, int] = {}  # characters of the open word under each path
        self.entries: dict[Span, int] = {}  # the word each span with words begins in
        self.places: list[tuple[_Zero, int]] = []  # wordless nodes, and the characters before them

    def end_word(self) -> None:
        if self.word:
            self.layout.words.append("".join(self.word))
            order = {path: -k for k, path in enumerate(self.owners)}
            self.layout.paths.append(max(self.owners, key=lambda p: (len(p), self.owners[p], order[p])))
            self.word, self.owners = [], {}

    def text(self, text: str, path: Path) -> None:
        for char in text:
            self.chars.append(char)
            if char.isspace():
                self.end_word()
            else:
                self.word.append(char)
                self.owners[path] = self.owners.get(path, 0) + 1

    def zero(self, node: Atom | Span, path: Path) -> None:
        self.end_word()
        follows = bool(self.places) and self.places[-1][1] == len(self.chars)  # another with nothing between
        before = bool(self.chars) and self.chars[-1].isspace() and not follows
        zero = _Zero(node, path, len(self.layout.words), before)
        self.layout.zeros.append(zero)
        self.places.append((zero, len(self.chars)))

    def walk(self, span: Span, path: Path) -> None:
        for child in span.children:
            if isinstance(child, str):
                self.text(child, path)
            elif isinstance(child, Span) and has_words(child):
                self.entries[child] = len(self.layout.words)  # the open word's index, or the next's
                self.walk(child, (*path, child))
            else:
                self.zero(child, path)

    def finish(self, root: Span) -> Layout:
        self.end_word()
        layout, text = self.layout, "".join(self.chars)
        for k, (zero, index) in enumerate(self.places):
            followed = k + 1 < len(self.places) and self.places[k + 1][1] == index
            zero.space_after = index < len(text) and text[index].isspace() and not followed
        first = min((i for _, i in self.places), default=len(text))
        last = max((i for _, i in self.places), default=0)
        layout.lead = text[: min(len(text) - len(text.lstrip()), first)]
        layout.trail = text[max(len(text.rstrip()), last) :]
        held: dict[Span, list[int]] = {}
        for i, path in enumerate(layout.paths):
            for span in path:
                held.setdefault(span, []).append(i)
        layout.ranges = {span: (at, at) for span, at in self.entries.items()}
        layout.ranges.update({span: (found[0], found[-1] + 1) for span, found in held.items()})
        layout.ranges[root] = (0, len(layout.words))
        return layout


def source_layout(root: Span) -> Layout:
    """The words of a segment's tree (what the model translates) and the places of its markup."""
    reader = _Reader()
    reader.walk(root, ())
    return reader.finish(root)


def _sources(n_source: int, n_target: int, pairs: list[tuple[int, int]]) -> list[int]:
    """The source word of each target word: its pair's (pairs past either end ignored), else the one
    before's (the first's for leading ones), else, with no pair at all, the word at the same fraction."""
    found: list[int | None] = [None] * n_target
    for i, j in pairs:
        if 0 <= j < n_target and 0 <= i < n_source and found[j] is None:
            found[j] = i
    known = [i for i in found if i is not None]
    if not known:
        return [j * n_source // n_target for j in range(n_target)]
    last = known[0]
    for j, i in enumerate(found):
        found[j] = last = last if i is None else i
    return found  # type: ignore[return-value]


def emptied(span: Span) -> Span:
    """A span whose words the translation left elsewhere: its markup kept, its text dropped."""
    kept = [child for child in span.children if not isinstance(child, str)]
    return Span(span.payload, [emptied(c) if isinstance(c, Span) and has_words(c) else c for c in kept])


def _longest_runs(labels: list[Span | None], lo: int) -> dict[Span, tuple[int, int]]:
    """Each span's longest run of consecutive target words (the first of equal runs): [start, end)."""
    best: dict[Span, tuple[int, int]] = {}
    start = 0
    for k in range(1, len(labels) + 1):
        if k == len(labels) or labels[k] is not labels[start]:
            span = labels[start]
            if span is not None and k - start > best.get(span, (0, 0))[1] - best.get(span, (0, 0))[0]:
                best[span] = (lo + start, lo + k)
            start = k
    return best


class _Carrier:
    """Builds a target tree, level by level, from the target words and their source words."""

    def __init__(self, layout: Layout, words: list[str], sources: list[int]):
        self.layout, self.words, self.sources = layout, words, sources
        self.paths = [layout.paths[i] for i in sources]  # each target word's spans, cut as spans settle

    def build(self, span: Span, path: Path, lo: int, hi: int) -> list[Node]:
        """The target children of `span`, which holds target words [lo, hi)."""
        depth = len(path)
        labels = [p[depth] if len(p) > depth else None for p in self.paths[lo:hi]]
        runs = _longest_runs(labels, lo)
        for j in range(lo, hi):
            span_j = labels[j - lo]
            if span_j is not None and not runs[span_j][0] <= j < runs[span_j][1]:
                self.paths[j] = self.paths[j][:depth]  # outside its span's run: the word leaves it
        zeros = [z for z in self.layout.zeros if z.parent == path]
        for child in span.children:
            if isinstance(child, Span) and has_words(child) and child not in runs:
                zeros.append(_Zero(child, path, self.layout.ranges[child][0], True, False))
        at: dict[int, list[_Zero]] = {}
        for zero in sorted(zeros, key=lambda z: z.at):
            at.setdefault(self.gap(zero.at, span, lo, hi, runs), []).append(zero)
        sequence: list[str | Span | _Zero] = []
        j = lo
        while True:
            sequence += at.get(j, [])
            if j == hi:
                return _spaced(sequence)
            inner = self.paths[j][depth] if len(self.paths[j]) > depth else None
            if inner is None:
                sequence.append(self.words[j])
                j += 1
            else:
                start, end = runs[inner]
                sequence.append(Span(inner.payload, self.build(inner, (*path, inner), start, end)))
                j = end

    def gap(self, at: int, span: Span, lo: int, hi: int, runs: dict[Span, tuple[int, int]]) -> int:
        """Where, among target words [lo, hi), markup found before source word `at` goes: between the
        targets of the source words either side of it when those are neighbours (in either order),
        else before the target of the nearest source word after it; never inside a child span."""
        first, last = self.layout.ranges[span]
        if at <= first or lo == hi:
            return lo
        if at >= last:
            return hi
        after = min(((self.sources[j], j) for j in range(lo, hi) if self.sources[j] >= at), default=None)
        before = max(((self.sources[j], j) for j in range(lo, hi) if self.sources[j] < at), default=None)
        if after and before and abs(after[1] - before[1]) == 1:
            q = max(after[1], before[1])
        else:
            q = after[1] if after else hi
        for start, end in runs.values():
            if start < q < end:
                q = start if q - start <= end - q else end
        return q


def _spaced(sequence: list[str | Span | _Zero]) -> list[Node]:
    """Words and spans one space apart; wordless markup with the white space it had in the source."""
    out: list[Node] = []
    for k, item in enumerate(sequence):
        if k:
            before = sequence[k - 1]
            if isinstance(item, _Zero):
                space = item.space_before or (isinstance(before, _Zero) and before.space_after)
            else:
                space = not isinstance(before, _Zero) or before.space_after
            out += [" "] if space else []
        out.append(_written(item))
    return out


def _written(item: str | Span | _Zero) -> Node:
    """A sequence item as a node: a span the translation emptied without its text."""
    if not isinstance(item, _Zero):
        return item
    return emptied(item.node) if isinstance(item.node, Span) and has_words(item.node) else item.node


def carry(root: Span, layout: Layout, words: list[str], pairs: list[tuple[int, int]]) -> Span:
    """The target tree of `root` (whose `source_layout` is `layout`): the translation's `words` with
    the markup placed through `pairs`, (source word, target word) indices. A segment without words
    comes back as it was."""
    if not layout.words:
        return root
    sources = _sources(len(layout.words), len(words), pairs)
    children = _Carrier(layout, words, sources).build(root, (), 0, len(words))
    return Span(root.payload, [n for n in (layout.lead, *children, layout.trail) if n != ""])
