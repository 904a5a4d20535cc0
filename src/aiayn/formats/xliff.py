"""XLIFF 1.2 and 2.0 files: every source without a translation gets one, inline tags kept.

Read with lxml (no DTD, no external entities, no network). XLIFF 1.2 (and 1.0, 1.1): a
`<trans-unit>` whose `<target>` is missing or empty gets a target after its source, marked
`state="needs-review-translation" state-qualifier="mt-suggestion"`. XLIFF 2.0 (and 2.1): a
`<segment>` whose `<target>` is missing or empty gets one, and the segment is marked
`state="translated" subState="aiayn:mt"` (2.0 has no state "needs review": `translated` is the
state before `reviewed`, and the subState, whose prefix names its authority, says a machine made
it); the file gets `trgLang` from the model when it has none (2.0 requires it once a target
exists). Targets already holding text or tags, and units (or their groups and files) marked
`translate="no"`, are left as they were. A 1.2 unit with a `<seg-source>` (its source split into
`<mrk mtype="seg">` segments) gets a target that mirrors it: each segment translated on its own
into a `<mrk>` of the same `mid`, what lies between the segments copied.

The file's languages (1.2's `source-language`/`target-language` on each `<file>`, 2.0's
`srcLang`/`trgLang`) must be the model's (aiayn.formats.files.check_languages): a file of another
language pair is one line, before anything is written.

Inline tags go back around the words they wrapped through the model's word alignments
(aiayn.formats.inline): the paired `<g>` and `<mrk>` (1.2), `<pc>` and `<mrk>` (2.0) are spans; the
standalone and native-code elements (`<x/>`, `<bx/>`, `<ex/>`, `<ph>`, `<bpt>`, `<ept>`, `<it>`;
`<ph/>`, `<sc/>`, `<ec/>`, `<sm/>`, `<em/>`, `<cp/>`), a `<mrk translate="no">` or
`mtype="protected"`, and comments are copied whole. A file that is not XML, not XLIFF, or of
another version is one line naming it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError
from aiayn.formats.files import Filled, check_languages
from aiayn.formats.inline import Atom, Node, Span, has_words
from aiayn.formats.segments import translate_segments

if TYPE_CHECKING:
    from aiayn.decode.translator import Translator

VERSIONS = {"1.0": 1, "1.1": 1, "1.2": 1, "2.0": 2, "2.1": 2}
PAIRED = {1: frozenset({"g", "mrk"}), 2: frozenset({"pc", "mrk"})}
SUBSTATE = "aiayn:mt"


class XliffError(AiaynError):
    """A file aiayn cannot read as XLIFF: which, where and why."""


def _parse(data: bytes, name: str):
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        return etree.fromstring(data, parser).getroottree()
    except etree.XMLSyntaxError as err:
        raise XliffError(f"{name}:{err.position[0]}: not well-formed XML: {err.msg}") from None


def _version(root, name: str) -> int:
    from lxml import etree

    if etree.QName(root).localname != "xliff":
        raise XliffError(f"{name}: not an XLIFF file (its root element is <{etree.QName(root).localname}>)")
    version = root.get("version")
    if version not in VERSIONS:
        known = ", ".join(VERSIONS)
        raise XliffError(f"{name}:{root.sourceline}: XLIFF version {version!r}: aiayn reads {known}")
    return VERSIONS[version]


def _local(element) -> str:
    from lxml import etree

    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def _protected(element) -> bool:
    return element.get("translate") == "no" or element.get("mtype") == "protected"


def _tree(element, paired: frozenset[str], span: Span | None = None) -> Span:
    """An element's content as a segment tree: paired inline elements as spans, the rest as atoms."""
    span = span or Span(None)
    if element.text:
        span.children.append(element.text)
    for child in element:
        if _local(child) in paired and not _protected(child):
            span.children.append(_tree(child, paired, Span(child)))
        else:
            span.children.append(Atom(child))
        if child.tail:
            span.children.append(child.tail)
    return span


def _add_text(parent, text: str) -> None:
    if len(parent):
        parent[-1].tail = (parent[-1].tail or "") + text
    else:
        parent.text = (parent.text or "") + text


def _write(parent, nodes: list[Node]) -> None:
    """A target tree's nodes into `parent`: text, copies of atoms, new elements for spans."""
    from lxml import etree

    for node in nodes:
        if isinstance(node, str):
            _add_text(parent, node)
        elif isinstance(node, Atom):
            made = copy.deepcopy(node.payload)
            made.tail = None
            parent.append(made)
        else:
            _write(etree.SubElement(parent, node.payload.tag, dict(node.payload.attrib)), node.children)


def _empty(target) -> bool:
    return target is None or (not (target.text or "").strip() and len(target) == 0)


def _skipped(element) -> bool:
    """Marked translate="no" itself or on a group or file around it."""
    return any(e.get("translate") == "no" for e in (element, *element.iterancestors()))


def _places(root, version: int) -> tuple[list[tuple[Any, Any, Any]], int]:
    """(holder, source, target or None) of each source to translate, and how many already have a target."""
    ns = root.nsmap.get(None)
    q = (lambda local: f"{{{ns}}}{local}") if ns else (lambda local: local)
    holders = root.iter(q("trans-unit")) if version == 1 else root.iter(q("segment"))
    todo, kept = [], 0
    for holder in holders:
        source, target = holder.find(q("source")), holder.find(q("target"))
        if source is None or _skipped(holder):
            continue
        if _empty(target):
            todo.append((holder, source, target))
        else:
            kept += 1
    return todo, kept


def _set_target(holder, source, target, version: int) -> Any:
    """The holder's target, emptied, or a new one after its source (and 1.2's seg-source)."""
    from lxml import etree

    if target is not None:
        target.text = None
        del target[:]
    else:
        target = source.makeelement(etree.QName(etree.QName(source).namespace, "target"), {})
        after = source
        if source.getnext() is not None and _local(source.getnext()) == "seg-source":
            after = source.getnext()
        before = source.getprevious().tail if source.getprevious() is not None else source.getparent().text
        target.tail = after.tail  # the indentation before the next element, as it was
        after.addnext(target)
        after.tail = before if before and before.isspace() else after.tail  # the target's, as the source's
    if version == 1:
        target.set("state", "needs-review-translation")
        target.set("state-qualifier", "mt-suggestion")
    else:
        holder.set("state", "translated")
        holder.set("subState", SUBSTATE)
    return target


def _segments(holder, source, version: int) -> tuple[Any, list]:
    """The element a new target mirrors and the parts of it translated: a 1.2 unit's `<seg-source>`
    and its `<mrk mtype="seg">` segments where it has them, else the source whole."""
    seg_source = next((e for e in holder if _local(e) == "seg-source"), None) if version == 1 else None
    found = [] if seg_source is None else list(seg_source)
    marks = [e for e in found if _local(e) == "mrk" and e.get("mtype") == "seg"]
    return (seg_source, marks) if marks else (source, [source])


def _mirror(target, model, parts: list, translated: list[Span]) -> None:
    """`target` filled as `model` (a seg-source) is: each segment's translation in a copy of its
    `<mrk>`, everything else (text between segments, other elements) copied."""
    from lxml import etree

    _add_text(target, model.text or "")
    for child in model:
        if child in parts:
            made = etree.SubElement(target, child.tag, dict(child.attrib))
            _write(made, translated[parts.index(child)].children)
        else:
            made = copy.deepcopy(child)
            target.append(made)
        made.tail = child.tail


def _languages(root, version: int, name: str, controls: dict) -> None:
    """The file's declared languages against the model's (one line for another pair)."""
    ns = root.nsmap.get(None)
    if version == 2:
        found = [(root.get("srcLang"), root.get("trgLang"))]
    else:
        files = root.iter(f"{{{ns}}}file" if ns else "file")
        found = [(f.get("source-language"), f.get("target-language")) for f in files]
    for source, target in found:
        check_languages(controls["info"], name, source, target, controls.get("target_language"))


def translate_xliff(
    translator: Translator, data: bytes, name: str, options: DecodeConfig | None = None, **controls: Any
) -> Filled:
    """The XLIFF file `data` (`name` for messages) with its untranslated sources translated."""
    from lxml import etree

    tree = _parse(data, name)
    root = tree.getroot()
    version = _version(root, name)
    _languages(root, version, name, {**controls, "info": translator.info})
    todo, kept = _places(root, version)
    found = []  # (place, the element the target mirrors, its parts, their trees)
    for place in todo:
        model, parts = _segments(place[0], place[1], version)
        trees = [_tree(part, PAIRED[version]) for part in parts]
        if any(map(has_words, trees)):
            found.append((place, model, parts, trees))
    worded = [t for *_, trees in found for t in trees if has_words(t)]
    targets = iter(translate_segments(translator, worded, options, **controls))
    for (holder, source, target), model, parts, trees in found:
        translated = [next(targets) if has_words(t) else t for t in trees]
        target = _set_target(holder, source, target, version)
        if model is source:
            _write(target, translated[0].children)
        else:
            _mirror(target, model, parts, translated)
    if version == 2 and found and not root.get("trgLang"):
        language = translator.info.get("tgt_lang")
        if not language:
            raise XliffError(f"{name}: no trgLang, and the model names no target language to write there")
        root.set("trgLang", language)
    encoding = tree.docinfo.encoding or "UTF-8"
    return Filled(etree.tostring(tree, xml_declaration=True, encoding=encoding), len(found), kept)
