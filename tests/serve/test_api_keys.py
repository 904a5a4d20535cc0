"""The key file of `aiayn serve --api-keys` (aiayn.serve.api_keys): comments and blank lines
skipped, one-line errors naming the file and line, LibreTranslate's answers to a missing or wrong key."""

from __future__ import annotations

import pytest

from aiayn.errors import AiaynError
from aiayn.serve.api_keys import MAX_KEY_CHARS, ApiKeys


def test_the_keys_of_a_file_are_accepted_and_no_others(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("# operators\nalpha\n\n  beta  \n#gamma\n", encoding="utf-8")
    keys = ApiKeys.read(path)
    assert keys.check("alpha") is None and keys.check("beta") is None
    assert keys.check("gamma") == (403, "Invalid API key")  # a comment is no key
    assert keys.check("alph") == (403, "Invalid API key")
    assert keys.check(None)[0] == 400 and keys.check("")[0] == 400
    assert keys.check(42) == (403, "Invalid API key")
    assert keys.check("a" * (MAX_KEY_CHARS + 1)) == (403, "Invalid API key")


@pytest.mark.parametrize(
    "content, message",
    [
        ("ok\ntwo words\n", r"keys.txt:2: a key is one word of at most 256 characters$"),
        ("# only a comment\n\n", r"no keys in it"),
        (b"\xff\xfe\n", r"cannot read it: not UTF-8 text$"),
        (None, r"cannot read it: No such file"),
    ],
)
def test_a_bad_key_file_is_a_one_line_error(tmp_path, content, message):
    path = tmp_path / "keys.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(AiaynError, match=message) as error:
        ApiKeys.read(path)
    assert "\n" not in str(error.value)
