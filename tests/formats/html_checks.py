"""What the HTML tests read from a page, with the standard library's parser and nothing of aiayn:
its start tags as written, each with the start tags around it, its end tags, comments and other
markup, and the words of its text (references decoded; the content of elements that are not
translated set apart), each with the start tags around any of its characters. Words run across
inline tags (`<b>big</b>ger` is one) and end at white space, block tags, and markup that holds no
text (`<br>`, a comment, an untranslated element)."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
        "track", "wbr"}  # fmt: skip
KEPT = {"script", "style", "code", "pre", "textarea", "svg", "math"}
BLOCKS = {"html", "head", "body", "title", "meta", "p", "div", "ul", "ol", "li", "table", "tr", "td", "th",
          "h1", "pre"}  # fmt: skip  # those of the golden fragments


class Page(HTMLParser):
    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, str]] = []  # (name, start tag as written)
        self.tags: Counter = Counter()  # (ancestors' start tags, start tag)
        self.ends: Counter = Counter()
        self.other: Counter = Counter()
        self.words: list[tuple[str, set[str]]] = []  # translated words and the start tags around them
        self.word: list[str] = []
        self.around: set[str] = set()
        self.kept: list[str] = []  # words of untranslated elements
        self.balanced = True
        self.hidden = 0
        self.feed(page)
        self.close()

    def end_word(self):
        if self.word:
            self.words.append(("".join(self.word), self.around))
            self.word, self.around = [], set()

    def handle_starttag(self, tag, attrs):
        raw = self.get_starttag_text()
        self.tags[(tuple(r for _, r in self.open), raw)] += 1
        values = dict(attrs)
        hidden = (
            tag in KEPT or values.get("translate") == "no" or "notranslate" in (values.get("class") or "")
        )
        if hidden or tag in VOID or tag in BLOCKS:
            self.end_word()
        if tag not in VOID:
            self.open.append((tag, raw))
            self.hidden += bool(self.hidden) or hidden

    def handle_startendtag(self, tag, attrs):
        self.end_word()
        self.tags[(tuple(r for _, r in self.open), self.get_starttag_text())] += 1

    def handle_endtag(self, tag):
        self.ends[tag] += 1
        if tag in BLOCKS:
            self.end_word()
        if self.open and self.open[-1][0] == tag:
            self.open.pop()
            self.end_word() if self.hidden == 1 else None
            self.hidden = max(0, self.hidden - 1)
        else:
            self.balanced = False

    def handle_data(self, data):
        if self.hidden:
            self.kept += data.split()
            return
        for char in data:
            if char.isspace():
                self.end_word()
            else:
                self.word.append(char)
                self.around |= {r for _, r in self.open}

    def close(self):
        super().close()
        self.end_word()

    def handle_comment(self, data):
        self.end_word()
        self.other[f"<!--{data}-->"] += 1

    def handle_decl(self, decl):
        self.end_word()
        self.other[decl] += 1

    def handle_pi(self, data):
        self.end_word()
        self.other[data] += 1

    def inside(self, start_tag: str) -> Counter:
        """The words (case folded) inside the elements that start with `start_tag`."""
        return Counter(w.casefold() for w, tags in self.words if start_tag in tags)
