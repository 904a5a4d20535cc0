"""`aiayn variations` end to end at toy size, and the rules that make a re-run resume or skip."""

import csv
import json
import math

import pytest

from aiayn.apps.variations.run import Budget, finished, reference_config, train_row
from aiayn.apps.variations.table import COLUMNS
from aiayn.apps.variations.variants import select_rows
from aiayn.cli import main
from aiayn.errors import AiaynError
from toy_translation import toy_pairs, write_parallel

TOY = [
    "d_model=32", "d_ff=64", "n_heads=2", "n_layers=1", "max_tokens=500", "update_tokens=500",
    "warmup_steps=4", "eval_every=1000", "save_every=2", "log_every=1", "cpu_matmul=onednn", "max_len_b=8",
]  # fmt: skip


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    from aiayn.data.prepare import prepare
    from aiayn.data.sources import PairFiles, SplitFiles

    root = tmp_path_factory.mktemp("variations")
    train = write_parallel(toy_pairs(300, seed=1), root / "corpus.es", root / "corpus.en")
    dev = write_parallel(toy_pairs(12, seed=2), root / "dev.es", root / "dev.en")
    files = SplitFiles(PairFiles(*train), PairFiles(*dev))
    return prepare(root / "data", files, vocab_size=60, progress=False)


def _variations(data, out, steps):
    args = ["variations", str(data), "--out", str(out), "--rows", "E", "--steps", str(steps), "--no-progress"]
    return main(args + [a for item in TOY for a in ("--set", item)])


def _csv(out):
    with open(out / "table.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # end to end: prepare, then train and measure two rows, resume, skip
def test_two_rows_train_measure_resume_and_skip(toy_data, tmp_path, capsys):
    out = tmp_path / "table3"
    assert _variations(toy_data, out, 3) == 0
    rows = _csv(out)
    assert tuple(rows[0]) == COLUMNS and [r["row"] for r in rows] == ["base", "E-learned"]
    base, learned = rows
    assert base["train_steps"] == learned["train_steps"] == "3"
    assert [base[k] for k in ("N", "d_model", "h", "d_k", "P_drop")] == ["1", "32", "2", "16", "0.1"]
    # (E): learned positions add a (1024, 32) table to each side; nothing else differs
    extra = float(learned["params_M"]) - float(base["params_M"])
    assert extra == pytest.approx(2 * 1024 * 32 / 1e6, abs=2e-4)
    paper = [learned[k] for k in ("paper_ppl_dev", "paper_bleu_dev", "paper_params_M")]
    assert paper == ["4.92", "25.7", "65"]
    for row in rows:
        assert 1 < float(row["ppl_dev"]) < 200 and 0 <= float(row["bleu_dev"]) <= 100
    result = json.loads((out / "E-learned" / "result.json").read_text())
    assert result["dev_sentences"] == 12 and result["budget"] == {"steps": 3}
    assert len((out / "E-learned" / "eval" / "valid.hyp").read_text().splitlines()) == 12
    assert (out / "E-learned" / "model" / "config.json").is_file()
    markdown = (out / "table.md").read_text()
    assert "| `E-learned` | learned positions |" in markdown and "PPL (dev)" in markdown
    assert "updates of about 500 tokens, a 4-step warm-up" in markdown  # the --set recipe
    assert (out / "bleu_vs_params.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    capsys.readouterr()
    assert _variations(toy_data, out, 5) == 0  # a larger budget: both rows resume from step 3
    printed = capsys.readouterr()
    assert printed.out.count("resuming from") == printed.out.count("(step 3)") == 2
    assert [r["train_steps"] for r in _csv(out)] == ["5", "5"]
    metrics = (out / "base" / "metrics.jsonl").read_text()

    assert _variations(toy_data, out, 5) == 0  # the same budget again: nothing to do
    assert capsys.readouterr().out.count("finished before") == 2
    assert (out / "base" / "metrics.jsonl").read_text() == metrics
    with pytest.raises(AiaynError, match="holds 5 steps, more than --steps 4"):
        train_row(out / "base", toy_data, reference_config("tiny", TOY), Budget(steps=4), None, False)


def test_a_finished_row_with_other_settings_is_an_error_not_a_silent_reuse(tmp_path):
    config = reference_config("tiny")
    (tmp_path / "result.json").write_text(json.dumps({"budget": {"steps": 5}, "config": config.to_dict()}))
    assert finished(tmp_path, config, Budget(steps=5)) is not None
    assert finished(tmp_path, config, Budget(steps=9)) is None  # another budget: train on
    other = reference_config("tiny", ["dropout=0.3"])
    with pytest.raises(AiaynError, match="trained with other settings"):
        finished(tmp_path, other, Budget(steps=5))
    unused = reference_config("tiny", ["draft_tokens=7"])  # a setting no row's figures depend on
    assert finished(tmp_path, unused, Budget(steps=5)) is not None
    with pytest.raises(AiaynError, match="trained with other settings"):
        finished(tmp_path, reference_config("tiny", ["beam_size=2"]), Budget(steps=5))


def test_rows_begun_on_another_data_directory_are_an_error(toy_data, tmp_path, capsys):
    """Every row of the table is trained and measured on one data directory: checked before training."""
    import shutil

    other = shutil.copytree(toy_data, tmp_path / "other")
    out = tmp_path / "table3"
    (out / "E-learned").mkdir(parents=True)
    (out / "E-learned" / "run.json").write_text(json.dumps({"data_dir": str(other.resolve())}))
    assert _variations(toy_data, out, 3) == 2
    expected = (
        f"{out / 'E-learned'} was trained on {other.resolve()}, not {toy_data.resolve()}; use a new --out"
    )
    assert expected in capsys.readouterr().err
    assert not (out / "base").exists()


def test_a_data_directory_without_dev_pairs_is_an_error_before_training(toy_data, tmp_path, capsys):
    import shutil

    data = shutil.copytree(toy_data, tmp_path / "data")
    (data / "raw" / "valid.src").write_text("")
    assert _variations(data, tmp_path / "o", 3) == 2
    assert "raw/valid.src: no dev pairs; Table 3 is measured on the dev split" in capsys.readouterr().err
    assert not (tmp_path / "o" / "base").exists()


def test_budget_and_bad_input_errors(tmp_path, capsys):
    with pytest.raises(AiaynError, match="--steps N or --minutes M"):
        Budget()
    for budget, shown in ((dict(minutes=-1), "-1"), (dict(steps=0), "0"), (dict(minutes=math.inf), "inf")):
        with pytest.raises(AiaynError, match=f"must be a positive finite number, got {shown}$"):
            Budget(**budget)
    assert str(Budget(steps=1200)) == "1,200 steps" and str(Budget(minutes=2.5)) == "2.5 minutes"
    assert main(["variations", str(tmp_path), "--out", str(tmp_path / "o"), "--steps", "2"]) == 2
    assert "no spm.model; Table 3 is measured on a prepared dev split" in capsys.readouterr().err
    assert select_rows("E")[0].name == "base"


def test_tables_the_run_did_not_write_are_never_replaced(toy_data, tmp_path, capsys):
    """OUT holding someone's table.md (no base/ row beside it), or OUT a file: refused before training."""
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "table.md").write_text("my table\n")
    (tmp_path / "afile").write_text("mine\n")
    for out in ("o", "afile"):
        assert main(["variations", str(toy_data), "--out", str(tmp_path / out), "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "table.md is not from `aiayn variations` (no base/ beside it)" in err[0]
    assert "afile: a file is there, not a directory" in err[1] and len(err) == 2
    assert [p.name for p in (tmp_path / "o").iterdir()] == ["table.md"]
    assert (tmp_path / "o" / "table.md").read_text() == "my table\n"


def test_quickstart_and_variations_read_one_recipe_file(tmp_path, monkeypatch):
    """configs/quickstart.yaml is the recipe of quickstart and of the tiny reference row: both read it."""
    import aiayn.config
    from aiayn.apps.quickstart import QUICKSTART_STEPS, quickstart_config
    from aiayn.config import RunConfig
    from aiayn.configs import QUICKSTART, config_path

    recipe = RunConfig.named(QUICKSTART)
    assert quickstart_config() == recipe and recipe.train.max_steps == QUICKSTART_STEPS
    one_checkpoint = dict(keep_last=1, average_last=1)
    assert reference_config("tiny").train == quickstart_config(steps=None).train.replace(**one_checkpoint)
    assert reference_config("tiny").model == recipe.model
    edited = tmp_path / "quickstart.yaml"
    edited.write_text(config_path(QUICKSTART).read_text().replace("warmup_steps: 300", "warmup_steps: 123"))
    monkeypatch.setattr(
        aiayn.config, "config_path", lambda name: edited if name == QUICKSTART else config_path(name)
    )
    assert quickstart_config().train.warmup_steps == 123 == reference_config("tiny").train.warmup_steps
