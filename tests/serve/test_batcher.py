"""MicroBatcher: grouping, order, options, errors, timeouts (no model: a recording function)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from aiayn.decode.rules import SearchStopped
from aiayn.errors import TextError
from aiayn.serve.batcher import MicroBatcher, QueueFull, Unavailable


class Recorder:
    """run_batch that records each call and answers text.upper() (or raises for 'boom')."""

    def __init__(self):
        self.calls: list[tuple[list[str], object]] = []
        self.threads: set[str] = set()

    def __call__(self, texts, options, should_stop=None):
        self.calls.append((list(texts), options))
        self.threads.add(threading.current_thread().name)
        if "boom" in texts:
            raise ValueError("boom")
        return [f"{t.upper()}/{options}" for t in texts]


async def _with_batcher(batcher, body):
    await batcher.start()
    try:
        return await body()
    finally:
        await batcher.stop()


def _run(batcher, jobs):
    """Submit all jobs at once; their results (or exceptions) in order."""

    async def body():
        return await asyncio.gather(*(batcher.submit(t, o) for t, o in jobs), return_exceptions=True)

    return asyncio.run(_with_batcher(batcher, body))


def test_simultaneous_requests_share_one_call_in_order():
    rec = Recorder()
    jobs = [(["a", "b"], 1), (["c"], 1), (["d", "e", "f"], 1)]
    results = _run(MicroBatcher(rec, wait_ms=0), jobs)
    assert results == [["A/1", "B/1"], ["C/1"], ["D/1", "E/1", "F/1"]]
    assert rec.calls == [(["a", "b", "c", "d", "e", "f"], 1)]
    assert rec.threads == {"aiayn-model_0"}  # the model runs off the event loop's thread


def test_different_options_never_share_a_call():
    rec = Recorder()
    results = _run(MicroBatcher(rec, wait_ms=0), [(["a"], 1), (["b"], 2), (["c"], 1)])
    assert results == [["A/1"], ["B/2"], ["C/1"]]
    assert rec.calls == [(["a", "c"], 1), (["b"], 2)]


def test_max_texts_splits_batches_and_one_turns_batching_off():
    rec = Recorder()
    _run(
        MicroBatcher(rec, wait_ms=0, max_texts=3), [(["a", "b"], 0), (["c"], 0), (["d", "e"], 0), (["f"], 0)]
    )
    assert [c[0] for c in rec.calls] == [["a", "b", "c"], ["d", "e", "f"]]
    rec = Recorder()
    _run(MicroBatcher(rec, wait_ms=50, max_texts=1), [(["a"], 0), (["b"], 0), (["c", "d"], 0)])
    assert [c[0] for c in rec.calls] == [["a"], ["b"], ["c"], ["d"]]  # a larger request is cut


def test_waits_for_late_requests():
    rec = Recorder()
    batcher = MicroBatcher(rec, wait_ms=10_000, max_texts=2)  # returns as soon as 2 texts are there

    async def body():
        first = asyncio.create_task(batcher.submit(["a"], 0))
        await asyncio.sleep(0.05)
        return await asyncio.gather(first, batcher.submit(["b"], 0))

    assert asyncio.run(_with_batcher(batcher, body)) == [["A/0"], ["B/0"]]
    assert rec.calls == [(["a", "b"], 0)]


def test_an_error_reaches_only_its_caller_and_the_worker_lives_on():
    rec = Recorder()
    results = _run(MicroBatcher(rec, wait_ms=0), [(["x"], 1), (["boom"], 1), (["y"], 1), (["z"], 2)])
    assert results[0] == ["X/1"] and isinstance(results[1], ValueError) and results[2:] == [["Y/1"], ["Z/2"]]
    # the shared call failed; then each request ran on its own, so only the culprit failed
    assert [c[0] for c in rec.calls] == [["x", "boom", "y"], ["x"], ["boom"], ["y"], ["z"]]


def test_abandoned_jobs_are_dropped():
    gate, rec = threading.Event(), Recorder()

    def slow(texts, options, should_stop):
        gate.wait(timeout=30)
        return rec(texts, options)

    batcher = MicroBatcher(slow, wait_ms=0)

    async def body():
        running = asyncio.create_task(batcher.submit(["a"], 0))
        await asyncio.sleep(0.05)  # "a" is in the model thread now
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batcher.submit(["gave up"], 0), 0.01)
        gate.set()
        return await asyncio.gather(running, batcher.submit(["b"], 0))

    assert asyncio.run(_with_batcher(batcher, body)) == [["A/0"], ["B/0"]]
    assert [c[0] for c in rec.calls] == [["a"], ["b"]]


def test_bad_settings_and_unstarted_use():
    with pytest.raises(ValueError):
        MicroBatcher(lambda t, o, s: t, max_texts=0)
    with pytest.raises(Unavailable, match="not running"):
        asyncio.run(MicroBatcher(lambda t, o, s: t).submit(["a"], 0))


class Blocking:
    """run_batch that records its calls and waits, until `gate` is set or (if it listens) told to stop."""

    def __init__(self, listens: bool = True):
        self.gate, self.entered, self.stopped = threading.Event(), threading.Event(), threading.Event()
        self.listens, self.calls, self.hooks = listens, [], []

    def __call__(self, texts, options, should_stop):
        self.calls.append(list(texts))
        self.hooks.append(should_stop)
        self.entered.set()
        while not self.gate.wait(timeout=0.005):
            if self.listens and should_stop():
                self.stopped.set()
                raise SearchStopped("stopped")
        return [f"{t.upper()}/{options}" for t in texts]


async def _until(condition, seconds: float = 30.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never came true")


def test_a_text_error_fails_only_its_request_numbered_within_it():
    def run(texts, options, should_stop):
        if "bad" in texts:
            raise TextError(texts.index("bad"), "the model's scores are not finite")
        return [t.upper() for t in texts]

    jobs = [(["x"], 1), (["y", "bad"], 1), (["z"], 1)]
    results = _run(MicroBatcher(run, wait_ms=0), jobs)
    assert results[0] == ["X"] and results[2] == ["Z"]
    assert isinstance(results[1], TextError) and results[1].index == 1  # "bad" is the 2nd of its request
    assert str(results[1]) == "text 2: the model's scores are not finite"


def test_a_large_request_takes_turns_with_smaller_ones():
    run = Blocking()
    batcher = MicroBatcher(run, wait_ms=0, max_work=20)

    async def body():
        big = asyncio.create_task(batcher.submit(["a", "b", "c", "d"], 1, costs=[10, 10, 10, 10]))
        await _until(run.entered.is_set)  # "a" and "b" are in the model thread now
        small = asyncio.create_task(batcher.submit(["s"], 2, costs=[1]))
        await _until(lambda: batcher.queued == 1)
        run.gate.set()
        return await asyncio.gather(big, small)

    assert asyncio.run(_with_batcher(batcher, body)) == [["A/1", "B/1", "C/1", "D/1"], ["S/2"]]
    assert run.calls == [["a", "b"], ["s"], ["c", "d"]]  # the small request did not wait for "c" and "d"


def test_a_call_stops_when_its_last_caller_gives_up():
    run = Blocking()
    batcher = MicroBatcher(run, wait_ms=50)

    async def body():
        patient = asyncio.create_task(batcher.submit(["a"], 0))
        await asyncio.sleep(0)  # "a" joins the line first
        with pytest.raises(TimeoutError):  # shares the call with "a", which still waits
            await batcher.submit(["b"], 0, timeout=0.2)
        assert run.calls == [["a", "b"]] and not run.hooks[0]()
        patient.cancel()  # as when its client disconnects
        await _until(run.stopped.is_set)
        assert batcher.queued == 0 and batcher.health() is None

    asyncio.run(_with_batcher(batcher, body))


def test_the_line_is_bounded_and_timed_out_jobs_leave_it():
    run = Blocking()
    batcher = MicroBatcher(run, wait_ms=0, max_queue=3)

    async def body():
        first = asyncio.create_task(batcher.submit(["a"], 0))
        await _until(run.entered.is_set)
        with pytest.raises(TimeoutError):
            await batcher.submit(["b", "c"], 0, timeout=0.05)
        second = asyncio.create_task(batcher.submit(["d", "e"], 0))  # the room "b", "c" held
        await _until(lambda: batcher.queued == 1)
        with pytest.raises(QueueFull, match="3 texts wait for the model; the limit is 3"):
            await batcher.submit(["f"], 0)
        run.gate.set()
        return await asyncio.gather(first, second)

    assert asyncio.run(_with_batcher(batcher, body)) == [["A/0"], ["D/0", "E/0"]]
    assert run.calls == [["a"], ["d", "e"]]  # "b" and "c" never reached the model


def test_stop_answers_every_caller_without_waiting_for_the_model():
    run = Blocking(listens=False)  # a model call that does not stop when told
    batcher = MicroBatcher(run, wait_ms=0)

    async def body():
        await batcher.start()
        jobs = [asyncio.create_task(batcher.submit([t], 0)) for t in ("a", "b")]
        await _until(run.entered.is_set)
        await batcher.stop()
        assert not run.gate.is_set() and run.hooks[0]()  # stop() came back; the call is told to stop
        results = await asyncio.gather(*jobs, return_exceptions=True)
        run.gate.set()
        return results

    results = asyncio.run(body())
    assert all(isinstance(r, Unavailable) and "shutting down" in str(r) for r in results)


def test_health_notices_a_stuck_model_thread():
    run = Blocking(listens=False)
    batcher = MicroBatcher(run, wait_ms=0, stuck_after=0.1)

    async def body():
        assert batcher.health() is None
        with pytest.raises(TimeoutError):
            await batcher.submit(["a"], 0, timeout=0.05)
        await _until(lambda: batcher.health() is not None)
        assert batcher.health().startswith("the model thread is stuck: its call runs ")
        run.gate.set()
        await _until(lambda: batcher.health() is None)

    asyncio.run(_with_batcher(batcher, body))
