"""The one decode-a-split-and-score routine (aiayn.evaluate.split) on a stand-in task: what it hands
the task, the limit, the output directory checked before any model work, and the files it writes."""

import json

import pytest

from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError
from aiayn.evaluate.split import SCORES_FILE, Split, evaluate_split


class Upper:
    """Decodes a line by upper-casing it; scores the share of hypotheses equal to their reference."""

    verb = "shouting"

    def __init__(self):
        self.calls = []

    def default_decode(self):
        return DecodeConfig(beam_size=2)

    def read(self, data, split, limit):
        path = data.raw(split, "src")
        lines = path.read_text(encoding="utf-8").splitlines()[:limit]
        return Split(lines, ["A", "B", "c"][: len(lines)], path)

    def load(self, model, data, device, int8):
        self.calls.append(("load", model, device, int8))
        return str.upper

    def decode(self, decoder, split, options, progress):
        self.calls.append(("decode", options.beam_size))
        progress(len(split.inputs))
        return [decoder(line) for line in split.inputs]

    def score(self, hypotheses, references):
        same = sum(h == r for h, r in zip(hypotheses, references, strict=True))
        return {"same": same / len(references)}


@pytest.fixture
def data(tmp_path):
    (tmp_path / "data" / "raw").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "test.src").write_text("a\nb\nc\n", encoding="utf-8")
    return tmp_path / "data"


def test_the_task_decodes_and_scores_and_the_files_are_written(data, tmp_path):
    task = Upper()
    scores = evaluate_split(task, "MODEL", data, out_dir=tmp_path / "eval", device="cpu", int8=True)
    assert task.calls == [("load", "MODEL", "cpu", True), ("decode", 2)]  # the task's own search
    assert scores["split"] == "test" and scores["same"] == pytest.approx(2 / 3)
    assert scores["decode"]["beam_size"] == 2 and scores["int8"] is True
    assert (tmp_path / "eval" / "test.hyp").read_text(encoding="utf-8") == "A\nB\nC\n"
    assert scores["hypotheses"] == str(tmp_path / "eval" / "test.hyp")
    assert json.loads((tmp_path / "eval" / SCORES_FILE).read_text()) == scores


def test_a_given_search_and_limit_are_used(data):
    task = Upper()
    scores = evaluate_split(task, "MODEL", data, decode_config=DecodeConfig(beam_size=5), limit=2)
    assert task.calls[1] == ("decode", 5) and scores["same"] == 1.0 and "int8" not in scores


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(data, limit):
    with pytest.raises(AiaynError, match=f"limit must be a positive number of sentences, got {limit}"):
        evaluate_split(Upper(), "MODEL", data, limit=limit)


def test_an_output_path_that_is_a_file_fails_before_the_model_is_loaded(data, tmp_path):
    (tmp_path / "taken").write_text("")
    task = Upper()
    with pytest.raises(AiaynError, match="a file is there, not a directory"):
        evaluate_split(task, "MODEL", data, out_dir=tmp_path / "taken")
    assert task.calls == []
