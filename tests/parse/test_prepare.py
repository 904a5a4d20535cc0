"""`aiayn prepare` for trees: the WSJ layout, tree files, the synthetic treebank; what the data holds."""

from __future__ import annotations

import json

import pytest

from aiayn.config import EOS_ID, UNK_ID
from aiayn.data.dataset import TokenDataset
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import AiaynError
from aiayn.parse.grammar import synthetic_treebank
from aiayn.parse.prepare import prepare_trees
from aiayn.parse.trees import linearise, read_tree_lines

SMALL = {"train": 150, "valid": 12, "test": 12}


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("parse") / "synthetic"
    return prepare_trees(out, synthetic=SMALL, vocab_size=200, progress=False)


def test_synthetic_data_directory_holds_words_linearised_trees_and_gold_trees(synthetic_dir):
    meta = json.loads((synthetic_dir / "meta.json").read_text())
    assert (meta["task"], meta["corpus"], meta["pairs"]) == ("parse", "synthetic-trees", SMALL)
    assert "SYNTHETIC" in meta["description"]
    expected = synthetic_treebank(1, SMALL)
    gold = read_tree_lines(synthetic_dir / "raw" / "test.tree")
    assert [str(t) for t in gold] == [str(t) for t in expected["test"]]
    labels = meta["parse"]["labels"]
    assert labels == sorted({"S", "NP", "VP", "PP", "SBAR", "WHNP", "ADJP", "ADVP", "PRT"} & set(labels))
    tokenizer = Tokenizer.load(synthetic_dir / "spm.model")
    data = TokenDataset(synthetic_dir, "train")
    sources = (synthetic_dir / "raw" / "train.src").read_text().splitlines()
    targets = (synthetic_dir / "raw" / "train.tgt").read_text().splitlines()
    for i in (0, 7, 149):
        src, tgt = data[i]
        assert tokenizer.decode([src.tolist()]) == [sources[i]] == [" ".join(expected["train"][i].words())]
        assert tokenizer.pieces(tgt.tolist()) == linearise(expected["train"][i]) + ["</s>"]  # one id a token
        assert targets[i] == " ".join(linearise(expected["train"][i]))
        assert tgt[-1] == EOS_ID


def write_wsj(root, sections=range(0, 25)):
    tree = "( (S (NP-SBJ (DT The) (NN index)) (VP (VBD fell) (NP (-NONE- *))) (. .)) )\n"
    for section in sections:
        folder = root / f"{section:02d}"
        folder.mkdir(parents=True)
        (folder / f"wsj_{section:02d}01.mrg").write_text(tree * (1 + section % 3))
        (folder / f"WSJ_{section:02d}02.MRG").write_text(tree)
    (root / "README").write_text("not a tree file")


def test_wsj_layout_gives_the_standard_split(tmp_path):
    write_wsj(tmp_path / "treebank_3" / "parsed" / "mrg" / "wsj")
    out = prepare_trees(tmp_path / "data", treebank=tmp_path / "treebank_3", progress=False)
    meta = json.loads((out / "meta.json").read_text())
    train = sum(2 + s % 3 for s in range(2, 22))
    assert meta["pairs"] == {"train": train, "valid": 2 + 22 % 3, "test": 2 + 23 % 3}
    assert (meta["corpus"], meta["src_lang"]) == ("wsj", "en")
    assert (out / "raw" / "test.tree").read_text().splitlines()[0] == (
        "(S (NP (DT The) (NN index)) (VP (VBD fell)) (. .))"
    )


def test_an_incomplete_wsj_directory_says_what_is_missing(tmp_path):
    write_wsj(tmp_path / "wsj", sections=[*range(2, 22), 23])
    with pytest.raises(AiaynError, match=r"sections missing: 22 \(found: 02, .*23\)"):
        prepare_trees(tmp_path / "data", treebank=tmp_path / "wsj", progress=False)
    assert not (tmp_path / "data").exists()


def test_tree_files_with_held_out_splits_unseen_labels_and_empty_trees(tmp_path):
    trees = synthetic_treebank(2, {"train": 200, "valid": 0, "test": 0})["train"]
    train = tmp_path / "train.txt"
    train.write_text("".join(f"{t}\n" for t in trees) + "( (S (NP (-NONE- *))) )\n")
    test = tmp_path / "test.mrg"
    test.write_text("(S (FRAG (NN odd)) (. .))\n(S (NP (NNP Mary)) (VP (VBD slept)))\n")
    out = prepare_trees(tmp_path / "d", train=train, test=test, vocab_size=100, progress=False)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["pairs"]["test"] == 2 and meta["pairs"]["valid"] == 4  # 200 // 50 held out as valid
    assert meta["pairs"]["train"] == 196  # the test share drawn from train went back to train
    assert meta["dropped"]["train"]["empty"] == 1 and meta["lines_read"]["train"] == 201
    assert "FRAG" not in meta["parse"]["labels"] and meta["unk"]["test"]["tgt"] == 2  # (FRAG and )FRAG
    assert TokenDataset(out, "test")[0][1].tolist()[1] == UNK_ID


def test_long_trees_leave_train_and_the_dev_shards_but_are_scored(tmp_path):
    sizes = {"train": 80, "valid": 30, "test": 30}
    out = prepare_trees(tmp_path / "d", synthetic=sizes, max_len=25, vocab_size=200, progress=False)
    meta = json.loads((out / "meta.json").read_text())
    trees = synthetic_treebank(1, sizes)
    tokenizer = Tokenizer.load(out / "spm.model")

    def length(tree):  # the longer side: the words' pieces or the linearised tree
        return max(len(tokenizer.encode([" ".join(tree.words())])[0]), len(linearise(tree)))

    too_long = {split: [i for i, t in enumerate(trees[split]) if length(t) > 25] for split in sizes}
    assert all(too_long.values())
    assert meta["dropped"]["train"]["too_long"] == len(too_long["train"])
    assert meta["pairs"]["train"] == 80 - len(too_long["train"])
    for split in ("valid", "test"):
        raw = read_tree_lines(out / "raw" / f"{split}.tree")
        assert [str(t) for t in raw] == [str(t) for t in trees[split]] and meta["pairs"][split] == 30
        assert len(TokenDataset(out, split)) == 30 - len(too_long[split])
        assert meta["long_held_out"][split] == {
            "pairs": len(too_long[split]),
            "first": f"raw/{split}.tree:{too_long[split][0] + 1}",
        }
