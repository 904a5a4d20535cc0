"""Penn-Treebank trees: reading (.mrg and one per line), normalising, linearising both ways."""

from __future__ import annotations

import pytest

from aiayn.parse.trees import (
    Tree,
    TreeError,
    delinearise,
    linearise,
    normalise,
    parse_trees,
    read_tree_lines,
    read_trees,
    strip_function_tags,
)

MRG = """( (S
    (NP-SBJ-1 (DT The) (NN dog) )
    (VP (VBD was)
      (VP (VBN seen)
        (NP (-NONE- *-1) )
        (PP-LOC (IN in)
          (NP (DT the) (NN park) ))))
    (. .) ))
( (S (NP-SBJ (PRP It)) (VP (VBZ rains)) (. .)) )
"""


def one(text: str) -> Tree:
    (_, tree), *rest = list(parse_trees(text, "t"))
    assert not rest
    return tree


def test_reads_a_multi_line_mrg_file_with_start_lines(tmp_path):
    path = tmp_path / "wsj_0201.mrg"
    path.write_text(MRG)
    trees = read_trees(path)
    assert [line for line, _ in trees] == [1, 9]
    first = trees[0][1]
    assert first.label == "" and first.children[0].label == "S"
    assert first.words() == ["The", "dog", "was", "seen", "*-1", "in", "the", "park", "."]
    assert str(trees[1][1]) == "( (S (NP-SBJ (PRP It)) (VP (VBZ rains)) (. .)))"


def test_normalise_removes_traces_function_tags_and_the_empty_root():
    tree = normalise(next(parse_trees(MRG, "t"))[1])
    assert str(tree) == (
        "(S (NP (DT The) (NN dog)) (VP (VBD was) (VP (VBN seen) (PP (IN in) (NP (DT the) (NN park))))) (. .))"
    )
    # a constituent that dominates only traces goes with them; TOP above one constituent too
    tree = normalise(
        one("(TOP (S (NP (-NONE- *)) (VP (VBD left) (SBAR (-NONE- 0) (S (-NONE- *T*)))) (. .)))")
    )
    assert str(tree) == "(S (VP (VBD left)) (. .))"
    assert normalise(one("(S (NP (-NONE- *)))")) is None  # no word left
    # a root above several constituents, or over a bare word, is kept and called TOP
    assert str(normalise(one("( (NP (NN a)) (. .))"))) == "(TOP (NP (NN a)) (. .))"
    assert str(normalise(one("(NN hello)"))) == "(TOP (NN hello))"


def test_function_tags_are_cut_as_evalb_does():
    assert [strip_function_tags(x) for x in ("NP-SBJ-1", "NP=2", "PP-LOC-CLR", "S", "-NONE-", "-LRB-")] == [
        "NP", "NP", "PP", "S", "-NONE-", "-LRB-",
    ]  # fmt: skip


def test_one_tree_per_line_with_empty_lines_as_none(tmp_path):
    path = tmp_path / "hyp.txt"
    path.write_text("(S (NN a))\n\n(S (NN b) (NN c))\n")
    trees = read_tree_lines(path)
    assert [str(t) if t else None for t in trees] == ["(S (NN a))", None, "(S (NN b) (NN c))"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("(S (NP (DT the) (NN dog))\n(VP (VBZ barks))", r"f\.mrg:1: the bracket opened here is never closed"),
        ("(S (NN a)))", r"f\.mrg:1: '\)' closes no bracket"),
        ("(S (NN a))\nword (S (NN b))", r"f\.mrg:2: 'word' outside any bracket"),
        ("(S\n (NN a b))", r"f\.mrg:2: \(NN \.\.\.\) holds more than a word"),
        ("(S\n\n (NN a (NP (NN b))))", r"f\.mrg:3: \(NN a \.\.\.\) has a word and a constituent"),
        ("(S (NP ) (NN a))", r"f\.mrg:1: empty bracket \(NP\)"),
    ],
)
def test_malformed_trees_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "f.mrg"
    path.write_text(text)
    with pytest.raises(TreeError, match=message):
        read_trees(path)


def test_errors_in_one_tree_per_line_files_name_the_line(tmp_path):
    path = tmp_path / "hyp.txt"
    path.write_text("(S (NN a))\n(S (NN b)\n")
    with pytest.raises(TreeError, match=r"hyp\.txt:2: the bracket opened here is never closed"):
        read_tree_lines(path)
    path.write_text("(S (NN a)) (S (NN b))\n")
    with pytest.raises(TreeError, match=r"hyp\.txt:1: 2 trees on one line"):
        read_tree_lines(path)
    path.write_bytes(b"(S (NN a))\n(S (NN \xff))\n")
    with pytest.raises(TreeError, match=r"hyp\.txt:2: invalid UTF-8"):
        read_tree_lines(path)


def test_linearisation_as_vinyals_et_al():
    tree = one("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))")
    assert " ".join(linearise(tree)) == "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S"


def test_delinearise_inverts_linearise_with_words_and_tags():
    tree = normalise(next(parse_trees(MRG, "t"))[1])
    leaves = tree.preterminals()
    words, tags = [p.word for p in leaves], [p.label for p in leaves]
    assert str(delinearise(linearise(tree), words, tags)) == str(tree)
    plain = delinearise(linearise(tree), words)
    assert [p.label for p in plain.preterminals()] == ["XX"] * len(words)


@pytest.mark.parametrize(
    "tokens",
    [
        "(S XX XX )S",  # three words expected
        "(S XX XX XX XX )S",  # one too many
        "(S XX (NP XX )VP XX )S",  # mismatched label
        "(S XX XX XX",  # unclosed
        "(S XX XX XX )S )S",  # closes nothing
        "(S XX XX XX )S (S )S",  # a second tree
        "(S (NP )NP XX XX XX )S",  # empty constituent
        "XX (S XX XX )S",  # a word outside the tree
    ],
)
def test_delinearise_rejects_malformed_sequences(tokens):
    with pytest.raises(ValueError):
        delinearise(tokens.split(), ["a", "b", "c"])
