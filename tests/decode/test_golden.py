"""Golden outputs: every search gives today's tokens and scores on two stored toy models.

The outputs in golden/outputs.json were written by the search code of 29243fe (four search loops,
before they became one driver with plugged-in strategies); every later search must give the same
tokens exactly and the same scores within 1e-4. The models are stored beside them (golden/toy_a:
the tests' toy translator, build_toy_model_dir of tests/toy.py; golden/toy_b: the same recipe stopped
after 150 updates, the ensemble's second model): a model trained on the test machine would differ
in its last bits between AVX2 and AVX-512 CPUs, and a near-tie in the search could then flip.

Regenerate (only when a change of the outputs is intended, and say so in the commit):

    PYTHONPATH=src:tests python tests/decode/test_golden.py            # outputs.json from the stored models
    PYTHONPATH=src:tests python tests/decode/test_golden.py --models   # retrain both models first
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from aiayn.config import SamplingConfig
from aiayn.decode.translator import Translator

GOLDEN = Path(__file__).parent / "golden"
MODEL_FILES = ("config.json", "model.safetensors", "spm.model")
TEXTS = [
    "el perro come",
    "la casa grande mira un gato verde",
    "sol",
    "una luna bebe agua y el sol duerme grande grande",  # "y" is not in the toy lexicon
    "gato gato gato perro perro",
    "el verde come la casa que bebe",
]
SAMPLE = SamplingConfig(temperature=1.3, top_k=20, top_p=0.95, seed=7)


def cases() -> dict[str, tuple[list[str], dict]]:
    """name -> (models, translate() keywords): every search and every control."""
    prefixes = [None, "the dog", "water is", "moon", "big cat", None]  # none the model's own start
    constraints = [["dog"], ["big house", "cat"], None, ["water"], None, ["green"]]
    return {
        "beam": (["toy_a"], dict(beam_size=4)),
        "beam_len": (["toy_a"], dict(beam_size=5, alpha=1.0, length_penalty_style="len")),
        "beam_fairseq": (["toy_a"], dict(beam_size=3, alpha=0.2, length_penalty_style="fairseq")),
        "nbest": (["toy_a"], dict(beam_size=6, n_best=6)),
        "greedy": (["toy_a"], dict(beam_size=1)),
        "greedy_short": (["toy_a"], dict(beam_size=1, max_len_a=0.0, max_len_b=2)),
        "beam_short": (["toy_a"], dict(beam_size=4, n_best=2, max_len_a=0.5, max_len_b=1)),
        "sample": (["toy_a"], dict(beam_size=3, n_best=3, sample=SAMPLE)),
        "sample_prefix": (["toy_a"], dict(beam_size=2, n_best=2, sample=SAMPLE, prefix=prefixes)),
        "constraints": (["toy_a"], dict(beam_size=4, n_best=3, constraints=constraints)),
        "constraints_greedy": (["toy_a"], dict(beam_size=1, constraints=constraints)),
        "prefix_beam": (["toy_a"], dict(beam_size=4, n_best=2, prefix=prefixes)),
        "prefix_greedy": (["toy_a"], dict(beam_size=1, prefix=prefixes)),
        "ensemble_beam": (["toy_a", "toy_b"], dict(beam_size=4, n_best=2)),
        "ensemble_greedy": (["toy_a", "toy_b"], dict(beam_size=1)),
        "ensemble_sample": (["toy_a", "toy_b"], dict(beam_size=2, n_best=2, sample=SAMPLE)),
        "align": (["toy_a"], dict(beam_size=4, align=True)),
    }


def outputs(translators: dict[tuple[str, ...], Translator], name: str) -> list[list[dict]]:
    """Case `name`'s translations of TEXTS: per text, its hypotheses as plain dicts."""
    models, kwargs = cases()[name]
    found = translators[tuple(models)].translate_batch(TEXTS, **kwargs)
    return [
        [
            dict(
                tokens=t.tokens,
                score=t.score,
                log_prob=t.log_prob,
                alignment=None if t.alignment is None else [list(p) for p in t.alignment],
            )
            for t in hyps
        ]
        for hyps in found
    ]


def load(models: tuple[str, ...]) -> Translator:
    return Translator.load([GOLDEN / m for m in models], device="cpu")


@pytest.fixture(scope="module")
def translators() -> dict[tuple[str, ...], Translator]:
    return {tuple(m): load(tuple(m)) for m in {tuple(ms) for ms, _ in cases().values()}}


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads((GOLDEN / "outputs.json").read_text())


@pytest.mark.parametrize("name", sorted(cases()))
def test_outputs_are_the_golden_ones(translators, golden, name):
    got, want = outputs(translators, name), golden[name]
    assert len(got) == len(want) == len(TEXTS)
    for i, (g_hyps, w_hyps) in enumerate(zip(got, want, strict=True)):
        assert [h["tokens"] for h in g_hyps] == [h["tokens"] for h in w_hyps], f"{name}: text {i}"
        assert [h["alignment"] for h in g_hyps] == [h["alignment"] for h in w_hyps], f"{name}: text {i}"
        for g, w in zip(g_hyps, w_hyps, strict=True):
            for key in ("score", "log_prob"):
                assert math.isclose(g[key], w[key], abs_tol=1e-4), f"{name}: text {i}: {key}"


def test_the_golden_cases_are_not_degenerate(golden):
    """The cases differ from one another (but "align", beam search's outputs with their word pairs),
    and every beam output is non-empty."""
    tokens = {name: json.dumps([[h["tokens"] for h in hyps] for hyps in out]) for name, out in golden.items()}
    assert tokens.pop("align") == tokens["beam"]
    assert len(set(tokens.values())) == len(tokens)
    assert all(hyps[0]["alignment"] for hyps in golden["align"])
    assert all(golden["beam"][i][0]["tokens"] for i in range(len(TEXTS)))
    assert [len(h) for h in golden["nbest"]] == [6] * len(TEXTS)
    assert golden["beam"] != golden["greedy"]


def _build_models() -> None:
    from toy import build_toy_model_dir

    torch.set_num_threads(2)
    for name, steps in (("toy_a", 400), ("toy_b", 150)):
        with tempfile.TemporaryDirectory() as tmp:
            built = build_toy_model_dir(Path(tmp) / "model", steps=steps)
            (GOLDEN / name).mkdir(parents=True, exist_ok=True)
            for f in MODEL_FILES:
                shutil.copy(built / f, GOLDEN / name / f)


def regenerate(models: bool = False) -> None:
    """Write golden/outputs.json (and with `models`, first retrain golden/toy_a and toy_b)."""
    if models:
        _build_models()
    torch.set_num_threads(2)
    translators = {tuple(m): load(tuple(m)) for m in {tuple(ms) for ms, _ in cases().values()}}
    out = {name: outputs(translators, name) for name in sorted(cases())}
    (GOLDEN / "outputs.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    regenerate(models="--models" in sys.argv[1:])
