"""The score rule: dual conditional cross-entropy under a forward and a reverse toy translator
(Spanish<->English word for word) removes misaligned pairs, which no other rule can see; its
cross-entropies agree with a pair-by-pair computation; bad models and shares are one line."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from aiayn.data.cleaning import RULES, Cleaning, Score, worst
from aiayn.data.prepare import prepare
from aiayn.data.recipe import load_recipe
from aiayn.data.scoring import Scorer
from aiayn.data.sources import PairFiles, SplitFiles
from aiayn.errors import AiaynError
from toy import word_for_word, write_parallel

SCORE = RULES.index("score") + 1
OTHER_RULES = ("duplicates", "near_duplicates", "copies")  # the toy's lines are too short for `language`


def misaligned(n_clean: int, n_bad: int, seed: int = 11) -> tuple[list[tuple[str, str]], np.ndarray]:
    """Toy pairs with `n_bad` misaligned ones (another pair's target) at random places; -> the pairs
    and (n,) bool, True for a misaligned pair."""
    pairs, rng = word_for_word(n_clean, seed, lengths=(3, 6)), random.Random(seed)
    labels = [False] * n_clean
    for _ in range(n_bad):
        i, j = rng.randrange(len(pairs)), rng.randrange(n_clean)
        while pairs[j][1] == pairs[i][1]:
            j = rng.randrange(n_clean)
        pairs.insert(i, (pairs[i][0], pairs[j][1]))
        labels.insert(i, True)
    return pairs, np.array(labels)


@pytest.fixture
def noisy_files(tmp_path):
    pairs, labels = misaligned(300, 33)  # 10% of the 333 misaligned
    folder = tmp_path / "text"
    folder.mkdir()
    held = word_for_word(20, 5)
    files = SplitFiles(
        PairFiles(*write_parallel(pairs, folder / "train.es", folder / "train.en")),
        PairFiles(*write_parallel(held, folder / "valid.es", folder / "valid.en")),
        PairFiles(*write_parallel(held, folder / "test.es", folder / "test.en")),
    )
    return files, labels


def _manual_entropy(model_dir, sources, targets) -> list[float]:
    """Each target's mean negative log-likelihood, one pair at a time, by log_softmax and gather."""
    from aiayn.decode.bundle import load_bundle

    bundle = load_bundle(model_dir, "cpu")
    model, config = bundle.model, bundle.config
    out = []
    with torch.no_grad():
        for s, t in zip(bundle.tokenizer.encode(sources), bundle.tokenizer.encode(targets), strict=True):
            src = torch.tensor([s + [config.eos_id]])  # (1, src_len)
            tgt = torch.tensor([t + [config.eos_id]])  # (1, tgt_len)
            tgt_in = torch.tensor([[config.start_id] + t])  # (1, tgt_len)
            logp = model(src, tgt_in).log_softmax(-1)[0]  # (tgt_len, vocab)
            out.append(-logp.gather(1, tgt[0][:, None]).mean().item())
    return out


def test_the_score_is_the_dual_conditional_cross_entropy(toy_model_dir, toy_reverse_model_dir):
    pairs, _ = misaligned(12, 4)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    scorer = Scorer(toy_model_dir, toy_reverse_model_dir, "es", "en")
    h_f, h_r = (
        _manual_entropy(toy_model_dir, sources, targets),
        _manual_entropy(toy_reverse_model_dir, targets, sources),
    )
    expected = [abs(f - r) + (f + r) / 2 for f, r in zip(h_f, h_r, strict=True)]
    np.testing.assert_allclose(scorer.pair_scores(sources, targets), expected, rtol=1e-4, atol=1e-5)
    scores = scorer.scores(iter(pairs), np.arange(len(pairs)) % 3 != 0)  # every third one not wanted
    assert np.isnan(scores[::3]).all()
    np.testing.assert_allclose(
        np.delete(scores, np.s_[::3]), np.delete(expected, np.s_[::3]), rtol=1e-4, atol=1e-5
    )


def test_the_rule_removes_the_misaligned_pairs_first(
    tmp_path, noisy_files, toy_model_dir, toy_reverse_model_dir
):
    files, labels = noisy_files
    cleaning = Cleaning(rules=OTHER_RULES, sample=5, score=Score(toy_model_dir, toy_reverse_model_dir, 0.1))
    out = prepare(tmp_path / "data", files, clean=cleaning, progress=False, vocab_size=60)
    reasons = np.load(out / "cleaning" / "reasons.npy")
    assert set(reasons[labels].tolist()) <= {0, SCORE}  # no other rule sees a misalignment
    removed = reasons == SCORE
    precision, recall = labels[removed].mean(), removed[labels].mean()
    assert precision >= 0.9 and recall >= 0.9, (precision, recall)
    scores = np.load(out / "cleaning" / "scores.npy")
    assert scores.dtype == np.float32 and np.isnan(scores).tolist() == ((reasons != 0) & ~removed).tolist()
    assert scores[removed].min() > np.nanmax(scores[reasons == 0])  # the worst ones went
    assert removed.sum() == round(0.1 * (~np.isnan(scores)).sum())
    meta = json.loads((out / "meta.json").read_text())
    assert meta["dropped"]["train"]["score"] == removed.sum() == meta["sources"][0]["removed"]["score"]
    assert meta["clean"]["score"] == {
        "forward": str(toy_model_dir),
        "reverse": str(toy_reverse_model_dir),
        "drop": 0.1,
    }
    sample = (out / "cleaning" / "score.tsv").read_text(encoding="utf-8").splitlines()
    first = np.flatnonzero(removed)[:5]  # the first five it removed, numbered from 1
    assert [line.split("\t")[1] for line in sample] == [str(i + 1) for i in first]


def _nothing_written(tmp_path, out) -> bool:
    return not out.exists() and [p.name for p in tmp_path.iterdir()] == ["text"]


@pytest.mark.parametrize("which", ["forward", "reverse"])
def test_a_missing_model_is_one_line_and_nothing_is_written(tmp_path, noisy_files, toy_model_dir, which):
    models = {"forward": toy_model_dir, "reverse": toy_model_dir, which: tmp_path / "nowhere"}
    with pytest.raises(AiaynError) as err:
        prepare(tmp_path / "data", noisy_files[0], clean=Cleaning(score=Score(**models)), progress=False)
    nowhere = tmp_path / "nowhere"
    assert (
        str(err.value) == f"the score rule's {which} model: {nowhere}: not a model directory (no config.json)"
    )
    assert _nothing_written(tmp_path, tmp_path / "data")


def test_models_of_another_direction_are_one_line(
    tmp_path, noisy_files, toy_model_dir, toy_reverse_model_dir
):
    score = Score(toy_reverse_model_dir, toy_model_dir)  # swapped
    with pytest.raises(AiaynError, match=r"forward model .* translates en->es, but the data needs es->en$"):
        prepare(tmp_path / "data", noisy_files[0], clean=Cleaning(score=score), progress=False)
    assert _nothing_written(tmp_path, tmp_path / "data")


def test_a_vocabulary_that_does_not_cover_the_data_is_one_line(
    tmp_path, toy_model_dir, toy_reverse_model_dir
):
    (tmp_path / "text").mkdir()
    greek = [("Ο σκύλος τρώει το ψωμί", "the dog eats the bread")] * 3 + [
        (f"λέξη {i}", f"word {i}") for i in range(60)
    ]
    files = SplitFiles(
        PairFiles(*write_parallel(greek, tmp_path / "text" / "c.es", tmp_path / "text" / "c.en"))
    )
    score = Score(toy_model_dir, toy_reverse_model_dir)
    with pytest.raises(AiaynError) as err:
        prepare(
            tmp_path / "data",
            files,
            clean=Cleaning(rules=("score",), score=score),
            progress=False,
            vocab_size=40,
        )
    assert "\n" not in str(err.value)
    assert "forward model" in str(err.value) and "does not match the data's" in str(err.value)
    assert "of the source pieces are <unk>" in str(err.value)
    assert _nothing_written(tmp_path, tmp_path / "data")


@pytest.mark.parametrize("drop", [0, 1, 1.5, -0.1, True, "half", math.nan])
def test_a_share_outside_zero_to_one_is_one_line(tmp_path, drop):
    with pytest.raises(AiaynError, match=r"drop must be a share between 0 and 1 \(exclusive\), got"):
        Score(tmp_path, tmp_path, drop)


def test_the_score_rule_needs_its_models_and_a_recipe_names_them(tmp_path):
    with pytest.raises(AiaynError, match="the score rule needs a forward and a reverse model"):
        Cleaning(rules=("copies", "score"))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "sources:\n  - {tsv: a.tsv}\nclean: {rules: [copies], score: {forward: f, reverse: r}}\n"
    )
    clean = load_recipe(recipe).clean
    assert clean.rules == ("copies", "score") and clean.score == Score(tmp_path / "f", tmp_path / "r", 0.1)
    for body, message in [
        ("{score: {forward: f, reverse: r, drop: 2}}", "clean: the score rule's drop must be a share"),
        ("{score: {forward: f}}", "clean: score.reverse must be a model directory"),
        ("{score: {forward: f, reverse: r, share: 0.1}}", "clean: score must be a mapping of forward"),
        ("[score]", "clean: the score rule needs a forward and a reverse model"),
    ]:
        recipe.write_text(f"sources:\n  - {{tsv: a.tsv}}\nclean: {body}\n")
        with pytest.raises(AiaynError) as err:
            load_recipe(recipe)
        assert str(err.value).startswith(f"{recipe}: ") and message in str(err.value)


def test_worst_takes_the_highest_share_of_the_scored_earlier_first():
    scores = np.array([1.0, math.nan, 5.0, 3.0, 5.0, math.nan, 0.5, 5.0], dtype=np.float32)
    assert np.flatnonzero(worst(scores, 0.34)).tolist() == [2, 4]  # 2 of 6 scored: ties, earlier first
    assert not worst(scores, 0.05).any()  # round(0.3) = 0


def test_a_tagged_recipe_cannot_use_the_score_rule(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "src_lang: es\ntags: true\nsources:\n  - {src: a.es, tgt: a.en, tgt_lang: en}\n"
        "  - {src: b.es, tgt: b.de, tgt_lang: de}\n"
        "clean: {rules: [copies], score: {forward: f, reverse: r}}\n"
    )
    with pytest.raises(AiaynError, match="the score rule scores one language pair; a recipe with tags: true"):
        prepare(tmp_path / "data", load_recipe(recipe), progress=False)
    assert not (tmp_path / "data").exists()
