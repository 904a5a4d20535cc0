"""Decoding (section 6.1): generation (`decode_batch`: greedy, beam, sampling, constrained and
speculative search); a ModelBundle (what a model directory loads) and the Translator that runs texts
through it."""

import importlib

from aiayn.decode.bundle import ModelBundle, load_bundle
from aiayn.decode.generate import decode_batch
from aiayn.decode.rules import Hypothesis, SearchRules, SearchStopped, length_penalty
from aiayn.decode.stepper import TransformerStepper
from aiayn.decode.texts import translate_document, translate_texts
from aiayn.decode.translator import Translation, Translator

__all__ = [
    "Hypothesis",
    "ModelBundle",
    "SearchRules",
    "SearchStopped",
    "Translation",
    "Translator",
    "TransformerStepper",
    "decode_batch",
    "length_penalty",
    "load_bundle",
    "translate_document",
    "translate_texts",
]


def __getattr__(name: str):
    """`beam_search` and `greedy_search` with the fields of `SearchRules` as keywords: deprecated (a
    DeprecationWarning); they are aiayn.decode.strategies', given a `SearchRules`."""
    if name not in ("beam_search", "greedy_search"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    search = importlib.import_module("aiayn.decode.search")  # the deprecated signatures
    new = f"aiayn.decode.strategies.{name} (given a SearchRules)"
    return search.deprecated(__name__, name, new, search.OLD[name])
