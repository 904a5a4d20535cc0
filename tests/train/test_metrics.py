"""metrics.jsonl on resume: rows after the resume point are dropped, a torn last row is survived."""

import json

from aiayn.train.metrics import METRICS, MetricsLog


def test_truncate_keeps_earlier_rows_and_drops_a_torn_one(tmp_path):
    log = MetricsLog(tmp_path, enabled=True)
    for step in (10, 20, 30):
        log.log("train", step, {"loss": 1.0 / step})
    log.log("dev", 20, {"dev_loss": 2.0})
    log.close()
    path = tmp_path / METRICS
    with open(path, "a") as f:
        f.write('{"kind": "train", "step": 4')  # killed in the middle of writing a row
    MetricsLog(tmp_path, enabled=True).truncate(20)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["kind"], r["step"]) for r in rows] == [("train", 10), ("train", 20), ("dev", 20)]
    assert list(tmp_path.glob("*.tmp")) == []


def test_a_run_log_drops_rows_after_the_resume_step_and_knows_its_last_train_row(tmp_path, capsys):
    from aiayn.train.metrics import RunLog

    first = RunLog(tmp_path, True, 0, bar=False, max_steps=None, minutes=None)
    for step in (2, 4, 6):
        first.row("train", step, {"loss": 1.0})
    first.close()
    log = RunLog(tmp_path, True, 4, bar=False, max_steps=10, minutes=None)
    assert log.train_step == 4
    log.result("dev", 5, {"dev_loss": 2.0, "dev_ppl": 7.389})
    log.row("train", 5, {"loss": 0.5})
    log.close()
    assert log.train_step == 5
    rows = [json.loads(line) for line in (tmp_path / METRICS).read_text().splitlines()]
    assert [(r["kind"], r["step"]) for r in rows] == [("train", 2), ("train", 4), ("dev", 5), ("train", 5)]
    assert "step 5: dev_loss 2, dev_ppl 7.389" in capsys.readouterr().err


def test_only_rank_0_writes_or_talks(tmp_path, capsys):
    from aiayn.train.metrics import RunLog

    log = RunLog(tmp_path, False, 0, bar=True, max_steps=10, minutes=None)
    log.result("dev", 1, {"dev_loss": 2.0})
    log.bar(1, loss="1.0")
    log.close()
    assert not (tmp_path / METRICS).exists() and capsys.readouterr().err == ""
