"""The budget clock (aiayn.train.eta): the rest of a step budget predicted from the run's own timed
updates, pauses left out, capped by a time budget, and said in one line."""

from __future__ import annotations

import time

import pytest

from aiayn.train.eta import SKIP, SPAN, BudgetClock, duration


@pytest.fixture
def now(monkeypatch):
    """time.monotonic() returns now[0]; the test moves it."""
    now = [500.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    return now


@pytest.mark.parametrize(
    "seconds, said",
    [
        (-3, "0 s"),
        (45.4, "45 s"),
        (89, "89 s"),
        (90, "2 min"),
        (3569, "59 min"),
        (3599, "1 h 00 min"),
        (3900, "1 h 05 min"),
    ],
)
def test_durations_are_said_in_seconds_minutes_or_hours(seconds, said):
    assert duration(seconds) == said


def run(clock: BudgetClock, now: list[float], pause_at: int | None = None) -> dict | None:
    """Updates 1 .. SKIP + SPAN of 3 s and 100 tokens each (a 6 s pause after update `pause_at`);
    the clock's answer at the last."""
    row = None
    for step in range(1, SKIP + SPAN + 1):
        now[0] += 3.0
        if step == pause_at:
            now[0] += 6.0
            clock.pause(6.0)
        row = clock.after_update(step, 100 * step)
        assert row is None or step == SKIP + SPAN
    return row


def test_the_timed_span_predicts_the_rest_of_the_step_budget(now):
    row = run(BudgetClock(0, 1000, None, started=now[0]), now, pause_at=SKIP + 3)
    assert row == {
        "s_per_update": 3.0,
        "tok_s": pytest.approx(100 / 3),
        "seconds_left": 3.0 * (1000 - SKIP - SPAN),
    }
    assert run(BudgetClock(0, None, None, started=now[0]), now) is None  # no step budget: nothing to say


def test_a_time_budget_caps_the_prediction(now):
    started = now[0]
    row = run(BudgetClock(0, 10**6, 10.0, started=started, rate="img_s"), now)
    assert row["img_s"] == pytest.approx(100 / 3)
    assert row["seconds_left"] == pytest.approx(600 - (now[0] - started))


def test_the_message_says_speed_updates_and_how_long(now):
    clock = BudgetClock(5, 1000, None, started=now[0], unit="images")
    message = clock.message({"s_per_update": 0.5, "tok_s": 1234.4, "seconds_left": 5400}, 5 + SKIP + SPAN)
    assert message.startswith(
        f"timing: 0.50 s per update (1,234 images/s) over updates {5 + SKIP + 1}-{5 + SKIP + SPAN}: "
        "the rest takes about 1 h 30 min on this machine (until about "
    )
