"""Building a shortlist (aiayn.apps.shortlist): IBM Model 1's candidates from a data
directory in the model's vocabulary."""

from __future__ import annotations

import pytest

from aiayn.apps.shortlist import build_shortlist
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError


def test_data_in_another_vocabulary_is_refused(shortlisted, data_dir):
    model, _ = shortlisted
    with pytest.raises(AiaynError, match="vocabulary is not"):
        build_shortlist(model, data_dir, progress=False)


def test_the_candidates_are_the_word_for_word_translations(shortlisted):
    model, _ = shortlisted
    translator = Translator.load(model, device="cpu")
    shortlist, tok, config = translator.bundle.shortlist, translator.tokenizer, translator.config
    assert shortlist.candidates.shape == (config.source_vocab_size, 3) and len(shortlist.frequent) == 2
    for source, target in (("gato", "▁cat"), ("perro", "▁dog")):
        (piece,) = tok.encode([source])[0]  # the word is one piece
        assert target in tok.target_pieces([t for t in shortlist.candidates[piece].tolist() if t >= 0])
    specials = sorted({config.pad_id, config.unk_id, config.bos_id, config.eos_id, config.start_id})
    assert (shortlist.candidates[specials] == -1).all() and shortlist.always.tolist() == specials


@pytest.mark.parametrize("k, frequent, iterations", [(0, 50, 5), (50, -1, 5), (50, 50, 0)])
def test_bad_settings_are_one_line(shortlisted, k, frequent, iterations):
    model, data = shortlisted
    with pytest.raises(AiaynError, match=r"^k must be >= 1, frequent >= 0 and iterations >= 1; got"):
        build_shortlist(model, data, k, frequent, iterations, progress=False)
