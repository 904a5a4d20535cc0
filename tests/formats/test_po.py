"""translate_po on Debian's own catalogues (coreutils' German messages, turned back into a PO file by
gettext's msgunfmt, every other entry's translation removed): the removed ones are filled and marked
fuzzy, the others kept, every placeholder kept, and gettext's `msgfmt -c` accepts the result."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import polib
import pytest
from word_models import Copier, Reverser

from aiayn.errors import AiaynError
from aiayn.formats.po import PoError, translate_po

CATALOGUE = Path("/usr/share/locale/de/LC_MESSAGES/coreutils.mo")
PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?[-+#0']*\d*(?:\.\d+)?(?:hh|ll|[hlLqjzt])?(?:[diouxXeEfFgGaAcspnm%]|<PRI\w+>)"
)

needs_gettext = pytest.mark.skipif(
    not (CATALOGUE.exists() and shutil.which("msgunfmt") and shutil.which("msgfmt")),
    reason="needs gettext (msgunfmt, msgfmt) and coreutils' German messages",
)


def half_translated(tmp_path: Path, limit: int | None = None, language: str | None = None) -> Path:
    """coreutils' German catalogue as a PO file: entries with % marked c-format (the .mo file lost the
    flag), every other entry's translation removed; `limit`: only the first entries; `language`: the
    header's Language instead of de."""
    path = tmp_path / "coreutils.de.po"
    subprocess.run(["msgunfmt", str(CATALOGUE), "-o", str(path)], check=True)
    po = polib.pofile(str(path))
    po.metadata["Language"] = language or po.metadata.get("Language", "de")
    for k, entry in enumerate([e for e in po if e.msgid]):
        if limit is not None and k >= limit:
            po.remove(entry)
            continue
        if "%" in entry.msgid:
            entry.flags.append("c-format")
        if k % 2 == 0:
            entry.msgstr = ""
            entry.msgstr_plural = {i: "" for i in entry.msgstr_plural}
    po.save(str(path))
    return path


def msgfmt_check(data: bytes, tmp_path: Path) -> subprocess.CompletedProcess:
    (tmp_path / "out.po").write_bytes(data)
    argv = ["msgfmt", "-c", "--use-fuzzy", "-o", "/dev/null", str(tmp_path / "out.po")]
    return subprocess.run(argv, capture_output=True, text=True)


@needs_gettext
def test_debian_catalogue_filled_with_placeholders_kept(tmp_path):
    path = half_translated(tmp_path)
    before = {(e.msgctxt, e.msgid): e for e in polib.pofile(str(path))}
    filled = translate_po(Copier(), path.read_bytes(), str(path))
    checked = msgfmt_check(filled.data, tmp_path)
    assert checked.returncode == 0, checked.stderr
    after = polib.pofile(filled.data.decode("utf-8"))
    made = 0
    for entry in after:
        old = before[(entry.msgctxt, entry.msgid)]
        if old.msgstr or any(old.msgstr_plural.values()) or not entry.msgid:
            assert (entry.msgstr, entry.msgstr_plural, entry.flags) == (
                old.msgstr,
                old.msgstr_plural,
                old.flags,
            )
            continue
        if not entry.fuzzy:  # nothing to translate: only placeholders and punctuation
            assert not re.search(r"[A-Za-z]{2}", PLACEHOLDER.sub("", entry.msgid))
            continue
        made += 1
        for source, target in [(entry.msgid, entry.msgstr or entry.msgstr_plural.get(0))] + [
            (entry.msgid_plural, t) for k, t in entry.msgstr_plural.items() if k
        ]:
            assert Counter(PLACEHOLDER.findall(target)) == Counter(PLACEHOLDER.findall(source))
            assert target.startswith("\n") == source.startswith("\n")
            assert target.endswith("\n") == source.endswith("\n")
    assert made == filled.translated > 400 and not filled.refused
    assert filled.kept == sum(
        1 for e in before.values() if e.msgid and (e.msgstr or any(e.msgstr_plural.values()))
    )


@needs_gettext
def test_reordered_unnumbered_placeholders_leave_the_entry_untranslated(tmp_path):
    path = half_translated(tmp_path)
    filled = translate_po(Reverser(), path.read_bytes(), "coreutils.de.po")
    assert filled.refused
    for line in filled.refused:
        assert re.fullmatch(r"coreutils\.de\.po:\d+: the translation reorders .+; left untranslated", line)
    checked = msgfmt_check(filled.data, tmp_path)
    assert checked.returncode == 0, checked.stderr
    for entry in (e for e in polib.pofile(filled.data.decode("utf-8")) if e.fuzzy):
        target = entry.msgstr or entry.msgstr_plural[0]
        assert Counter(PLACEHOLDER.findall(target)) == Counter(PLACEHOLDER.findall(entry.msgid))


@needs_gettext
def test_the_toy_translator_on_part_of_the_catalogue(translator, tmp_path):
    path = half_translated(tmp_path, limit=80, language="en")  # the toy translates into English
    filled = translate_po(translator, path.read_bytes(), str(path))
    checked = msgfmt_check(filled.data, tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert filled.translated + len(filled.refused) >= 30


PLURALS = b"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 ? 1 : 2);\\n"

#, python-format
msgid "%(n)d file in {dir}"
msgid_plural "%(n)d files in {dir}"
msgstr[0] ""
msgstr[1] ""
msgstr[2] ""

#, fuzzy
msgid "a guess"
msgstr "eine Vermutung"

#~ msgid "gone"
#~ msgstr ""

msgid "%%d of %1$s and %2$s"
msgstr ""
"""


def test_plural_forms_named_placeholders_and_what_is_kept():
    filled = translate_po(Copier(), PLURALS, "p.po")
    po = polib.pofile(filled.data.decode("utf-8"))
    plural = po.find("%(n)d file in {dir}")
    assert plural.msgstr_plural == {
        0: "%(n)d FILE IN {dir}",
        1: "%(n)d FILES IN {dir}",
        2: "%(n)d FILES IN {dir}",
    }
    assert plural.flags == ["fuzzy", "python-format"]
    assert po.find("a guess").msgstr == "eine Vermutung"
    assert po.find("%%d of %1$s and %2$s").msgstr == "%%D OF %1$s AND %2$s"  # %%: a percent sign
    assert [e.msgstr for e in po.obsolete_entries()] == [""]
    reversed_ = polib.pofile(translate_po(Reverser(), PLURALS, "p.po").data.decode("utf-8"))
    moved = reversed_.find("%%d of %1$s and %2$s").msgstr  # numbered: free to move
    assert sorted(PLACEHOLDER.findall(moved)) == ["%%", "%1$s", "%2$s"] and "AND" in moved


@pytest.mark.parametrize(
    "text, message",
    [
        (b'msgid "a"\nmsgstr "b\n', r'^bad\.po:2: not PO syntax: \'msgstr "b\''),
        (b'msgid "a"\nmsgstr "b"\nmsgid x\n', r"^bad\.po:3: not PO syntax: 'msgid x'$"),
        (b'msgid "a"\nmsgid "b"\nmsgstr ""\n', r"^bad\.po: Syntax error in po file \(line 2\)"),
        (
            b'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\nmsgid "\xff"\nmsgstr ""\n',
            r"^bad\.po: not",
        ),
    ],
)
def test_a_broken_po_file_is_one_line(text, message):
    with pytest.raises(PoError, match=message):
        translate_po(Copier(), text, "bad.po")


@pytest.mark.parametrize(
    "language, to, message",
    [
        ("fr", None, r"^a\.po: the file's target language is fr; the model translates into de$"),
        ("de", "en", r"^a\.po: the file's target language is de; --to en$"),
        ("de_AT", None, None),
        ("", None, None),
    ],
)
def test_the_catalogue_language_must_be_the_translation_language(language, to, message):
    data = PLURALS.replace(b'"Plural-Forms', f'"Language: {language}\\n"\n"Plural-Forms'.encode())
    assert polib.pofile(data.decode()).metadata["Language"] == language
    if message is None:
        assert translate_po(Copier(), data, "a.po", target_language=to).translated == 2
    else:
        with pytest.raises(AiaynError, match=message):
            translate_po(Copier(), data, "a.po", target_language=to)
