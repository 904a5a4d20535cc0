"""What prepare reads (aiayn.data.sources): the user's files of each split checked as whole
combinations, one corpus chosen, and the train filters recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.data.sources import DEFAULT_CORPUS, Filters, PairFiles, SplitFiles, choose_corpus
from aiayn.errors import AiaynError


def test_a_split_is_a_source_and_target_pair_or_one_tsv():
    assert PairFiles().files("") is None and not PairFiles().given
    assert PairFiles("a.es", "a.en").files("") == {"src": Path("a.es"), "tgt": Path("a.en")}
    assert PairFiles(tsv="a.tsv").files("valid-") == {"tsv": Path("a.tsv")}
    for files, option in ((PairFiles("a.es"), ""), (PairFiles("a.es", "a.en", "a.tsv"), "test-")):
        with pytest.raises(
            AiaynError, match=rf"^give both --{option}src and --{option}tgt, or --{option}tsv alone$"
        ):
            files.files(option)


def test_the_splits_need_train_files_and_check_their_options():
    split = SplitFiles(PairFiles(tsv="t.tsv"), test=PairFiles("x.es", "x.en"))
    assert split.inputs() == {
        "train": {"tsv": Path("t.tsv")},
        "valid": None,
        "test": {"src": Path("x.es"), "tgt": Path("x.en")},
    }
    with pytest.raises(AiaynError, match=r"^give a corpus: --corpus NAME"):
        SplitFiles(valid=PairFiles(tsv="v.tsv")).inputs()
    with pytest.raises(AiaynError, match=r"^give both --valid-src and --valid-tgt"):
        SplitFiles(PairFiles(tsv="t.tsv"), PairFiles(tgt="v.en")).inputs()


def test_one_corpus_is_chosen_and_the_default_when_none_is_given():
    files = SplitFiles(PairFiles(tsv="t.tsv"))
    assert choose_corpus(None, SplitFiles()) == DEFAULT_CORPUS
    assert choose_corpus("wmt14-en-de", SplitFiles()) == "wmt14-en-de"
    assert choose_corpus(None, files) is files
    with pytest.raises(AiaynError, match=r"^give exactly one corpus"):
        choose_corpus("bible-es-en", files)


def test_the_filters_are_recorded_as_they_apply():
    assert Filters(max_len=40, train_limit=7).describe() == {
        "max_len": 40, "max_ratio": 9.0, "length_filters_apply_to": ["train"], "train_limit": 7,
    }  # fmt: skip
