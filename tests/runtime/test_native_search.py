"""Greedy and beam search's steps in runs (`NativeSearch.greedy` and `.beam`; aiayn.decode.greedy,
aiayn.decode.beam): the same tokens, scores and log P, to the last bit, as the loops' single steps
over the same native step; a run ends at the first step some sentence ends; with a stop hook it is
asked every STOP_EVERY steps; what a run is given is checked before anything is written.

The reference is each loop taking its steps one at a time (the search's native runs turned off):
the same native step, then PyTorch's operations in Python (log_softmax, the rules' masks and
`row_max`; the `Beams` bookkeeping). Skipped only where no C++ compiler is
installed or AIAYN_NATIVE=0 says not to use one.
"""

import copy
import inspect

import pytest
import torch

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.beam import Beams
from aiayn.decode.generate import Controls, decode_batch
from aiayn.decode.rules import STOP_EVERY, SearchRules, SearchStopped
from aiayn.decode.shortlist import Shortlist
from aiayn.decode.stepper import TransformerStepper
from aiayn.model.transformer import Transformer
from aiayn.runtime import native_build, native_step
from aiayn.runtime.native_step import attach_native_decoder, native_decoder
from aiayn.runtime.quantize import quantize_int8
from native_models import model_of, needs_native, sources

pytestmark = needs_native

MODELS = {
    "paper": dict(),
    "pre-norm, gelu": dict(norm_first=True, activation="gelu", d_k=12, d_v=20),
    "EOS only where forced": dict(final_logits_bias=True),  # every row runs to its cap
}
SEARCHES = {
    "greedy": dict(beam_size=1),
    "beam 4, 2 best": dict(beam_size=4, n_best=2),
    "beam 3, len": dict(beam_size=3, length_penalty_style="len", alpha=1.0),
    "beam 4, fairseq": dict(beam_size=4, length_penalty_style="fairseq"),
}
RUNS = {"greedy": native_step.NativeSearch.greedy, "beam": native_step.NativeSearch.beam}


def spying(monkeypatch, on: bool) -> list[int]:
    """Turn the search's runs on (recording each run's length) or off (single steps in Python)."""
    runs: list[int] = []

    def spy(method):
        def run(self, *args):
            found = RUNS[method](self, *args) if on else None
            if found is not None:
                runs.append(found[0].size(1) if method == "greedy" else found[0])
            return found

        return run

    for method in RUNS:
        monkeypatch.setattr(native_step.NativeSearch, method, spy(method))
    return runs


def rules_of(model, banned=(1,)) -> SearchRules:
    c = model.config
    return SearchRules(start_id=c.start_id, eos_id=c.eos_id, banned=list(banned))


def native_search(model, state, eos: int, banned, style="gnmt", alpha=0.6, ids=None, capacity=8):
    """The C++ `Search` of a run, made as a search makes it (its checks raise, no fallback)."""
    rules = native_step.native_rules(eos, banned, style, alpha)
    target = native_step.native_target(model, capacity, ids)
    return torch.classes.aiayn.Search(native_decoder(model)._decoder, rules, target)


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


def model_with(name: str):
    model = model_of(**MODELS[name])
    if name == "EOS only where forced":
        model.output_bias.data[model.config.eos_id] = -1e4
    assert attach_native_decoder(model) == "native"
    return model


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("n", [1, 6])
def test_runs_give_the_single_steps_tokens_and_scores(monkeypatch, search, name, n):
    model = model_with(name)
    options = DecodeConfig(max_len_a=1.5, max_len_b=4, **SEARCHES[search])
    single, runs, lengths = both(monkeypatch, model, sources(n, model.config.pad_id), options)
    assert_identical(runs, single)
    assert lengths and sum(lengths) >= max(len(h.tokens) for hs in single for h in hs) + 1
    if n > 1:  # the batch's runs end where a sentence ends: sentences that end apart take several
        assert len(lengths) > 1


@pytest.mark.parametrize("search", ["greedy", "beam 4, 2 best"])
def test_caps_that_force_eos(monkeypatch, search):
    model = model_with("paper")
    options = DecodeConfig(max_len_a=0.3, max_len_b=1, **SEARCHES[search])
    single, runs, lengths = both(monkeypatch, model, sources(5, model.config.pad_id), options)
    assert_identical(runs, single)
    assert lengths and all(len(h.tokens) <= 3 for hs in single for h in hs)


@pytest.mark.parametrize("search", ["greedy", "beam 4, 2 best"])
def test_int8_runs_give_the_single_steps_tokens_and_scores(monkeypatch, search):
    model = quantize_int8(model_of())
    assert attach_native_decoder(model) == "native"
    options = DecodeConfig(max_len_a=1.5, max_len_b=4, **SEARCHES[search])
    single, runs, lengths = both(monkeypatch, model, sources(4, model.config.pad_id), options)
    assert_identical(runs, single)
    assert lengths


@pytest.mark.parametrize("search", ["greedy", "beam 4, 2 best"])
def test_shortlisted_runs_give_the_single_steps_tokens_and_scores(monkeypatch, search):
    """The output layer restricted to the batch's candidates: runs choose columns and embed their ids."""
    model = model_with("paper")
    c = model.config
    torch.manual_seed(5)
    candidates = torch.randint(4, c.vocab_size, (c.source_vocab_size, 4), dtype=torch.int32)
    shortlist = Shortlist(
        candidates, torch.rand(candidates.shape), torch.arange(10, 14, dtype=torch.int32),
        torch.tensor([c.pad_id, c.unk_id, c.bos_id, c.eos_id], dtype=torch.int32),
    )  # fmt: skip
    src = sources(3, c.pad_id)
    options = DecodeConfig(max_len_a=1.5, max_len_b=4, **SEARCHES[search])
    single, runs, lengths = both(monkeypatch, model, src, options, Controls(shortlist=shortlist))
    assert_identical(runs, single)
    assert lengths
    kept = set(shortlist.kept(src).tolist())
    assert all(set(h.tokens) <= kept for hs in runs for h in hs)


@pytest.mark.parametrize("search", ["greedy", "beam 4, 2 best"])
def test_ties_at_a_real_vocabulary_size_go_to_the_first_token(monkeypatch, search):
    """1,100 outputs and 64 sentences (the blocked maximum of aiayn.runtime.blockwise in Python): tokens
    600-1,099 have the output rows of 100-599, so wherever one of them is the most probable its twin
    ties with it: greedy search must take the first of the two, both ways (beam search takes tied
    candidates in the order of the same native top-k both ways)."""
    config = ModelConfig(vocab_size=1100, d_model=32, d_ff=64, n_heads=4, n_layers=1, tie_embeddings="none")
    torch.manual_seed(3)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.output_weight[600:] = model.output_weight[100:600]
    assert attach_native_decoder(model) == "native"
    src = torch.randint(4, 1100, (64, 7))
    options = DecodeConfig(max_len_a=1.0, max_len_b=3, **SEARCHES[search])
    single, runs, lengths = both(monkeypatch, model, src, options)
    assert_identical(runs, single)
    assert lengths
    chosen = {t for hs in runs for h in hs for t in h.tokens}
    assert chosen & set(range(100, 600))
    if search == "greedy":  # beam search keeps both twins where both are among the best (either order)
        assert not chosen & set(range(600, 1100))


@pytest.mark.parametrize("search", ["greedy", "beam 4, 2 best"])
def test_runs_of_a_batch_with_a_stop_hook(monkeypatch, search):
    """Runs of STOP_EVERY steps, a batch's rows ending apart: each run goes on from the last."""
    model = model_with("paper")
    options = DecodeConfig(max_len_a=2.0, max_len_b=4, **SEARCHES[search])
    controls = Controls(should_stop=lambda: False)
    single, runs, lengths = both(monkeypatch, model, sources(5, model.config.pad_id), options, controls)
    assert_identical(runs, single)
    assert lengths and max(lengths) <= STOP_EVERY and len(lengths) > 2


@torch.inference_mode()
def test_a_run_ends_at_the_first_step_a_row_ends():
    model = model_of(final_logits_bias=True)
    eos = model.config.eos_id
    model.output_bias.data[eos] = -1e4  # EOS only where a cap forces it
    assert attach_native_decoder(model) == "native"
    stepper = TransformerStepper(model, sources(2, model.config.pad_id), 1, 20)
    tokens = torch.full((2,), model.config.start_id)
    chosen, sums = stepper.runs(rules_of(model)).greedy(tokens, torch.zeros(2), 1, 20, torch.tensor([2, 10]))
    assert chosen.shape == sums.shape == (2, 3)  # row 0 may only end at step 3
    assert chosen[0, 2] == eos and not chosen[:, :2].eq(eos).any() and not chosen.eq(1).any()
    assert stepper.state.step == 3 and all(c.length == 3 for c in stepper.state.self_kv)
    assert bool((sums[:, 1:] < sums[:, :-1]).all())  # log P only falls


@pytest.mark.parametrize("search", ["greedy", "beam 4, 2 best"])
def test_with_a_stop_hook_runs_are_short_and_it_is_asked_between_them(monkeypatch, search):
    model = model_with("EOS only where forced")
    src = sources(1, model.config.pad_id)
    options = DecodeConfig(max_len_a=2.0, max_len_b=4, **SEARCHES[search])  # to the cap: 15 steps
    asked: list[int] = []
    controls = Controls(should_stop=lambda: asked.append(1) and False)
    single, runs, lengths = both(monkeypatch, model, src, options, controls)
    assert_identical(runs, single)
    total = len(single[0][0].tokens) + 1
    every = STOP_EVERY
    assert total > every and lengths == [every] * (total // every) + [total % every] * (total % every > 0)
    assert len(asked) == total + len(lengths)  # before every single step, then before every run
    stops: list[int] = []  # the second question (before the second run) says stop
    with pytest.raises(SearchStopped, match=f"stopped before step {every + 1}"), torch.inference_mode():
        decode_batch(model, src, options, Controls(should_stop=lambda: len(stops.append(1) or stops) == 2))


def run_inputs(model, rows: int = 1, capacity: int = 8):
    stepper = TransformerStepper(model, sources(1, model.config.pad_id), rows, capacity)
    for cache in stepper.state.self_kv:  # (its buffers are not initialised: NaN would equal nothing)
        cache.k.zero_(), cache.v.zero_()
    tokens = torch.full((rows,), model.config.start_id)
    return stepper, tokens, dict(first_step=1, steps=4, eos=model.config.eos_id, banned=torch.tensor([1]))


@pytest.mark.parametrize(
    "change, error",
    [
        (dict(tokens=torch.tensor([96])), "tokens must be columns of the output layer"),
        (dict(banned=torch.tensor([96])), "banned and eos must be columns"),
        (dict(eos=-1), "banned and eos must be columns"),
        (dict(caps=torch.tensor([1, 2])), "tokens, sums and caps must be"),
        (dict(sums=torch.zeros(1, dtype=torch.float64)), "sums"),
        (dict(first_step=0), "first_step must be >= 1"),
    ],
)
@torch.inference_mode()
def test_what_a_greedy_run_is_given_is_checked_before_anything_is_written(change, error):
    model = model_with("paper")
    stepper, tokens, rules = run_inputs(model)
    given = dict(tokens=tokens, sums=torch.zeros(1), first_step=1, steps=4, caps=torch.tensor([5])) | rules
    given |= change
    cache = stepper.state.self_kv[0].k.clone()
    with pytest.raises(RuntimeError, match=error):
        search = native_search(model, stepper.state, given["eos"], given["banned"])
        caches = native_decoder(model).caches(stepper.state, given["tokens"].size(0))
        search.greedy(*(given[k] for k in ("tokens", "sums", "caps", "first_step", "steps")), caches, 0)
    assert stepper.state.step == 0 and torch.equal(stepper.state.self_kv[0].k, cache)


@pytest.mark.parametrize(
    "change, error",
    [
        (dict(fin_lens=None), "__init__.. is missing value for argument"),  # max_lens and six tensors
        (dict(tokens=torch.tensor([4, 5])), "tokens must be .n . k,. int64 for n = 1 sentences of k = 3"),
        (dict(style="wide"), "no length penalty style wide"),
        (dict(n_best=4), "n_best 1 .. k"),
        (dict(first_step=0), "first_step must be >= 1"),
        (dict(first_step=5, steps=8), "the sequences must hold every step"),
        (dict(fin_lens=torch.zeros(1, 3)), "fin_lens must be .n, k. int64"),
        (
            dict(fin_seqs=torch.zeros(1, 3, 9, dtype=torch.long)),
            "live_seqs and fin_seqs must be .n, k, T. int64",
        ),
        (dict(banned=torch.tensor([96])), "banned and eos must be columns"),
    ],
)
@torch.inference_mode()
def test_what_a_beam_run_is_given_is_checked_before_anything_is_written(change, error):
    model = model_with("paper")
    stepper, tokens, rules = run_inputs(model, rows=3)
    start, change = Beams.start(torch.tensor([9]), 3, "cpu"), dict(change)  # sequences of 10
    fields = ["max_lens", "live_seqs", "live_scores", "fin_seqs", "fin_scores", "fin_log_probs", "fin_lens"]
    beams = [change.pop(name, getattr(start, name)) for name in fields]
    given = dict(tokens=tokens, first_step=1, steps=4, n_best=1, eos=rules["eos"])
    given |= dict(banned=rules["banned"], style="gnmt", alpha=0.6) | change
    cache = stepper.state.self_kv[0].k.clone()
    with pytest.raises(RuntimeError, match=error):
        state = torch.classes.aiayn.BeamState(*[b for b in beams if b is not None])
        search = native_search(
            model, stepper.state, given["eos"], given["banned"], given["style"], given["alpha"]
        )
        caches = native_decoder(model).caches(stepper.state, given["tokens"].size(0))
        search.beam(state, *(given[k] for k in ("tokens", "first_step", "steps", "n_best")), caches, 0)
    assert stepper.state.step == 0 and torch.equal(stepper.state.self_kv[0].k, cache)


@pytest.mark.parametrize("count", [10, 50])
@torch.inference_mode()
def test_ids_that_do_not_name_every_output_column_are_refused(count):
    """ids (the target id of each output column) of another count than the output layer's columns:
    a RuntimeError (what the search's fallback catches) before anything is written."""
    model = model_with("paper")
    stepper, tokens, rules = run_inputs(model)
    cache = stepper.state.self_kv[0].k.clone()
    caches = native_decoder(model).caches(stepper.state, 1)
    with pytest.raises(RuntimeError, match=f"the output layer has 96 columns, and ids names {count}"):
        search = native_search(model, stepper.state, rules["eos"], rules["banned"], ids=torch.arange(count))
        search.greedy(tokens, torch.zeros(1), torch.tensor([5]), 1, 4, caches, 0)
    assert stepper.state.step == 0 and torch.equal(stepper.state.self_kv[0].k, cache)


@torch.inference_mode()
def test_a_run_takes_at_most_the_steps_the_caches_hold():
    model = model_with("EOS only where forced")
    stepper, tokens, rules = run_inputs(model)  # caches of 8 positions
    found = stepper.runs(rules_of(model)).greedy(tokens, torch.zeros(1), 1, 20, torch.tensor([30]))
    assert found[0].shape == (1, 8) and stepper.state.step == 8 and stepper.state.self_kv[0].length == 8


@torch.inference_mode()
def test_a_beam_run_ends_at_the_first_step_a_sentence_is_done():
    """Two sentences with caps 2 and 9: the first is done at step 3 (all k end there), so is the run."""
    model = model_with("EOS only where forced")
    stepper = TransformerStepper(model, sources(2, model.config.pad_id), 3, 12)
    beams = Beams.start(torch.tensor([2, 9]), 3, "cpu")
    tokens = torch.full((6,), model.config.start_id)
    taken, rows, last, done = stepper.runs(rules_of(model)).beam(beams, tokens, 1, 10, 1)
    assert int(taken) == 3 and done.tolist() == [True, False] and stepper.state.step == 3
    assert torch.isfinite(beams.fin_scores[0]).all() and beams.fin_lens[0].eq(3).all()  # k finished, 3 long
    assert not torch.isfinite(beams.fin_scores[1]).any() and rows.shape == last.shape == (6,)


class Failing:
    """A native `Search` whose runs fail as a library's error does."""

    def greedy(self, *args):
        raise RuntimeError("boom\nException raised from somewhere")

    beam = greedy


@pytest.mark.parametrize("search", ["greedy", "beam 4, 2 best"])
def test_a_run_that_fails_leaves_the_search_in_python(monkeypatch, search):
    model = model_with("paper")
    src, options = (
        sources(3, model.config.pad_id),
        DecodeConfig(max_len_a=1.5, max_len_b=4, **SEARCHES[search]),
    )
    with torch.inference_mode():
        want = decode_batch(copy.deepcopy(model), src, options)  # a copy decodes in Python

    def failing(self, model, state, *args):
        return native_step.NativeSearch(self, state, Failing())

    monkeypatch.setattr(native_step.NativeDecoder, "search", failing)
    with (
        pytest.warns(
            RuntimeWarning, match=r"^the native step failed \(boom\): decoding steps run in Python$"
        ),
        torch.inference_mode(),
    ):
        got = decode_batch(model, src, options)
    assert native_decoder(model) is None
    assert [[h.tokens for h in hs] for hs in got] == [[h.tokens for h in hs] for hs in want]


def test_no_call_into_the_library_takes_more_than_eight_arguments():
    """The boundary is typed: rules, target side, beam state and caches cross as objects."""
    assert native_build.load(), native_build.reason()
    schemas = [s for s in torch._C._jit_get_custom_class_schemas() if "torch.classes.aiayn." in str(s)]
    assert {"greedy", "beam", "step", "extend", "propose"} <= {s.name for s in schemas}
    wide = [str(s) for s in schemas if len(s.arguments) - 1 > 8]  # the object itself not counted
    assert not wide, wide


class Recording:
    """A native `Search` that records the Python functions between each run's call and the loop."""

    def __init__(self, search, calls: list[list[str]]):
        self.search, self.calls = search, calls

    def _record(self) -> None:
        names = [frame.function for frame in inspect.stack()[2:]]  # past this method and its caller's
        loop = next(i for i, name in enumerate(names) if name in ("run_beams", "run_greedy"))
        self.calls.append(names[:loop])

    def greedy(self, *args):
        self._record()
        return self.search.greedy(*args)

    def beam(self, *args):
        self._record()
        return self.search.beam(*args)


@pytest.mark.parametrize("search", ["greedy", "beam 4, 2 best"])
def test_between_the_loop_and_the_library_at_most_three_python_calls(monkeypatch, search):
    """One sentence: the loop calls the search's run, which calls C++ (a guard between them)."""
    model, calls = model_with("paper"), []
    made = native_step.NativeDecoder.search

    def recording(self, *args):
        found = made(self, *args)
        found._search = Recording(found._search, calls)
        return found

    monkeypatch.setattr(native_step.NativeDecoder, "search", recording)
    with torch.inference_mode():
        decode_batch(model, sources(1, model.config.pad_id), DecodeConfig(max_len_a=1.0, **SEARCHES[search]))
    assert calls and all(1 <= len(between) <= 3 for between in calls), calls
