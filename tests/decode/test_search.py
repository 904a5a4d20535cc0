"""aiayn.decode.search, the searches' old keyword signatures kept for a deprecation period: each warns
and finds what aiayn.decode.strategies finds given the same rules as a SearchRules."""

import importlib

import pytest
import torch


class Markov:
    """A Stepper whose next-token log-probabilities depend on each row's last token only."""

    table = torch.randn(9, 9, generator=torch.Generator().manual_seed(0)).log_softmax(-1)

    def __init__(self, rows: int, vocab: int):
        assert vocab == 9

    def step(self, tokens):
        return self.table[tokens].clone()

    def reorder(self, index):
        pass

    def select(self, index):
        pass


@pytest.mark.parametrize("where", ["aiayn.decode.search", "aiayn.decode"])
def test_the_old_searches_take_the_rules_as_keywords_and_find_what_the_new_ones_find(where):
    """`beam_search(stepper, max_lens, beam_size=k, **fields of SearchRules)`, as before: a warning,
    and the hypotheses of the strategies given a SearchRules."""
    from aiayn.decode import strategies
    from aiayn.decode.rules import SearchRules

    fields = dict(start_id=1, eos_id=2, banned=[0, 1], alpha=0.6)
    max_lens = torch.tensor([5, 7])
    with pytest.warns(
        DeprecationWarning, match=r"beam_search is deprecated: it is aiayn\.decode\.strategies"
    ):
        old = importlib.import_module(where).beam_search(Markov(8, 9), max_lens, beam_size=4, **fields)
    new = strategies.beam_search(Markov(8, 9), max_lens, SearchRules(**fields), beam_size=4)
    assert [[(h.tokens, h.score) for h in hs] for hs in old] == [
        [(h.tokens, h.score) for h in hs] for hs in new
    ]
    with pytest.warns(DeprecationWarning, match=r"greedy_search is deprecated"):
        old = importlib.import_module(where).greedy_search(Markov(2, 9), max_lens, **fields)
    assert old == strategies.greedy_search(Markov(2, 9), max_lens, SearchRules(**fields))
    assert new[0] and old[0]
