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
