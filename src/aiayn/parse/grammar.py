"""A synthetic treebank: trees sampled from a small probabilistic grammar of English written for
aiayn's tests and demo (no treebank installs offline; section 6.3 uses the WSJ Penn Treebank).

It is NOT natural data. The grammar has the phenomena that make parsing hard: recursion through
relative clauses (subject and object gaps), PP attachment to nouns and to verbs (partly predictable
from the verb and preposition, partly ambiguous: "saw the man with the telescope"), coordination of
noun phrases, verb phrases and clauses, complement clauses, particles (PRT) and adjective and adverb
phrases. Trees follow Penn-Treebank conventions with traces left out: (NP (NP ...) (PP ...)),
(SBAR (WHNP (WDT that)) (S (VP ...))), punctuation tagged "," and ".".

Symbols: a key of RULES is a constituent whose label is the part before "_" (NP_obj -> NP); a key
of LEXICON is a POS category whose tag is the part before "_" (VBD_put -> VBD). A rule marked
recursive can grow the tree without bound (a relative clause, a PP or a conjunct more); beyond
MAX_DEPTH only the other rules are used. Sentences over MAX_WORDS words are redrawn.
"""

from __future__ import annotations

import random

from aiayn.parse.trees import Tree

MAX_DEPTH = 7
MAX_WORDS = 40
SIZES = {"train": 4000, "valid": 400, "test": 400}

# symbol -> [(weight, expansion, recursive)]
RULES: dict[str, list[tuple[float, tuple[str, ...], bool]]] = {
    "S_top": [
        (0.78, ("NP_subj", "VP", "."), False),
        (0.12, ("S_cl", ",", "CC", "S_cl", "."), True),
        (0.10, ("ADVP", ",", "NP_subj", "VP", "."), False),
    ],
    "S_cl": [(1.0, ("NP_subj", "VP"), False)],
    "NP_subj": [
        (0.55, ("NP_base",), False),
        (0.10, ("PRP_subj",), False),
        (0.15, ("NP_np", "PP_np"), True),
        (0.12, ("NP_np", "SBAR_rel"), True),
        (0.08, ("NP_np", "CC", "NP_np"), True),
    ],
    "NP_obj": [
        (0.58, ("NP_base",), False),
        (0.08, ("PRP_obj",), False),
        (0.16, ("NP_np", "PP_np"), True),
        (0.12, ("NP_np", "SBAR_rel"), True),
        (0.06, ("NP_np", "CC", "NP_np"), True),
    ],
    "NP_np": [(0.85, ("NP_base",), False), (0.15, ("NP_np", "PP_np"), True)],
    "NP_base": [
        (0.30, ("DT", "NN_person"), False),
        (0.25, ("DT", "NN_thing"), False),
        (0.14, ("DT", "JJ", "NN_person"), False),
        (0.12, ("DT", "JJ", "NN_thing"), False),
        (0.10, ("NNP",), False),
        (0.09, ("DT", "NNS"), False),
        (0.06, ("DT", "NN_part", "PP_of"), True),
    ],
    "PP_np": [
        (0.4, ("IN_with", "NP_obj"), False),
        (0.35, ("IN_loc", "NP_obj"), False),
        (0.25, ("IN_of", "NP_obj"), False),
    ],
    "PP_of": [(1.0, ("IN_of", "NP_base"), False)],
    "PP_loc": [(1.0, ("IN_loc", "NP_obj"), False)],
    "PP_with": [(1.0, ("IN_with", "NP_obj"), False)],
    "SBAR_rel": [
        (0.55, ("WHNP", "S_subjgap"), False),
        (0.45, ("WHNP", "S_objgap"), False),
    ],
    "WHNP": [(0.5, ("WDT",), False), (0.5, ("WP",), False)],
    "S_subjgap": [(1.0, ("VP",), False)],
    "S_objgap": [(1.0, ("NP_subj", "VP_gap"), False)],
    "VP_gap": [(0.7, ("VBD_tr",), False), (0.3, ("VBD_put", "PP_loc"), False)],
    "SBAR_comp": [(1.0, ("IN_that", "S_cl"), False)],
    "VP": [
        (0.14, ("VBD_intr",), False),
        (0.08, ("VBD_intr", "ADVP"), False),
        (0.08, ("VBD_intr", "PP_loc"), False),
        (0.22, ("VBD_tr", "NP_obj"), False),
        (0.08, ("VBD_tr", "NP_obj", "PP_with"), False),
        (0.10, ("VBD_put", "NP_obj", "PP_loc"), False),
        (0.08, ("VBD_say", "SBAR_comp"), True),
        (0.08, ("VBD_ph", "PRT", "NP_obj"), False),
        (0.08, ("VBD_cop", "ADJP"), False),
        (0.06, ("VP", "CC", "VP"), True),
    ],
    "PRT": [(1.0, ("RP",), False)],
    "ADJP": [(0.7, ("JJ",), False), (0.3, ("RB_deg", "JJ"), False)],
    "ADVP": [(0.7, ("RB",), False), (0.3, ("RB_deg", "RB"), False)],
}

LEXICON: dict[str, tuple[str, ...]] = {
    tag: tuple(words.split())
    for tag, words in {
        "DT": "the a every some this that",
        "NN_person": "man woman dog cat teacher student farmer child doctor baker "
        "king queen pilot singer neighbour sailor nurse boy girl judge",
        "NN_thing": "book ball letter telescope hat box table garden river hill "
        "park house city car window bridge basket map lamp boat",
        "NN_part": "top side end edge corner roof door",
        "NNS": "dogs books apples friends stones flowers children letters",
        "NNP": "John Mary Paris Anna Peter London Maria Tom",
        "PRP_subj": "he she they we",
        "PRP_obj": "him her them us",
        "JJ": "big small old red happy quiet young green tired clever",
        "RB": "quickly slowly yesterday today often early",
        "RB_deg": "very quite rather",
        "VBD_intr": "slept arrived laughed waited smiled danced fell ran",
        "VBD_tr": "saw liked found chased visited watched helped painted met",
        "VBD_put": "put placed dropped hid stored",
        "VBD_say": "said thought knew believed heard",
        "VBD_ph": "picked looked turned gave set",
        "VBD_cop": "seemed became felt was",
        "RP": "up down off over back",
        "IN_loc": "on in under near behind beside",
        "IN_with": "with without",
        "IN_of": "of",
        "IN_that": "that",
        "WDT": "that which",
        "WP": "who",
        "CC": "and but or",
        ",": ",",
        ".": ".",
    }.items()
}


def _label(symbol: str) -> str:
    return symbol.split("_", 1)[0] if symbol not in (",", ".") else symbol


def sample_tree(rng: random.Random, symbol: str = "S_top", depth: int = 0) -> Tree:
    """One tree rooted at `symbol`, drawn top-down from RULES and LEXICON with `rng`."""
    if symbol in LEXICON:
        return Tree(_label(symbol), word=rng.choice(LEXICON[symbol]))
    rules = [r for r in RULES[symbol] if depth < MAX_DEPTH or not r[2]]
    ((_, expansion, _),) = rng.choices(rules, weights=[r[0] for r in rules])
    if len(expansion) == 1 and expansion[0] in RULES and _label(expansion[0]) == _label(symbol):
        return sample_tree(rng, expansion[0], depth + 1)  # NP_subj -> NP_base: one NP, not two
    return Tree(_label(symbol), [sample_tree(rng, child, depth + 1) for child in expansion])


def sample_sentence(rng: random.Random) -> Tree:
    """A tree of at most MAX_WORDS words."""
    while True:
        tree = sample_tree(rng)
        if len(tree.preterminals()) <= MAX_WORDS:
            return tree


def synthetic_treebank(seed: int = 1, sizes: dict[str, int] | None = None) -> dict[str, list[Tree]]:
    """Seeded train / valid / test trees; no valid or test sentence occurs in an earlier split."""
    rng = random.Random(seed)
    sizes = {**SIZES, **(sizes or {})}
    seen: set[str] = set()
    splits: dict[str, list[Tree]] = {}
    for split in ("train", "valid", "test"):
        trees: list[Tree] = []
        held: set[str] = set()
        while len(trees) < sizes[split]:
            tree = sample_sentence(rng)
            sentence = " ".join(tree.words())
            if split != "train" and (sentence in seen or sentence in held):
                continue
            held.add(sentence)
            trees.append(tree)
        seen |= held
        splits[split] = trees
    return splits
