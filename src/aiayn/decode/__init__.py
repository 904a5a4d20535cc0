"""Decoding (section 6.1): greedy and beam search, and the Translator that wraps a model directory."""

from aiayn.decode.search import Hypothesis, SearchStopped, beam_search, greedy_search, length_penalty
from aiayn.decode.stepper import TransformerStepper, decode_batch
from aiayn.decode.translator import Translation, Translator

__all__ = [
    "Hypothesis",
    "SearchStopped",
    "Translation",
    "Translator",
    "TransformerStepper",
    "beam_search",
    "decode_batch",
    "greedy_search",
    "length_penalty",
]
