"""The registry of built-in corpora (aiayn.data.builtin): an unknown name lists the known ones."""

from __future__ import annotations

import pytest

from aiayn.data.builtin import CORPORA, get_corpus
from aiayn.errors import AiaynError


def test_unknown_corpus_lists_the_known_ones():
    with pytest.raises(
        AiaynError, match="bible-es-en, bible-es-en-web, libreoffice-en-de, libreoffice-es-en"
    ):
        get_corpus("wmt14")
    assert CORPORA["libreoffice-en-de"].src_lang == "en" and CORPORA["libreoffice-en-de"].tgt_lang == "de"


def test_an_unknown_corpus_names_every_built_in_one():
    with pytest.raises(AiaynError) as caught:
        get_corpus("bible-es-eng")
    assert all(name in str(caught.value) for name in (*CORPORA, "synthetic-trees (parsing)"))
