"""Greedy search's steps in runs (`NativeDecoder.greedy`, aiayn.decode.rows): the same tokens and
scores, to the last bit, as the row loop's single steps over the same native step; a run ends at
the first step some row ends; with a stop hook it is asked every STOP_EVERY steps; what a run is
given is checked.

The reference is the row loop taking its steps one at a time (the stepper's `greedy_steps` turned
off): the same native step, then PyTorch's log_softmax, the rules' masks and `row_max` in Python.
Skipped only where no C++ compiler is installed or AIAYN_NATIVE=0 says not to use one.
"""

import os

import pytest
import torch
from test_native_step import model_of, sources

from aiayn.config import DecodeConfig
from aiayn.decode import rows as row_loop
from aiayn.decode.search import SearchStopped
from aiayn.decode.shortlist import Shortlist
from aiayn.decode.stepper import Controls, TransformerStepper, decode_batch
from aiayn.runtime import native_build
from aiayn.runtime.native_step import attach_native_decoder, native_decoder
from aiayn.runtime.quantize import quantize_int8

pytestmark = pytest.mark.skipif(
    native_build._compiler() is None or os.environ.get(native_build.ENV, "").strip() == "0",
    reason="no C++ compiler, or AIAYN_NATIVE=0",
)

CASES = {
    "paper": (dict(), DecodeConfig(beam_size=1, max_len_a=1.5, max_len_b=4)),
    "pre-norm, gelu": (
        dict(norm_first=True, activation="gelu", d_k=12, d_v=20),
        DecodeConfig(beam_size=1, max_len_a=1.5, max_len_b=4),
    ),
    "short caps force EOS": (
        dict(final_logits_bias=True),
        DecodeConfig(beam_size=1, max_len_a=0.3, max_len_b=1),
    ),
}
GREEDY_STEPS = TransformerStepper.greedy_steps


def spying(monkeypatch, on: bool) -> list[int]:
    """Turn the stepper's runs on (recording each run's length) or off (single steps in Python)."""
    runs: list[int] = []

    def greedy_steps(self, *args):
        found = GREEDY_STEPS(self, *args) if on else None
        if found is not None:
            runs.append(found[0].size(1))
        return found

    monkeypatch.setattr(TransformerStepper, "greedy_steps", greedy_steps)
    return runs


def both(monkeypatch, model, src, options, controls=None):
    """The searches of single steps and of runs -> (single, runs, the runs' lengths)."""
    with torch.inference_mode():  # as a Translator decodes: the native step runs without gradients
        spying(monkeypatch, False)
        single = decode_batch(model, src, options, controls)
        runs = spying(monkeypatch, True)
        return single, decode_batch(model, src, options, controls), runs


def assert_identical(got, want):
    assert [[h.tokens for h in hs] for hs in got] == [[h.tokens for h in hs] for hs in want]
    assert [[h.score for h in hs] for hs in got] == [[h.score for h in hs] for hs in want]  # every bit
    assert [[h.log_prob for h in hs] for hs in got] == [[h.log_prob for h in hs] for hs in want]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("n", [1, 6])
def test_runs_give_the_single_steps_tokens_and_scores(monkeypatch, case, n):
    overrides, options = CASES[case]
    model = model_of(**overrides)
    if overrides.get("final_logits_bias"):  # EOS never chosen unasked: every row runs to its cap
        model.output_bias.data[model.config.eos_id] = -1e4
    assert attach_native_decoder(model) == "native"
    src = sources(n, model.config.pad_id)
    single, runs, lengths = both(monkeypatch, model, src, options)
    assert_identical(runs, single)
    assert lengths and sum(lengths) >= max(len(hs[0].tokens) for hs in single) + 1
    if n > 1:  # the batch's runs end where a row ends: rows that end apart take several runs
        assert len(lengths) > 1


def test_int8_runs_give_the_single_steps_tokens_and_scores(monkeypatch):
    model = quantize_int8(model_of())
    assert attach_native_decoder(model) == "native"
    single, runs, lengths = both(monkeypatch, model, sources(4, model.config.pad_id), CASES["paper"][1])
    assert_identical(runs, single)
    assert lengths


def test_shortlisted_runs_give_the_single_steps_tokens_and_scores(monkeypatch):
    """The output layer restricted to the batch's candidates: runs choose columns and embed their ids."""
    model = model_of()
    assert attach_native_decoder(model) == "native"
    c = model.config
    torch.manual_seed(5)
    candidates = torch.randint(4, c.vocab_size, (c.source_vocab_size, 4), dtype=torch.int32)
    shortlist = Shortlist(
        candidates, torch.rand(candidates.shape), torch.arange(10, 14, dtype=torch.int32),
        torch.tensor([c.pad_id, c.unk_id, c.bos_id, c.eos_id], dtype=torch.int32),
    )  # fmt: skip
    controls = Controls(shortlist=shortlist)
    src = sources(3, c.pad_id)
    options = DecodeConfig(beam_size=1, max_len_a=1.5, max_len_b=4)
    single, runs, lengths = both(monkeypatch, model, src, options, controls)
    assert_identical(runs, single)
    assert lengths
    kept = set(shortlist.kept(src).tolist())
    assert all(set(hs[0].tokens) <= kept for hs in runs)


@torch.inference_mode()
def test_a_run_ends_at_the_first_step_a_row_ends():
    model = model_of(final_logits_bias=True)
    eos = model.config.eos_id
    model.output_bias.data[eos] = -1e4  # EOS only where a cap forces it
    assert attach_native_decoder(model) == "native"
    stepper = TransformerStepper(model, sources(2, model.config.pad_id), 1, 20)
    tokens = torch.full((2,), model.config.start_id)
    chosen, sums = stepper.greedy_steps(
        tokens, torch.zeros(2), 1, 20, torch.tensor([2, 10]), eos, torch.tensor([1])
    )
    assert chosen.shape == sums.shape == (2, 3)  # row 0 may only end at step 3
    assert chosen[0, 2] == eos and not chosen[:, :2].eq(eos).any() and not chosen.eq(1).any()
    assert stepper.state.step == 3 and all(c.length == 3 for c in stepper.state.self_kv)
    assert bool((sums[:, 1:] < sums[:, :-1]).all())  # log P only falls


def test_with_a_stop_hook_runs_are_short_and_it_is_asked_between_them(monkeypatch):
    model = model_of(final_logits_bias=True)
    model.output_bias.data[model.config.eos_id] = -1e4
    assert attach_native_decoder(model) == "native"
    src = sources(1, model.config.pad_id)
    options = DecodeConfig(beam_size=1, max_len_a=2.0, max_len_b=4)  # every row to its cap: 15 steps
    asked: list[int] = []
    controls = Controls(should_stop=lambda: asked.append(1) and False)
    single, runs, lengths = both(monkeypatch, model, src, options, controls)
    assert_identical(runs, single)
    total = len(single[0][0].tokens) + 1
    every = row_loop.STOP_EVERY
    assert total > every and lengths == [every] * (total // every) + [total % every] * (total % every > 0)
    assert len(asked) == total + len(lengths)  # before every single step, then before every run
    stops: list[int] = []  # the second question (before the second run) says stop
    with pytest.raises(SearchStopped, match=f"stopped before step {every + 1}"), torch.inference_mode():
        decode_batch(model, src, options, Controls(should_stop=lambda: len(stops.append(1) or stops) == 2))


@pytest.mark.parametrize(
    "change, error",
    [
        (dict(tokens=torch.tensor([96])), "tokens must be columns of the output layer"),
        (dict(banned=torch.tensor([96])), "banned and eos must be columns"),
        (dict(eos=-1), "banned and eos must be columns"),
        (dict(caps=torch.tensor([1, 2])), "tokens, sums and caps must be"),
        (dict(sums=torch.zeros(1, dtype=torch.float64)), "sums"),
    ],
)
@torch.inference_mode()
def test_what_a_run_is_given_is_checked(change, error):
    model = model_of()
    assert attach_native_decoder(model) == "native"
    stepper = TransformerStepper(model, sources(1, model.config.pad_id), 1, 8)
    given = dict(
        tokens=torch.tensor([model.config.start_id]), sums=torch.zeros(1), first_step=1, steps=4,
        caps=torch.tensor([5]), eos=model.config.eos_id, banned=torch.tensor([1]),
    ) | change  # fmt: skip
    with pytest.raises(RuntimeError, match=error):
        native_decoder(model).greedy(model, *given.values(), stepper.state)
    assert stepper.state.step == 0
