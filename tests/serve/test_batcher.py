"""MicroBatcher: grouping, order, options, errors, timeouts (no model: a recording function)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from aiayn.serve.batcher import MicroBatcher


class Recorder:
    """run_batch that records each call and answers text.upper() (or raises for 'boom')."""

    def __init__(self):
        self.calls: list[tuple[list[str], object]] = []
        self.threads: set[str] = set()

    def __call__(self, texts, options):
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
    assert [c[0] for c in rec.calls] == [["a"], ["b"], ["c", "d"]]  # a larger request still goes whole


def test_waits_for_late_requests():
    rec = Recorder()
    batcher = MicroBatcher(rec, wait_ms=10_000, max_texts=2)  # returns as soon as 2 texts are there

    async def body():
        first = asyncio.create_task(batcher.submit(["a"], 0))
        await asyncio.sleep(0.05)
        return await asyncio.gather(first, batcher.submit(["b"], 0))

    assert asyncio.run(_with_batcher(batcher, body)) == [["A/0"], ["B/0"]]
    assert rec.calls == [(["a", "b"], 0)]


def test_an_error_reaches_its_callers_and_the_worker_lives_on():
    rec = Recorder()
    results = _run(MicroBatcher(rec, wait_ms=0), [(["x"], 1), (["boom"], 1), (["y"], 2)])
    assert isinstance(results[0], ValueError) and isinstance(results[1], ValueError)
    assert results[2] == ["Y/2"]


def test_abandoned_jobs_are_dropped():
    gate, rec = threading.Event(), Recorder()

    def slow(texts, options):
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
        MicroBatcher(lambda t, o: t, max_texts=0)
    with pytest.raises(RuntimeError, match="start"):
        asyncio.run(MicroBatcher(lambda t, o: t).submit(["a"], 0))
