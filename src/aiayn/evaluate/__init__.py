"""Scoring a model's output as the paper reports it: decode a split of a data directory and score
it (`evaluate_split`, aiayn.evaluate.split), for translations with corpus BLEU and chrF
(aiayn.evaluate.bleu, section 6.1) and for parse trees with parseval (aiayn.parse.evaluate, 6.3).

    evaluate_model("runs/quickstart/model", "data/bible-es-en", split="test")   # translate + score
    evaluate_files("hyp.txt", "ref.txt")                                       # score existing text
"""

from aiayn.evaluate.bleu import TRANSLATION, evaluate_files, evaluate_model, read_lines, score_texts
from aiayn.evaluate.split import SCORES_FILE, evaluate_split, write_outputs, write_scores

__all__ = [
    "SCORES_FILE",
    "TRANSLATION",
    "evaluate_files",
    "evaluate_model",
    "evaluate_split",
    "read_lines",
    "score_texts",
    "write_outputs",
    "write_scores",
]
