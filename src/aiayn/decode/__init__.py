"""Decoding (section 6.1): greedy and beam search; a ModelBundle (what a model directory loads) and
the Translator that runs texts through it."""

from aiayn.decode.bundle import ModelBundle, load_bundle
from aiayn.decode.search import Hypothesis, SearchStopped, beam_search, greedy_search, length_penalty
from aiayn.decode.stepper import TransformerStepper, decode_batch
from aiayn.decode.texts import translate_document, translate_texts
from aiayn.decode.translator import Translation, Translator

__all__ = [
    "Hypothesis",
    "ModelBundle",
    "SearchStopped",
    "Translation",
    "Translator",
    "TransformerStepper",
    "beam_search",
    "decode_batch",
    "greedy_search",
    "length_penalty",
    "load_bundle",
    "translate_document",
    "translate_texts",
]
