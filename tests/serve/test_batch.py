"""aiayn.serve.batch: a served text, its prefix and its constraints are tokenized once, and their ids
travel with the batch item to the search and to the attention answer."""

from __future__ import annotations

import pytest

from aiayn.decode.texts import translate_texts
from aiayn.serve import ServeSettings


@pytest.fixture(scope="module")
def settings() -> ServeSettings:
    return ServeSettings(max_batch=8, max_chars=200)


@pytest.fixture
def tokenized(translator, monkeypatch) -> list[str]:
    """Every string the translator's tokenizer is asked to encode (source or target side)."""
    seen: list[str] = []
    for name in ("encode", "encode_target"):
        real = getattr(translator.tokenizer, name)

        def spy(texts, real=real):
            seen.extend(texts)
            return real(texts)

        monkeypatch.setattr(translator.tokenizer, name, spy)
    return seen


@pytest.mark.parametrize(
    "body, strings",
    [
        ({"text": ["el gato come", "la casa"]}, ["el gato come", "la casa"]),
        ({"text": "el perro", "attention": True}, ["el perro"]),
        (
            {
                "text": ["el perro come", "la casa"],
                "prefix": ["a green", None],
                "constraints": [None, ["moon"]],
            },
            ["el perro come", "la casa", "a green", "moon"],
        ),
        ({"text": "un gato", "n_best": 2, "beam_size": 2, "align": True}, ["un gato"]),
    ],
    ids=["texts", "attention", "prefix and constraints", "n-best aligned"],
)
def test_each_string_of_a_request_is_tokenized_once(client, tokenized, body, strings):
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 200, response.text
    assert sorted(s for s in tokenized if s) == sorted(strings)


def test_each_sentence_of_a_document_is_tokenized_once(client, tokenized):
    response = client.post("/v1/translate/stream", json={"text": "El perro come. La casa.\n\nSol."})
    assert response.status_code == 200 and response.text.count("event: sentence") == 3
    assert sorted(tokenized) == sorted(["El perro come.", "La casa.", "Sol."])


def test_translate_takes_ids_tokenized_before(translator, tokenized):
    """Translator.translate_batch(texts, encoded=...) gives what it gives the texts, tokenizing nothing."""
    texts, prefix = ["el perro come", "la casa"], ["a green", None]
    expected = translate_texts(translator, texts, beam_size=2, prefix=prefix)
    encoded = translator.encode_inputs(texts, prefix)
    tokenized.clear()
    assert translate_texts(translator, texts, beam_size=2, encoded=encoded) == expected
    assert tokenized == []
