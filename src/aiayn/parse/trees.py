"""Penn-Treebank bracketed trees (section 6.3): reading, normalising, writing, and the linearisation
of Vinyals et al. (2015, "Grammar as a Foreign Language") that turns parsing into translation.

Reading. A file holds bracketed trees one after another, each on one line or spread over many (the
WSJ .mrg files): "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )". A node is "(LABEL
child ...)"; a preterminal is "(TAG word)". Malformed input is an `AiaynError` naming file and line.

Normalising (what a parser is trained on and scored against, as in Collins 1997 and the papers
after it): the unlabelled/TOP/ROOT root above a single constituent is removed, traces (-NONE-) are
removed with every constituent left empty, and function tags are cut from constituent labels as
EVALB does (NP-SBJ-1 -> NP, NP=2 -> NP). POS tags and words are kept.

Linearisation (the target side): "(S (NP XX XX )NP (VP XX )VP XX )S" - a token "(L" opening and a
token ")L" closing each constituent, and "XX" for each word: POS tags are not predicted (Vinyals
et al. normalise them to XX; EVALB does not score them). The source is the words, space-separated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.errors import AiaynError

TERMINAL = "XX"  # the target token of every word
ROOT_LABELS = ("", "TOP", "ROOT")  # a root with such a label above one constituent is removed
TRACE_TAG = "-NONE-"
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class TreeError(AiaynError):
    """A bracketed tree is malformed; the message names the file and line."""


@dataclass
class Tree:
    """A constituent `label` with `children`, or a preterminal: a POS tag `label` over one `word`."""

    label: str
    children: list[Tree] = field(default_factory=list)
    word: str | None = None

    @property
    def is_preterminal(self) -> bool:
        return self.word is not None

    def preterminals(self) -> list[Tree]:
        """The (TAG word) nodes from left to right."""
        out: list[Tree] = []
        stack = [self]
        while stack:
            node = stack.pop()
            if node.is_preterminal:
                out.append(node)
            else:
                stack.extend(reversed(node.children))
        return out

    def words(self) -> list[str]:
        return [leaf.word for leaf in self.preterminals()]  # type: ignore[misc]

    def __str__(self) -> str:
        """One line of Penn-Treebank brackets: (S (NP (DT The) (NN dog)) (VP (VBZ barks)))."""
        if self.is_preterminal:
            return f"({self.label} {self.word})"
        return f"({self.label} {' '.join(str(child) for child in self.children)})"


def _tokens(text: str, first_line: int) -> list[tuple[str, int]]:
    """(token, line number) for every "(", ")" and label-or-word in `text`."""
    out, line, pos = [], first_line, 0
    for match in _TOKEN.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        out.append((match.group(), line))
    return out


def parse_trees(text: str, where: str, first_line: int = 1) -> Iterator[tuple[int, Tree]]:
    """Every tree in `text` as (line it starts on, Tree); errors name `where` and the line."""
    tokens = _tokens(text, first_line)
    stack: list[tuple[Tree, int]] = []  # open nodes and the line each opened on
    i = 0
    while i < len(tokens):
        token, line = tokens[i]
        i += 1
        if token == "(":
            node = Tree("")
            if i < len(tokens) and tokens[i][0] not in ("(", ")"):
                node.label, i = tokens[i][0], i + 1
            if stack:
                _add_child(stack[-1][0], node, where, line)
            stack.append((node, line))
        elif token == ")":
            if not stack:
                raise TreeError(f"{where}:{line}: ')' closes no bracket")
            node, start = stack.pop()
            if not node.children and not node.is_preterminal:
                raise TreeError(f"{where}:{line}: empty bracket ({node.label})")
            if not stack:
                yield start, node
        elif not stack:
            raise TreeError(f"{where}:{line}: {token!r} outside any bracket")
        else:
            _add_word(stack[-1][0], token, where, line)
    if stack:
        raise TreeError(f"{where}:{stack[0][1]}: the bracket opened here is never closed")


def _add_child(parent: Tree, child: Tree, where: str, line: int) -> None:
    if parent.is_preterminal:
        raise TreeError(f"{where}:{line}: ({parent.label} {parent.word} ...) has a word and a constituent")
    parent.children.append(child)


def _add_word(parent: Tree, word: str, where: str, line: int) -> None:
    if parent.children or parent.is_preterminal:
        raise TreeError(
            f"{where}:{line}: ({parent.label} ...) holds more than a word, or a word and a constituent"
        )
    parent.word = word


def read_text(path: Path) -> str:
    """A UTF-8 file's text; a missing file or invalid UTF-8 is a TreeError naming the file."""
    if not path.is_file():
        raise TreeError(f"{path}: no such file")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise TreeError(f"{path}:{line}: invalid UTF-8") from None


def read_trees(path: str | Path) -> list[tuple[int, Tree]]:
    """All trees of a file (.mrg, or one per line) as (line, Tree)."""
    path = Path(path)
    return list(parse_trees(read_text(path), str(path)))


def read_tree_lines(path: str | Path) -> list[Tree | None]:
    """One tree per line (the files EVALB scores); an empty line is None (no parse)."""
    path = Path(path)
    out: list[Tree | None] = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        trees = list(parse_trees(line, str(path), first_line=number))
        if len(trees) > 1:
            raise TreeError(f"{path}:{number}: {len(trees)} trees on one line; give one tree per line")
        out.append(trees[0][1] if trees else None)
    return out


def strip_function_tags(label: str) -> str:
    """EVALB's label trimming: cut at the first '-' or '=' (NP-SBJ-1 -> NP); -NONE-, -LRB- stay."""
    cut = re.split(r"[-=]", label, maxsplit=1)[0]
    return cut or label


def _without_traces(node: Tree) -> Tree | None:
    if node.is_preterminal:
        return None if node.label == TRACE_TAG else node
    children = [kept for child in node.children if (kept := _without_traces(child)) is not None]
    return Tree(strip_function_tags(node.label), children) if children else None


def normalise(tree: Tree) -> Tree | None:
    """The tree a parser learns and is scored on (module docstring); None if no word is left."""
    kept = _without_traces(tree)
    while kept is not None and kept.label in ROOT_LABELS and len(kept.children) == 1:
        if kept.children[0].is_preterminal:
            break
        kept = kept.children[0]
    if kept is not None and (kept.is_preterminal or kept.label in ("", "ROOT")):
        kept = Tree("TOP", [kept] if kept.is_preterminal else kept.children)
    return kept


def constituent_labels(tree: Tree) -> set[str]:
    """The labels of every constituent (not the POS tags)."""
    labels, stack = set(), [tree]
    while stack:
        node = stack.pop()
        if not node.is_preterminal:
            labels.add(node.label)
            stack.extend(node.children)
    return labels


def linearise(tree: Tree) -> list[str]:
    """The target tokens: "(L" ... ")L" per constituent, TERMINAL per word (module docstring)."""
    out: list[str] = []
    stack: list[Tree | str] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif item.is_preterminal:
            out.append(TERMINAL)
        else:
            out.append("(" + item.label)
            stack.append(")" + item.label)
            stack.extend(reversed(item.children))
    return out


def delinearise(tokens: Sequence[str], words: Sequence[str], tags: Sequence[str] | None = None) -> Tree:
    """The tree of a well-formed token sequence, its TERMINALs replaced by `words` (and `tags`).

    Raises ValueError when the sequence is not one tree with exactly len(words) terminals and
    matching labels on every bracket pair.
    """
    tags = tags if tags is not None else [TERMINAL] * len(words)
    stack: list[Tree] = []
    root, used = None, 0
    for i, token in enumerate(tokens):
        if root is not None:
            raise ValueError(f"token {i + 1} ({token!r}) follows the end of the tree")
        if token == TERMINAL:
            if not stack or used == len(words):
                raise ValueError(f"token {i + 1}: a word outside the tree or beyond the {len(words)} words")
            stack[-1].children.append(Tree(tags[used], word=words[used]))
            used += 1
        elif token.startswith("("):
            node = Tree(token[1:])
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
        elif token.startswith(")") and stack and token[1:] == stack[-1].label and stack[-1].children:
            node = stack.pop()
            root = node if not stack else None
        else:
            raise ValueError(f"token {i + 1} ({token!r}) does not close an open, non-empty constituent")
    if root is None or used != len(words):
        raise ValueError(f"not one complete tree over the {len(words)} words")
    return root
