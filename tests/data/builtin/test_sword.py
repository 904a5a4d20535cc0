"""SWORD modules (aiayn.data.builtin.sword): OSIS markup cleaned to plain text, a missing Debian
package named in one line."""

from __future__ import annotations

import pytest

from aiayn.data.builtin import bible as bible_module
from aiayn.data.builtin import sword
from aiayn.data.builtin.sword import MissingPackageError, clean_osis


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ('<w lemma="x">EN el principio</w> <w lemma="y">crió</w>. ', "EN el principio crió."),
        (
            '<w>y engendró</w><transChange type="added">un hijo</transChange><w>á su</w>',
            "y engendró un hijo á su",
        ),
        ('preguntándo<transChange type="added">le</transChange>, <w>y</w>', "preguntándole, y"),
        ('<w>God</w><note placement="foot">The Hebrew word</note><w>created</w>', "God created"),
        ("<w>give</w>n.", "given."),
        ("¶ And <divineName>LORD</divineName> \\nd <w>JEHOVAH</w>", "And LORD JEHOVAH"),
        ('<title type="psalm">A Psalm of David.</title><l sID="1"/>LORD, how', "A Psalm of David. LORD, how"),
        ("<speaker>Beloved</speaker> <l/>Let him kiss me &amp; go", "Let him kiss me & go"),
        ('Amen.<div type="glossary"/> Aaron: the brother of Moses', "Amen."),
    ],
)
def test_clean_osis(raw, clean):
    assert clean_osis(raw) == clean


def test_missing_sword_package_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sword, "SWORD_ROOT", tmp_path)
    with pytest.raises(MissingPackageError, match="sword-text-sparv") as err:
        sword.read_module(*bible_module.SOURCE, root=tmp_path)
    assert "\n" not in str(err.value) and "apt-get install sword-text-sparv" in str(err.value)
