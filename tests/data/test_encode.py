"""aiayn.data.encode: valid and test pairs over max_len stay in the raw text (BLEU scores them)
but not in the shards, counted and named by their file and line."""

from __future__ import annotations

from aiayn.data.datadir import DataDir
from aiayn.data.dataset import TokenDataset
from aiayn.data.prepare import prepare
from aiayn.data.sources import Filters, PairFiles, SplitFiles


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_long_held_out_pairs_stay_in_raw_text_but_out_of_the_shards(tmp_path, corpus, capsys, prepare_corpus):
    """One over-long dev pair would be a batch of its own (or overflow learned positions) mid-run."""
    src, tgt, valid, test = corpus
    lines = _lines(valid[0])
    lines[2] = "water " * 60  # more than max_len=40 pieces
    valid[0].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = prepare_corpus(tmp_path / "data", corpus)  # --no-progress hides bars, not notes
    meta = DataDir(out).meta
    assert meta["long_held_out"] == {
        "valid": {"pairs": 1, "first": f"{valid[0]}:3"},
        "test": {"pairs": 0, "first": None},
    }
    assert meta["pairs"]["valid"] == len(TokenDataset(out, "valid")) == 19
    assert _lines(out / "raw" / "valid.src") == [" ".join(line.split()) for line in lines]  # BLEU: all 20
    assert max(TokenDataset(out, "valid").src_lengths) <= 41
    note = f"1 valid pair(s) have more than max_len=40 pieces (first: {valid[0]}:3)"
    assert note in capsys.readouterr().err


def test_held_out_pairs_drawn_from_train_are_named_by_their_train_line(tmp_path, write_corpus):
    src, tgt = write_corpus(400, seed=3)
    lines = _lines(src)
    long_lines = set(range(0, len(lines), 2))
    for i in long_lines:
        lines[i] = f"word{i} " * 50
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    filters = Filters(max_len=40, max_ratio=100)
    files = SplitFiles(PairFiles(src, tgt))
    out = prepare(tmp_path / "data", files, filters=filters, vocab_size=100, progress=False)
    meta = DataDir(out).meta
    first = meta["long_held_out"]["valid"]["first"]
    assert meta["long_held_out"]["valid"]["pairs"] >= 1 and first.startswith(f"{src}:")
    assert int(first.rpartition(":")[2]) - 1 in long_lines
