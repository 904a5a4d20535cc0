"""The user-facing errors (aiayn.errors): a TextError names its text, 1-based, and keeps what went
wrong apart for a server that tells only that text's caller."""

from __future__ import annotations

import pytest

from aiayn.errors import AiaynError, TextError


def test_a_text_error_names_its_text_from_one_and_keeps_its_index_and_reason():
    error = TextError(2, "the model's scores are not finite")
    assert isinstance(error, AiaynError)
    assert str(error) == "text 3: the model's scores are not finite"
    assert (error.index, error.reason) == (2, "the model's scores are not finite")
    with pytest.raises(AiaynError, match=r"^text 1: empty$"):
        raise TextError(0, "empty")
