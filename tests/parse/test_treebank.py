"""Where `aiayn prepare` finds trees (aiayn.parse.treebank): the WSJ split by section, tree files and
directories of them, empty trees counted and dropped, a seeded held-out split, one source only."""

from __future__ import annotations

from collections import Counter

import pytest

from aiayn.data.corpus import held_out_indices
from aiayn.errors import AiaynError
from aiayn.parse.treebank import gather, held_out, load_trees, tree_files, wsj_files
from aiayn.parse.trees import parse_trees

TREE = "( (S (NP-SBJ (DT The) (NN index)) (VP (VBD fell) (NP (-NONE- *))) (. .)) )\n"


def test_the_wsj_sections_make_the_standard_split(tmp_path):
    for section in range(25):
        folder = tmp_path / "wsj" / f"{section:02d}"
        folder.mkdir(parents=True)
        (folder / f"wsj_{section:02d}01.mrg").write_text(TREE)
    (tmp_path / "wsj" / "README").write_text("not a tree file")
    files = wsj_files(tmp_path)
    assert [p.parent.name for p in files["train"]] == [f"{s:02d}" for s in range(2, 22)]
    assert [p.name for p in files["valid"] + files["test"]] == ["wsj_2201.mrg", "wsj_2301.mrg"]
    with pytest.raises(AiaynError, match=r"^--treebank .*: no WSJ layout .* sections missing: 02, 03"):
        wsj_files(tmp_path / "wsj" / "00")
    with pytest.raises(AiaynError, match=r"^--treebank .*absent: no such directory$"):
        wsj_files(tmp_path / "absent")


def test_tree_files_are_read_normalised_and_empty_trees_counted(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "sub" / "a.MRG").write_text(TREE + "( (S (NP (-NONE- *))) )\n")
    (tmp_path / "d" / "b.txt").write_text("(S (NN x))\n")
    files = tree_files(tmp_path / "d", "--trees-train")
    assert [p.name for p in files] == ["a.MRG"]
    counts = Counter()
    (tree,) = load_trees(files, counts)
    assert str(tree) == "(S (NP (DT The) (NN index)) (VP (VBD fell)) (. .))"
    assert counts == {"read": 2, "empty": 1}
    assert tree_files(tmp_path / "d" / "b.txt", "--trees-test") == [tmp_path / "d" / "b.txt"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(AiaynError, match=r"^--trees-valid .*empty: a directory without .mrg files$"):
        tree_files(tmp_path / "empty", "--trees-valid")
    with pytest.raises(AiaynError, match=r"^--trees-test .*none.mrg: no such file$"):
        tree_files(tmp_path / "none.mrg", "--trees-test")


def test_the_held_out_split_is_prepare_s_seeded_one():
    trees = [next(parse_trees(f"(S (NN w{i}))", "t"))[1] for i in range(200)]
    train, valid, test = held_out(trees, seed=3)
    valid_idx, test_idx = held_out_indices(200, 3)
    assert [str(t) for t in valid] == [str(trees[i]) for i in sorted(int(i) for i in valid_idx)]
    assert [str(t) for t in test] == [str(trees[i]) for i in sorted(int(i) for i in test_idx)]
    assert (len(train), len(valid), len(test)) == (192, 4, 4)


@pytest.mark.parametrize(
    "sources", [{}, {"treebank": "a", "train": "b"}, {"valid": "v"}, {"train": "t", "synthetic": {}}]
)
def test_exactly_one_source_of_trees(sources):
    with pytest.raises(AiaynError, match=r"^give one source of trees"):
        gather({}, **sources)
