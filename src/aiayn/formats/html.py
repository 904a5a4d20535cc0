"""HTML translated with its markup kept: `translate_html(translator, html)`.

The page is read with the standard library's HTML parser (html.parser, the tokenizer browsers'
rules describe, lenient as they are), and every piece of it is kept as the page spelt it: tags with
their attributes byte for byte, comments, declarations, character references. Block elements
(`<p>`, `<div>`, `<li>`, `<td>`, `<h1>`, ...) end a unit: the text and inline markup between two
block tags is translated as one segment, split into sentences (aiayn.formats.segments), and its
inline elements (`<b>`, `<a href>`, `<span>`, unknown ones) go back around the words they wrapped
through the model's word alignments (aiayn.formats.inline). `<br>`, `<img>` and other void
elements, comments, and inline elements that are not translated (`<code>`, `<script>`, `<style>`,
`<textarea>`, `<svg>`, `<math>`, and any element with `translate="no"` or class `notranslate`) are
kept whole, in the place the alignment gives them; `<pre>` and untranslated block elements stay
where they are. Text is given to the model with its references decoded (`&amp;` -> `&`), and the
translation is written with `&`, `<` and `>` escaped and every other character the page wrote as a
reference (`&copy;`, `&#8212;`) written that way again.

Malformed markup is read as browsers read it where that is plain: an inline element never closed,
or closed out of order (`<b><i>x</b></i>`), and an end tag without a start, are kept where they were
as markup without words (nothing is added or dropped), a `<` that opens no tag (`a < b`) is text.
A tag or comment that never ends (`<a href="x`, `<!-- ...` at the end of the page) is one error
naming its line and column (`HtmlError`): its text would otherwise be translated as words.
"""

from __future__ import annotations

import html as html_lib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError
from aiayn.formats.inline import Atom, Node, Span, has_words
from aiayn.formats.segments import Aligned, SegmentPlan, carry_segments, plan_segments

if TYPE_CHECKING:
    from aiayn.decode.translator import Translator

BLOCK = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "col", "colgroup", "dd",
    "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form",
    "frame", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html",
    "iframe", "legend", "li", "link", "main", "menu", "meta", "nav", "noscript", "ol", "optgroup", "option",
    "p", "pre", "search", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title",
    "tr", "ul",
})  # fmt: skip
VOID = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track",
    "wbr",
})  # fmt: skip
UNTRANSLATED = frozenset({"script", "style", "code", "pre", "textarea", "svg", "math"})


class HtmlError(AiaynError):
    """HTML that cannot be read without guessing at its text: where and what."""


class Text(str):
    """Page text: its characters (references decoded) and, in `raw`, how the page spelt it."""

    raw: str

    def __new__(cls, text: str, raw: str) -> Text:
        made = super().__new__(cls, text)
        made.raw = raw
        return made


class _Tag:
    """An inline start or end tag waiting to be paired: its name and its text as written."""

    def __init__(self, name: str, raw: str, closing: bool):
        self.name, self.raw, self.closing = name, raw, closing


class _Events(HTMLParser):
    """The parser's events with the offset each starts at: (kind, offset, tag name, attributes)."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=False)
        self.starts = [0] + [i + 1 for i, char in enumerate(page) if char == "\n"]  # the parser's lines
        self.events: list[tuple[str, int, str, list]] = []

    def _add(self, kind: str, name: str = "", attrs: list | None = None) -> None:
        line, column = self.getpos()
        self.events.append((kind, self.starts[line - 1] + column, name, attrs or []))

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self._add("start", tag, attrs)

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self._add("empty", tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        self._add("end", tag)

    def handle_data(self, data: str) -> None:
        self._add("data", data)  # the text where other events have the tag's name

    def handle_entityref(self, name: str) -> None:
        self._add("ref")

    def handle_charref(self, name: str) -> None:
        self._add("ref")

    def handle_comment(self, data: str) -> None:
        self._add("other")

    def handle_decl(self, decl: str) -> None:
        self._add("other")

    def handle_pi(self, data: str) -> None:
        self._add("other")

    def unknown_decl(self, data: str) -> None:
        self._add("other")


def _where(page: str, offset: int) -> str:
    line = page.count("\n", 0, offset) + 1
    return f"line {line}, column {offset - (page.rfind(chr(10), 0, offset) + 1) + 1}"


def _events(page: str) -> list[tuple[str, int, str, list, str]]:
    """(kind, offset, name, attributes, raw) for each event; the raws put together are the page."""
    parser = _Events(page)
    parser.feed(page)
    parser.close()
    found = parser.events
    if page and (not found or found[0][1] > 0):  # what the parser skipped at the start: kept whole
        found.insert(0, ("other", 0, "", []))
    ends = [offset for _, offset, _, _ in found[1:]] + [len(page)] if found else []
    return [(*event, page[event[1] : end]) for event, end in zip(found, ends, strict=True)]


def _unended(page: str, at: int) -> bool:
    """Whether the text at `at` is a `<` that opens a tag, comment or declaration the parser saw no end of."""
    return (
        page.startswith("<", at) and at + 1 < len(page) and (page[at + 1].isalpha() or page[at + 1] in "/!?")
    )


def _text(kind: str, name: str, raw: str, page: str, at: int, references: bool = True) -> list[Node]:
    """A data or reference event's nodes: its text, and anything the parser skipped after it, kept whole.
    Without `references`, a reference is the text it is written as."""
    if kind == "ref":
        return [Text(html_lib.unescape(raw) if references else raw, raw)]
    if _unended(page, at):
        raise HtmlError(f"{_where(page, at)}: {raw[:40]!r} opens a tag or comment that never ends")
    if not raw.startswith(name):
        return [Atom(raw)]
    return [Text(name, name)] + ([Atom(raw[len(name) :])] if len(raw) > len(name) else [])


def _hidden(tag: str, attrs: list) -> bool:
    """An element whose content is not translated: code and the like, translate="no", class notranslate."""
    values = dict(attrs)
    classes = (values.get("class") or "").split()
    return tag in UNTRANSLATED or (values.get("translate") or "").lower() == "no" or "notranslate" in classes


def _unit_tree(items: list[Node | _Tag]) -> Span:
    """A unit's items as a tree: inline elements paired with their end tags; an element never closed
    (or closed past an inner one) and an end tag without a start are kept as wordless markup."""
    root = Span(None)
    stack: list[tuple[str, Span]] = [("", root)]

    def unwrap() -> None:  # the innermost open element, unclosed: its start tag becomes an atom
        _, span = stack.pop()
        parent = stack[-1][1]
        parent.children[-1:] = [Atom(span.payload[0]), *span.children]

    for item in items:
        if not isinstance(item, _Tag):
            stack[-1][1].children.append(item)
        elif not item.closing:
            span = Span([item.raw, ""])
            stack[-1][1].children.append(span)
            stack.append((item.name, span))
        elif any(name == item.name for name, _ in stack[1:]):
            while stack[-1][0] != item.name:
                unwrap()
            stack.pop()[1].payload[1] = item.raw
        else:
            stack[-1][1].children.append(Atom(item.raw))
    while len(stack) > 1:
        unwrap()
    return root


class _Reader:
    """The page as pieces: text written as it was (str) and units to translate (Span trees)."""

    def __init__(self, page: str, blocks: frozenset[str] = BLOCK, references: bool = True):
        self.page, self.blocks, self.references = page, blocks, references
        self.pieces: list[str | Span] = []
        self.unit: list[Node | _Tag] = []
        self.hidden: list[Any] = []  # an untranslated element being read: [name, depth, raws, block]

    def flush(self) -> None:
        if self.unit:
            self.pieces.append(_unit_tree(self.unit))
            self.unit = []

    def boundary(self, raw: str) -> None:
        self.flush()
        self.pieces.append(raw)

    def hide(self, kind: str, name: str, raw: str) -> None:
        """Inside an untranslated element: kept as written up to its end tag."""
        self.hidden[2].append(raw)
        if name == self.hidden[0]:
            self.hidden[1] += {"start": 1, "end": -1}.get(kind, 0)
        if self.hidden[1] == 0:
            _, _, raws, block = self.hidden
            self.hidden = []
            self.boundary("".join(raws)) if block else self.unit.append(Atom("".join(raws)))

    def read(self, kind: str, at: int, name: str, attrs: list, raw: str) -> None:
        if self.hidden:
            self.hide(kind, name, raw)
        elif kind == "start" and name not in VOID and _hidden(name, attrs):
            self.hidden = [name, 1, [raw], name in self.blocks]
        elif kind in ("start", "empty", "end") and name in self.blocks:
            self.boundary(raw)
        elif kind == "empty" or (kind in ("start", "end") and name in VOID):
            self.unit.append(Atom(raw))
        elif kind in ("start", "end"):
            self.unit.append(_Tag(name, raw, kind == "end"))
        elif kind in ("data", "ref"):
            self.unit += _text(kind, name, raw, self.page, at, self.references)
        else:
            self.unit.append(Atom(raw))

    def finish(self) -> list[str | Span]:
        if self.hidden:  # never closed: kept as written to the end of the page
            self.unit.append(Atom("".join(self.hidden[2])))
        self.flush()
        return self.pieces


def page_pieces(page: str, blocks: frozenset[str] = BLOCK, references: bool = True) -> list[str | Span]:
    """The page as text kept as written (str) and units to translate (trees; aiayn.formats.inline);
    `references`: whether `&amp;` is `&` (HTML) or the five characters (SubRip's plain text)."""
    reader = _Reader(page, blocks, references)
    for event in _events(page):
        reader.read(*event)
    return reader.finish()


def inline_tree(fragment: str, references: bool = True) -> Span:
    """A fragment read as one unit (block tags kept as wordless markup): subtitle cues."""
    pieces = page_pieces(fragment, frozenset(), references)
    return pieces[0] if pieces else Span(None)  # type: ignore[return-value]


def unit_count(page: str) -> int:
    """How many units of the page have words to translate."""
    return sum(1 for piece in page_pieces(page) if isinstance(piece, Span) and has_words(piece))


def escaper(pieces: list[str | Span]) -> Callable[[str], str]:
    """Translated text as HTML: `&`, `<`, `>` escaped, and each other character that the page wrote
    as a reference (`&eacute;`) written the same way (ASCII letters and digits never)."""
    spelt = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}

    def collect(node: Node) -> None:
        if isinstance(node, Text) and node.raw.startswith("&") and len(node) == 1:
            if not (node.isascii() and node.isalnum()):
                spelt[str(node)] = node.raw
        elif isinstance(node, Span):
            for child in node.children:
                collect(child)

    for piece in pieces:
        collect(piece) if isinstance(piece, Span) else None
    return lambda text: "".join(spelt.get(char, char) for char in text)


def render(node: Node, escape: Callable[[str], str]) -> str:
    """A tree written out: page text as the page spelt it, translated text through `escape`."""
    if isinstance(node, Text):
        return node.raw
    if isinstance(node, str):
        return escape(node)
    if isinstance(node, Atom):
        return node.payload
    start, end = node.payload or ("", "")
    return start + "".join(render(child, escape) for child in node.children) + end


@dataclass
class HtmlPlan:
    """A page cut into its markup as written (str) and its segments, and their sentences."""

    pieces: list[str | Span]
    segments: SegmentPlan


def plan_html(html: str, language: str) -> HtmlPlan:
    """The sentences (in `language`) a page's text is translated as; raises HtmlError (an
    AiaynError) for a tag or comment that never ends."""
    pieces = page_pieces(html)
    return HtmlPlan(pieces, plan_segments([piece for piece in pieces if isinstance(piece, Span)], language))


def render_html(plan: HtmlPlan, best: Sequence[Aligned]) -> str:
    """The page with its text replaced by `best` (the aligned translation of each of its
    sentences) and its markup carried onto it."""
    targets, escape = iter(carry_segments(plan.segments, best)), escaper(plan.pieces)
    pieces = plan.pieces
    return "".join(piece if isinstance(piece, str) else render(next(targets), escape) for piece in pieces)


def translate_html(
    translator: Translator, html: str, options: DecodeConfig | None = None, **controls: Any
) -> str:
    """An HTML page or fragment with its text translated and its markup kept (see the module's
    docstring); `options` and `controls` are `Translator.translate_batch`'s, its sentences
    translated in one call. Raises HtmlError (an AiaynError) for a tag or comment that never ends.
    (The server sends `plan_html`'s sentences through its batcher and renders with `render_html`.)"""
    plan = plan_html(html, translator.info.get("src_lang") or "en")
    sentences = plan.segments.sentences
    found = translator.translate_batch(sentences, options, **{**controls, "align": True}) if sentences else []
    return render_html(plan, [hyps[0] for hyps in found])
