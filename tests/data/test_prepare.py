"""`aiayn prepare`: data directory layout, validation, filter counts, atomicity, recipes, cleaning, workers
(the out directory's reuse and --force: test_outdir.py)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from aiayn.data import prepare as prepare_module
from aiayn.data.batching import TokenBatchSampler
from aiayn.data.cleaning import Cleaning
from aiayn.data.datadir import DataDir
from aiayn.data.dataset import TokenDataset
from aiayn.data.prepare import prepare
from aiayn.data.recipe import load_recipe
from aiayn.data.sources import Filters, PairFiles, SplitFiles, choose_corpus
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import AiaynError


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def _append(path, lines):
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def test_data_directory_layout_and_counts(tmp_path, corpus, prepare_corpus):
    out = prepare_corpus(tmp_path / "data", corpus)
    meta = DataDir(out).meta
    assert meta["pairs"] == {"train": 300, "valid": 20, "test": 10}
    assert meta["dropped"]["train"] == {
        "bad_lines": 0,
        "empty": 2,
        "overlap_with_train": 0,
        "train_limit": 0,
        "too_long": 1,
        "ratio": 1,
    }
    assert set(meta["drop_reasons"]) == set(meta["dropped"]["train"])
    assert meta["lines_read"]["train"] == 304
    assert (meta["src_lang"], meta["tgt_lang"], meta["corpus"]) == ("es", "en", "user")
    assert meta["vocab_size"] == Tokenizer.load(out / "spm.model").vocab_size <= 120
    assert (out / "spm.vocab").is_file() and not (out / "stage").exists()
    tokenizer = Tokenizer.load(out / "spm.model")
    for split, n in meta["pairs"].items():
        ds = TokenDataset(out, split)
        raw_src, raw_tgt = _lines(out / "raw" / f"{split}.src"), _lines(out / "raw" / f"{split}.tgt")
        assert len(ds) == len(raw_src) == len(raw_tgt) == n
        assert tokenizer.decode([ds[i][0] for i in range(n)]) == raw_src
        assert tokenizer.decode([ds[i][1] for i in range(n)]) == raw_tgt
        assert meta["tokens"][split]["tgt"] == int(ds.tgt_lengths.sum())
    assert _lines(out / "raw" / "test.src") == _lines(corpus[3][0])


def test_a_failed_run_leaves_nothing_that_looks_complete(tmp_path, corpus, monkeypatch, prepare_corpus):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_module.Tokenizer, "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(tmp_path / "data", corpus)
    assert not (tmp_path / "data").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_force_failure_keeps_the_old_directory(tmp_path, corpus, monkeypatch, prepare_corpus):
    out = prepare_corpus(tmp_path / "data", corpus)
    meta = (out / "meta.json").read_text()
    monkeypatch.setattr(prepare_module, "encode_split", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        prepare_corpus(out, corpus, force=True)
    assert (out / "meta.json").read_text() == meta


def test_seeded_split_of_a_tsv(tmp_path, write_corpus):
    src, tgt = write_corpus(500, seed=3)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in zip(_lines(src), _lines(tgt), strict=True)))
    a = prepare(tmp_path / "a", SplitFiles(PairFiles(tsv=tsv)), vocab_size=100, seed=1, progress=False)
    b = prepare(tmp_path / "b", SplitFiles(PairFiles(tsv=tsv)), vocab_size=100, seed=1, progress=False)
    c = prepare(tmp_path / "c", SplitFiles(PairFiles(tsv=tsv)), vocab_size=100, seed=2, progress=False)
    meta = DataDir(a).meta
    assert meta["pairs"] == {"train": 480, "valid": 10, "test": 10}
    assert (meta["src_lang"], meta["tgt_lang"]) == ("src", "tgt")
    assert _lines(a / "raw" / "test.src") == _lines(b / "raw" / "test.src") != _lines(c / "raw" / "test.src")
    held = set(_lines(a / "raw" / "valid.src")) | set(_lines(a / "raw" / "test.src"))
    assert not held & set(_lines(a / "raw" / "train.src"))
    assert sorted(_lines(a / "raw" / "train.src") + list(held)) == sorted(set(_lines(src)))


def test_overlapping_held_out_pairs_are_dropped_and_counted(tmp_path):
    src, tgt = tmp_path / "c.es", tmp_path / "c.en"
    src.write_text("".join(f"same {i % 2}\n" for i in range(300)))
    tgt.write_text("".join(f"t {i}\n" for i in range(300)))
    meta = DataDir(
        prepare(tmp_path / "d", SplitFiles(PairFiles(src, tgt)), vocab_size=30, progress=False)
    ).meta
    assert meta["pairs"]["valid"] == meta["pairs"]["test"] == 0
    assert (
        meta["dropped"]["valid"]["overlap_with_train"] == meta["dropped"]["test"]["overlap_with_train"] == 6
    )


def test_skip_bad_lines_is_counted_in_meta(tmp_path, write_corpus):
    src, tgt = write_corpus(200)
    src.write_bytes(src.read_bytes() + b"bad \xff line\n")
    tgt.write_bytes(tgt.read_bytes() + b"fine\n")
    with pytest.raises(AiaynError, match=r"corpus.es:201: invalid UTF-8"):
        prepare(tmp_path / "d", SplitFiles(PairFiles(src, tgt)), vocab_size=100, progress=False)
    files = SplitFiles(PairFiles(src, tgt))
    out = prepare(tmp_path / "d", files, vocab_size=100, skip_bad_lines=True, progress=False)
    assert DataDir(out).meta["dropped"]["train"]["bad_lines"] == 1


def test_argument_errors(tmp_path, corpus):
    src, tgt, _, _ = corpus
    with pytest.raises(AiaynError, match="exactly one corpus"):
        choose_corpus("bible-es-en", SplitFiles(PairFiles(src, tgt)))
    with pytest.raises(AiaynError, match="give both --src and --tgt"):
        prepare(tmp_path / "d", SplitFiles(PairFiles(src)))
    with pytest.raises(AiaynError, match="not a prepared data directory"):
        _ = DataDir(tmp_path).meta


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_a_malformed_meta_json_is_a_one_line_error(tmp_path, text):
    (tmp_path / "meta.json").write_text(text)
    with pytest.raises(AiaynError, match="meta.json: not (valid JSON|a JSON object)") as error:
        _ = DataDir(tmp_path).meta
    assert "\n" not in str(error.value)


def test_train_limit_keeps_a_seeded_sample(tmp_path, write_corpus):
    src, tgt = write_corpus(500, seed=3)
    files = SplitFiles(PairFiles(src, tgt))
    full = prepare(tmp_path / "full", files, vocab_size=100, progress=False)
    a, b, c = (
        prepare(
            tmp_path / name,
            files,
            filters=Filters(train_limit=100),
            vocab_size=100,
            seed=seed,
            progress=False,
        )
        for name, seed in (("a", 1), ("b", 1), ("c", 2))
    )
    meta = DataDir(a).meta
    assert meta["pairs"]["train"] == 100 and meta["filters"]["train_limit"] == 100
    assert meta["dropped"]["train"]["train_limit"] == DataDir(full).meta["pairs"]["train"] - 100
    sample, everything = _lines(a / "raw" / "train.src"), _lines(full / "raw" / "train.src")
    assert set(sample) <= set(everything) and sample == [s for s in everything if s in set(sample)]
    assert sample == _lines(b / "raw" / "train.src") != _lines(c / "raw" / "train.src")
    for split in ("valid", "test"):  # held-out pairs are drawn before the sample: the same as without it
        assert _lines(a / "raw" / f"{split}.src") == _lines(full / "raw" / f"{split}.src")
    more = prepare(
        tmp_path / "more", files, vocab_size=100, filters=Filters(train_limit=10_000), progress=False
    )
    assert _lines(more / "raw" / "train.src") == everything
    with pytest.raises(AiaynError, match="--train-limit must be at least 1"):
        prepare(tmp_path / "e", files, filters=Filters(train_limit=0))


@pytest.mark.slow
def test_prepare_bible(bible_data_dir):
    meta = DataDir(bible_data_dir).meta
    assert (meta["corpus"], meta["src_lang"], meta["tgt_lang"], meta["vocab_size"]) == (
        "bible-es-en",
        "es",
        "en",
        8000,
    )
    assert abs(meta["pairs"]["train"] - 28_875) < 0.03 * 28_875
    assert (
        _lines(bible_data_dir / "raw" / "train.src")[0] == "En el principio crió Dios los cielos y la tierra."
    )
    assert len(_lines(bible_data_dir / "raw" / "test.tgt")) == meta["pairs"]["test"]
    tokenizer = Tokenizer.load(bible_data_dir / "spm.model")
    train = TokenDataset(bible_data_dir, "train")
    assert tokenizer.decode([train[0][1]]) == ["In the beginning God created the heaven and the earth."]
    assert np.percentile(train.tgt_lengths, 99) < 100  # DATA.md: p99 ~70 pieces


@pytest.mark.slow
def test_bible_batches_waste_little_padding(bible_data_dir):
    train = TokenDataset(bible_data_dir, "train")
    sampler = TokenBatchSampler(train.src_lengths, train.tgt_lengths, max_tokens=4096)
    cells = tokens = 0
    for batch in sampler.batches(0):
        cells += len(batch) * (train.src_lengths[batch].max() + train.tgt_lengths[batch].max())
        tokens += train.src_lengths[batch].sum() + train.tgt_lengths[batch].sum()
    assert 1 - tokens / cells < 0.05


@pytest.mark.slow
def test_a_killed_process_never_leaves_a_complete_looking_directory(tmp_path, write_corpus):
    src, tgt = write_corpus(40_000)
    out = tmp_path / "data"
    argv = [sys.executable, "-m", "aiayn", "prepare", "--src", str(src), "--tgt", str(tgt), "--out", str(out)]
    process = subprocess.Popen([*argv, "--no-progress", "--vocab-size", "200"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".data.tmp-*/raw")) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not out.exists()
    assert list(tmp_path.glob(".data.tmp-*"))  # the killed run's work, hidden
    prepare(out, SplitFiles(PairFiles(src, tgt)), vocab_size=200, progress=False)
    assert DataDir(out).meta["pairs"]["train"] > 0
    assert not list(tmp_path.glob(".data.tmp-*"))


def test_a_run_killed_between_its_renames_loses_nothing(tmp_path, corpus, prepare_corpus):
    out = prepare_corpus(tmp_path / "data", corpus)
    out.rename(tmp_path / ".data.old-.data.tmp-abc12345")  # what the old code's first rename did
    (tmp_path / ".data.tmp-abc12345").mkdir()  # the finished work of the killed run
    prepare_corpus(out, corpus)
    assert DataDir(out).meta["pairs"]["train"] == 300
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_cleanup_leaves_a_concurrent_runs_work_alone(tmp_path, corpus, prepare_corpus):
    live, dead = tmp_path / ".data.tmp-live0000", tmp_path / ".data.tmp-dead0000"
    live.mkdir()
    dead.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a running prepare holds its own
    try:
        prepare_corpus(tmp_path / "data", corpus)
    finally:
        os.close(fd)
    assert live.is_dir() and not dead.exists()


def _recipe(tmp_path, write_corpus, body: str):
    write_corpus(200, seed=5, names=("main.es", "main.en"))
    src, tgt = write_corpus(60, seed=6, names=("extra.es", "extra.en"))
    _append(
        src, [_lines(src)[0], "the very same words on both sides", "Der Herr ist mein Hirte, mir wird nichts"]
    )
    _append(
        tgt,
        [_lines(tgt)[0], "The very same words on both  sides", "the lord is my shepherd and I want nothing"],
    )
    path = tmp_path / "recipe.yaml"
    path.write_text(body, encoding="utf-8")
    return load_recipe(path)


RECIPE = """src_lang: en
tgt_lang: en
sources:
  - {name: main, src: main.es, tgt: main.en}
  - {name: extra, src: extra.es, tgt: extra.en, weight: 2.5}
clean: [duplicates, copies, language]
"""


def test_a_recipe_stages_its_sources_in_order_cleans_and_records_each(tmp_path, write_corpus):
    recipe = _recipe(tmp_path, write_corpus, RECIPE.replace("src_lang: en", "src_lang: de"))
    out = prepare(tmp_path / "data", recipe, vocab_size=100, progress=False, filters=Filters(max_len=40))
    meta = DataDir(out).meta
    main, extra = meta["sources"]
    assert (main["name"], main["weight"], extra["weight"]) == ("main", 1.0, 2.5)
    assert extra["staged"] == 63 and main["staged"] == 200 - 2 * 4  # the first source gives valid and test
    long = [sum(c.isalpha() for c in line) >= 20 for line in _lines(tmp_path / "extra.es")[:60]]
    # the sources' "de" side is English: removed where long enough to judge; the German line is kept
    assert extra["removed"] == {"duplicates": 1, "copies": 1, "language": sum(long)}
    assert extra["kept"] == 60 - sum(long) + 1
    assert meta["dropped"]["train"]["language"] == sum(long) + main["removed"]["language"]
    corpus = np.load(out / "train.corpus.npy")
    assert corpus.tolist() == [0] * main["kept"] + [1] * extra["kept"]
    assert _lines(out / "raw" / "train.src")[-1] == "Der Herr ist mein Hirte, mir wird nichts"
    reasons = np.load(out / "cleaning" / "reasons.npy")
    assert len(reasons) == main["staged"] + extra["staged"]
    assert (out / "cleaning" / "copies.tsv").read_text().startswith("extra\t62\tthe very same words")
    assert meta["recipe"]["sources"][1]["src"] == str(tmp_path / "extra.es")


def test_a_weighted_recipe_trains_in_its_proportions(tmp_path, write_corpus):
    from aiayn.data.mixing import read_mix

    recipe = _recipe(tmp_path, write_corpus, RECIPE.replace("clean: [duplicates, copies, language]", ""))
    out = prepare(tmp_path / "data", recipe, vocab_size=100, progress=False, filters=Filters(max_len=40))
    meta = DataDir(out).meta
    assert "clean" not in meta["sources"][0]["removed"] and meta["clean"] is None
    assert "copies" not in meta["dropped"]["train"]
    mix = read_mix(out, meta, seed=1, n_pairs=len(TokenDataset(out, "train")))
    kept = [s["kept"] for s in meta["sources"]]
    assert mix.shares() == pytest.approx([s["share"] for s in meta["sources"]], abs=1e-6)
    taken = np.bincount(mix.corpus[mix.indices(0)]).tolist()
    assert taken[0] == kept[0] and taken[1] in (int(2.5 * kept[1]), int(2.5 * kept[1]) + 1)


def test_a_prepared_recipe_is_reused_only_as_it_was(tmp_path, write_corpus, capsys):
    recipe = _recipe(tmp_path, write_corpus, RECIPE)
    out = prepare(tmp_path / "data", recipe, vocab_size=100, progress=False)
    prepare(out, recipe, vocab_size=100, progress=False)
    assert "already prepared" in capsys.readouterr().err
    (tmp_path / "recipe.yaml").write_text(RECIPE.replace("2.5", "3"), encoding="utf-8")
    with pytest.raises(AiaynError, match="already prepared from another corpus"):
        prepare(out, load_recipe(tmp_path / "recipe.yaml"), vocab_size=100, progress=False)


def test_a_bad_second_source_is_one_line_and_nothing_is_written(tmp_path, write_corpus):
    recipe = _recipe(tmp_path, write_corpus, RECIPE)
    _append(tmp_path / "extra.es", ["one more line"])
    with pytest.raises(AiaynError, match=r"extra.es has 64 lines but .*extra.en has 63"):
        prepare(tmp_path / "data", recipe, vocab_size=100, progress=False)
    assert not (tmp_path / "data").exists() and not list(tmp_path.glob(".data*"))


def test_cleaning_needs_languages_the_identifier_knows(tmp_path, corpus):
    src, tgt, _, _ = corpus
    files = SplitFiles(PairFiles(src, tgt))
    with pytest.raises(AiaynError, match="cannot identify src_lang='xx'"):
        prepare(tmp_path / "data", files, clean=Cleaning(), src_lang="xx", progress=False)
    assert not (tmp_path / "data").exists()


def test_a_tagged_recipe_is_one_multilingual_corpus(tmp_path, write_corpus):
    write_corpus(200, seed=7, names=("a.en", "a.de"))
    write_corpus(200, seed=8, names=("b.en", "b.fr"))
    recipe = tmp_path / "multi.yaml"
    recipe.write_text(
        "src_lang: en\ntags: true\nsources:\n  - {src: a.en, tgt: a.de, tgt_lang: de}\n"
        "  - {src: b.en, tgt: b.fr, tgt_lang: fr}\n"
    )
    out = prepare(tmp_path / "data", load_recipe(recipe), vocab_size=120, progress=False)
    meta = DataDir(out).meta
    assert (meta["tgt_lang"], meta["target_languages"], meta["target_tag"]) == (
        "mul",
        ["de", "fr"],
        ">>{lang}<<",
    )
    train = _lines(out / "raw" / "train.src")
    kept = [s["kept"] for s in meta["sources"]]
    assert [line.split()[0] for line in train] == [">>de<<"] * kept[0] + [">>fr<<"] * kept[1]
    for split in ("valid", "test"):  # every source gives held-out pairs, tagged
        assert {line.split()[0] for line in _lines(out / "raw" / f"{split}.src")} == {">>de<<", ">>fr<<"}
    tokenizer = Tokenizer.load(out / "spm.model")
    assert ">>fr<<" in tokenizer.pieces(tokenizer.encode([">>fr<< le"])[0])  # the tag is one piece


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("tags: true\nsources:\n  - {src: a.en, tgt: a.de}\n", "source 'a' has no target language"),
        (
            "tags: true\nsources:\n  - {src: a.en, tgt: a.de, tgt_lang: de}\nvalid: {tsv: v.tsv}\n",
            "leave valid",
        ),
        ("tags: yes please\nsources:\n  - {src: a.en, tgt: a.de}\n", "tags: must be true or false"),
    ],
)
def test_tagged_recipe_mistakes_are_one_line(tmp_path, body, message):
    recipe = tmp_path / "multi.yaml"
    recipe.write_text(body)
    with pytest.raises(AiaynError, match=message):
        load_recipe(recipe)


def test_the_same_bytes_for_any_number_of_workers(tmp_path, corpus, prepare_corpus):
    one = prepare_corpus(tmp_path / "one", corpus, workers=1)
    two = prepare_corpus(tmp_path / "two", corpus, workers=2)
    for name in ("spm.model", "train.src.bin", "train.tgt.bin", "train.index.npz", "test.src.bin"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    with pytest.raises(AiaynError, match="--workers must be at least 1"):
        prepare_corpus(tmp_path / "zero", corpus, workers=0)


def test_cleaning_that_removes_every_pair_says_so(tmp_path, write_corpus):
    src, tgt = write_corpus(200, seed=9)
    tgt.write_text(src.read_text())  # every target a copy of its source
    with pytest.raises(AiaynError, match=r"cleaning removed every train pair \(copies 19\d"):
        prepare(
            tmp_path / "data",
            SplitFiles(PairFiles(src, tgt)),
            clean=Cleaning(rules=("copies",)),
            progress=False,
        )
    assert not (tmp_path / "data").exists()
