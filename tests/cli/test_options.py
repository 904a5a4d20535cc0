"""The options several commands share (aiayn.cli.options): --device and counts checked as they are
parsed, the flags --document refuses, and evaluate's one call of its evaluator."""

import argparse
from pathlib import Path

import pytest
import torch

from aiayn.cli.options import check_document_flags, counting_number, device_name, evaluate_on_split
from aiayn.errors import AiaynError


def test_counts_are_integers_of_one_or_more():
    assert counting_number("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'x' is not an integer$"):
        counting_number("x")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be 1 or more, got 0$"):
        counting_number("0")


def test_devices_are_checked_against_this_machine():
    assert device_name("cpu") == "cpu"
    with pytest.raises(argparse.ArgumentTypeError, match=r"is not a device \(cpu, cuda, cuda:N, mps\)$"):
        device_name("gpu")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^meta: aiayn runs on cpu, cuda or mps, not meta$"):
        device_name("meta")
    if not torch.cuda.is_available():
        with pytest.raises(argparse.ArgumentTypeError, match=r"^cuda:1: no CUDA GPU here"):
            device_name("cuda:1")


def document_args(**given):
    flags = {"document": True, "nbest": 1, "align": False, "prefix_file": None, "constraints_file": None}
    return argparse.Namespace(**(flags | given))


def test_document_refuses_the_per_line_flags_by_name():
    check_document_flags(document_args())
    check_document_flags(document_args(document=False, nbest=3, align=True))
    with pytest.raises(AiaynError, match=r"one whole text; --nbest, --align apply to input lines$"):
        check_document_flags(document_args(nbest=2, align=True))


@pytest.mark.parametrize("out", [None, "elsewhere"])
def test_evaluate_calls_its_evaluator_with_the_arguments_and_says_where_the_scores_are(out):
    seen = {}

    def evaluator(model, data, split, options, **kwargs):
        seen.update(model=model, data=data, split=split, options=options, **kwargs)
        return {"bleu": 1.0}

    args = argparse.Namespace(model_dir="m", data_dir="d", split="valid", out=out, device="cpu", limit=3)
    args.no_progress, args.int8 = True, False
    scores = evaluate_on_split(evaluator, args, "OPTIONS")
    want_out = out or str(Path("m") / "eval")
    assert seen == {"model": "m", "data": "d", "split": "valid", "options": "OPTIONS", "out_dir": want_out,
                    "device": "cpu", "limit": 3, "progress": False, "int8": False}  # fmt: skip
    assert scores == {"bleu": 1.0, "scores": str(Path(want_out) / "scores.json")}
