"""Constituency parsing as translation (section 6.3): Penn-Treebank trees and their linearisation
(trees), where trees come from (treebank, grammar), preparing parse data (prepare), the
well-formedness mask of the search (constraint), the parser (parser) and EVALB-style scoring
(parseval, evaluate)."""
