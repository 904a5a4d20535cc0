"""gettext PO files: every untranslated entry filled and marked `fuzzy`, placeholders kept.

Read and written with polib (gettext's layout: lines wrapped at 78 columns). An entry is filled
when its `msgstr` (all its plural forms) is empty and it is neither fuzzy nor obsolete; entries
already translated, fuzzy ones and the header keep their text. A plural entry gets its `msgid`'s
translation in `msgstr[0]` and its `msgid_plural`'s in the others (as many as the header's
`nplurals`). Machine output is marked `fuzzy`, so that gettext leaves it out of compiled catalogues
until a translator has read it.

Placeholders never reach the model: printf's (`%s`, `%d`, `%5.2f`, `%lu`, `%1$s`, `%%`), Python's
(`%(n)d`, `{name}`, `{0}`, `{}`, `{{`), Ruby's `%{name}`, are kept whole and put back beside the
words they stood by through the word alignments (aiayn.formats.inline), so each one is in the
translation exactly once. Unnumbered printf placeholders and `{}` mean their arguments by their
order: a translation that reorders them is not written, the entry stays untranslated, and a line
says so (`po.po:42: the translation reorders %s and %d; left untranslated`). Entries flagged
`no-c-format` / `no-python-format` / `no-python-brace-format` keep those characters as text.

The header's `Language` must be the language translated into (--to, or the model's tgt_lang;
compared by primary subtag, aiayn.formats.files.check_languages): a German catalogue given to an
English model is one line, before anything is written. A template (an empty `Language`) passes.

Syntax: every line that is not a comment must be a keyword with a quoted string or a quoted
continuation; anything else is one error naming the file and line (polib alone reads some broken
lines as empty strings).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError
from aiayn.formats.files import Filled, check_languages
from aiayn.formats.inline import Atom, Node, Span, has_words
from aiayn.formats.segments import translate_segments

if TYPE_CHECKING:
    from aiayn.decode.translator import Translator

WIDTH = r"[-+#0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|ll|[hlLqjzt])?"  # printf's flags, width, precision, size
CONVERSION = r"(?:[diouxXeEfFgGaAcspnmr%]|<PRI\w+>)"  # <PRIuMAX>: gettext's ISO C 99 macros
PRINTF = rf"%(?:\d+\$|\([^)\s]*\))?{WIDTH}{CONVERSION}"
C_FORMAT = PRINTF.replace("[-+#0']", "[-+ #0']")  # c-format entries: the space flag too ("% d")
BRACE = r"\{\{|\}\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}"
RUBY = r"%\{\w+\}"
ORDERED = re.compile(rf"%[-+ #0']*{WIDTH}(?!%){CONVERSION}|\{{\}}")  # unnumbered: meant by their order
LINE = re.compile(r'\s*(?:(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+)?"(?:[^"\\]|\\.)*"\s*')
CHARSET = re.compile(rb"charset=([-\w.:]+)")


class PoError(AiaynError):
    """A PO file aiayn cannot read: which line and why."""


def placeholders(flags: list[str]) -> re.Pattern:
    """The placeholders of an entry with these flags (`no-c-format` and the like turn kinds off)."""
    kinds = [RUBY]
    if "c-format" in flags:
        kinds.append(C_FORMAT)
    elif "no-c-format" not in flags and "no-python-format" not in flags:
        kinds.append(PRINTF)
    if "no-python-brace-format" not in flags:
        kinds.append(BRACE)
    return re.compile("|".join(kinds))


def segment(text: str, pattern: re.Pattern) -> Span:
    """A message as a segment tree: its text, each placeholder an atom."""
    root, start = Span(None), 0
    for found in pattern.finditer(text):
        root.children += [text[start : found.start()], Atom(found.group())]
        start = found.end()
    root.children.append(text[start:])
    return root


def written(node: Node) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, Atom):
        return node.payload
    return "".join(written(child) for child in node.children)


def _ordered(root: Span) -> list[Atom]:
    return [c for c in root.children if isinstance(c, Atom) and ORDERED.fullmatch(c.payload)]


def check_syntax(text: str, name: str) -> None:
    """One error for the first line that is neither a comment, blank, nor a keyword and quoted string."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#") and not LINE.fullmatch(line):
            raise PoError(f"{name}:{number}: not PO syntax: {line[:60]!r}")


def _read(data: bytes, name: str):
    import polib

    found = CHARSET.search(data[:4096])
    charset = found.group(1).decode("ascii") if found else "utf-8"
    charset = "utf-8" if charset.upper() == "CHARSET" else charset  # a template's placeholder
    try:
        text = data.decode(charset)
    except (LookupError, UnicodeDecodeError):
        raise PoError(f"{name}: not {charset} text, the charset its header names") from None
    check_syntax(text, name)
    try:
        return polib.pofile(text, encoding=charset), charset
    except OSError as err:  # polib's "Syntax error in po file (line N)"
        raise PoError(f"{name}: {err}") from None


def _forms(po, entry) -> list[int]:
    found = re.search(r"nplurals\s*=\s*(\d+)", po.metadata.get("Plural-Forms", ""))
    count = int(found.group(1)) if found else 2
    return sorted(set(entry.msgstr_plural) | set(range(count)))


def _todo(entry) -> bool:
    if entry.obsolete or entry.fuzzy or not entry.msgid:
        return False
    return not entry.msgstr and not any(entry.msgstr_plural.values())


def translate_po(
    translator: Translator, data: bytes, name: str, options: DecodeConfig | None = None, **controls: Any
) -> Filled:
    """The PO file `data` (`name` for messages) with its untranslated entries filled."""
    po, charset = _read(data, name)
    language = po.metadata.get("Language")
    check_languages(translator.info, name, None, language, controls.get("target_language"))
    entries = [e for e in po if _todo(e)]
    kept = sum(1 for e in po if e.msgid and not e.obsolete and not _todo(e))
    trees = []
    for entry in entries:
        pattern = placeholders(entry.flags)
        trees.append([segment(m, pattern) for m in (entry.msgid, entry.msgid_plural) if m])
    entries = [e for e, t in zip(entries, trees, strict=True) if any(map(has_words, t))]
    trees = [t for t in trees if any(map(has_words, t))]
    targets = iter(translate_segments(translator, [s for t in trees for s in t], options, **controls))
    refused = []
    for entry, sources in zip(entries, trees, strict=True):
        found = [next(targets) for _ in sources]
        moved = [s for s, t in zip(sources, found, strict=True) if _ordered(s) != _ordered(t)]
        if moved:
            names = " and ".join(dict.fromkeys(a.payload for a in _ordered(moved[0])))
            refused.append(f"{name}:{entry.linenum}: the translation reorders {names}; left untranslated")
            continue
        texts = [written(t) for t in found]
        if entry.msgid_plural:
            entry.msgstr_plural = {k: texts[min(k, 1)] for k in _forms(po, entry)}
        else:
            entry.msgstr = texts[0]
        entry.flags.insert(0, "fuzzy")
    translated = len(entries) - len(refused)
    text = str(po)
    text = text[2:] if not po.header and text.startswith("#\n") else text  # polib's line for no comment
    return Filled(text.encode(charset), translated, kept, refused)
