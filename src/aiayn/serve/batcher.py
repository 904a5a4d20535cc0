"""Micro-batching: requests that arrive within a few milliseconds of each other share one model call.

Beam search over a batch of sentences (section 6.1) costs little more than over one sentence on
the same hardware, so under load a server that waits `wait_ms` for company and translates the
group together answers many more requests per second than one that translates them one at a time.

One asyncio worker waits for a job, then up to `wait_ms` for company (unless `max_texts` texts
wait already), and makes one model call in a single model thread, so the event loop never blocks
and the model is never called from two threads at once. A call takes the texts of the jobs in
line that share the first job's decoding options, in line order, up to `max_texts` texts and
`max_work` work (each text's cost, given by the caller; the server counts beam x longest output).
A job larger than that is cut into several calls: after its first it waits in a second line,
whose jobs take turns (round robin), and the worker takes its calls from the two lines in turn
(a call that cut a new job counts as the second line's turn). So a new request waits for about
one piece of the large ones, however many there are, and they still advance while new requests
keep coming.

Bounds, so that no caller holds the server for long:
- the line holds at most `max_queue` texts: beyond, `submit` raises `QueueFull` at once;
- a job whose caller stopped waiting (its timeout passed, or its task was cancelled: the client
  left) leaves the line at once; a running call is told to stop (`should_stop`, which the search
  asks before every step or every 8 native steps) once none of its callers waits any more, or the
  batcher stops;
- a failed call fails only the request it concerns: a `TextError` names the text (numbered again
  within its own request); any other error has each request of the call run again on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from aiayn.errors import TextError

log = logging.getLogger("aiayn.serve")
StopHook = Callable[[], bool]
# (texts, options, should_stop) -> one result per text; a text is whatever run_batch takes (the
# server's: a string with its prefix and constraints), the batcher only counts them.
RunBatch = Callable[[list[Any], Any, StopHook], list[Any]]


class QueueFull(Exception):
    """The line holds `max_queue` texts already: the caller should come back later."""


class Unavailable(Exception):
    """The batcher is not running (stopped, or its worker died): no model call will come."""


@dataclass(eq=False)
class _Job:
    texts: list[Any]
    costs: list[float]  # the work of each text (what max_work counts)
    options: Hashable  # jobs share a model call only when their options are equal
    future: asyncio.Future
    deadline: float  # time.monotonic() after which nobody waits for the answer
    results: list[Any] = field(default_factory=list)  # of texts[: len(results)], in order
    given_up: bool = False  # the caller stopped waiting (set on the event loop, read in the model thread)
    alone: bool = False  # run in calls of its own: a call it shared failed

    def gone(self, now: float) -> bool:
        return self.given_up or now >= self.deadline

    @property
    def left(self) -> int:
        return len(self.texts) - len(self.results)


@dataclass
class _Piece:
    """texts[start:stop] of a job, in one model call."""

    job: _Job
    start: int
    stop: int


class MicroBatcher:
    """`await batcher.submit(texts, options)` -> run_batch's results for `texts`, batched with others.

    max_texts=1 (or wait_ms=0 under light load) turns batching off: one text per model call.
    `stuck_after`: seconds a call may run past its callers' deadline before `health()` calls the
    model thread stuck (a search stops within one step of the deadline; a hung one never does).
    """

    def __init__(
        self,
        run_batch: RunBatch,
        wait_ms: float = 5.0,
        max_texts: int = 64,
        max_work: float = math.inf,
        max_queue: float = math.inf,
        stuck_after: float = 60.0,
    ):
        limits = {
            "max_texts": max_texts,
            "max_work": max_work,
            "max_queue": max_queue,
            "stuck_after": stuck_after,
        }
        if wait_ms < 0 or min(limits.values()) <= 0:
            raise ValueError(f"need wait_ms >= 0 and positive limits, got wait_ms={wait_ms}, {limits}")
        self.run_batch, self.wait_s, self.max_texts = run_batch, wait_ms / 1000.0, max_texts
        self.max_work, self.max_queue, self.stuck_after = max_work, max_queue, stuck_after
        self.calls = 0  # model calls made (for tests and monitoring)
        self._line: deque[_Job] = deque()  # new jobs, running ones included
        self._turns: deque[_Job] = deque()  # jobs cut into several calls, after their first
        self._turn_due = False  # whether the next call comes from _turns (when both lines hold jobs)
        self._from_turns = False  # whether the running call came from _turns
        self._running: list[_Job] = []
        self._call_deadline: float | None = None  # the latest deadline of the running call's jobs
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._worker: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def queued(self) -> int:
        """Jobs waiting for a model call (not counting those in the running one)."""
        return sum(job not in self._running for job in self._jobs())

    def _jobs(self) -> list[_Job]:
        return [*self._line, *self._turns]

    def _texts_waiting(self) -> int:
        return sum(job.left for job in self._jobs())

    async def start(self) -> None:
        self._wake, self._stopping = asyncio.Event(), False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiayn-model")
        self._worker = asyncio.create_task(self._work(), name="aiayn-batcher")
        self._worker.add_done_callback(self._worker_ended)

    async def stop(self) -> None:
        """Stop without waiting for the model thread: the callers get Unavailable, and the running
        call stops at its next step."""
        self._stopping = True
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        self._fail_all(Unavailable("the server is shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._worker = self._executor = None

    def health(self) -> str | None:
        """None while the batcher can serve; else why not (worker gone, model thread stuck)."""
        if self._worker is None or self._worker.done():
            return "the batcher is not running"
        overdue = time.monotonic() - (self._call_deadline or math.inf)
        if overdue > self.stuck_after:
            return f"the model thread is stuck: its call runs {overdue:.0f} s past its deadline"
        return None

    async def submit(
        self,
        texts: list[Any],
        options: Hashable,
        costs: list[float] | None = None,
        timeout: float | None = None,
    ) -> list[Any]:
        """run_batch's results for `texts`. Raises TimeoutError after `timeout` seconds (and the work
        stops), QueueFull at once when the line is full, Unavailable when the batcher is not running."""
        if self._worker is None or self._worker.done() or self._stopping:
            raise Unavailable("the batcher is not running")
        waiting = self._texts_waiting()
        if waiting + len(texts) > self.max_queue:
            raise QueueFull(f"{waiting} texts wait for the model; the limit is {self.max_queue:g}")
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        costs = [1.0] * len(texts) if costs is None else list(costs)
        job = _Job(list(texts), costs, options, asyncio.get_running_loop().create_future(), deadline)
        if not job.texts:
            return []
        self._line.append(job)
        self._wake.set()
        try:
            return await asyncio.wait_for(job.future, timeout)
        finally:  # answered, failed, timed out or cancelled: the job holds nothing any more
            self._leave(job)

    def _leave(self, job: _Job) -> None:
        job.given_up = True
        self._remove(job)

    def _remove(self, job: _Job) -> None:
        for line in (self._line, self._turns):
            if job in line:
                line.remove(job)

    def _fail(self, job: _Job, err: BaseException) -> None:
        if not job.future.done():
            job.future.set_exception(err)
        self._leave(job)

    def _fail_all(self, err: Exception) -> None:
        for job in self._jobs():
            self._fail(job, err)

    def _worker_ended(self, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is None:
            return
        log.error("the batcher's worker stopped", exc_info=task.exception())
        self._fail_all(Unavailable(f"the batcher's worker stopped: {type(task.exception()).__name__}"))

    async def _work(self) -> None:
        while True:
            await self._gather()
            await self._run(self._take())

    def _drop_gone(self) -> bool:
        """Fail the jobs whose deadline passed (TimeoutError); True if any job is left."""
        now = time.monotonic()
        for job in [job for job in self._jobs() if job.gone(now)]:
            self._fail(job, TimeoutError())
        return bool(self._line or self._turns)

    async def _gather(self) -> None:
        """Until a job waits, then up to wait_s for company (unless max_texts texts wait already)."""
        loop = asyncio.get_running_loop()
        while True:
            while not (self._line or self._turns):
                self._wake.clear()
                await self._wake.wait()
            end = loop.time() + self.wait_s
            while self._texts_waiting() < self.max_texts and (left := end - loop.time()) > 0:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), left)
            if self._drop_gone():
                return

    def _take(self) -> list[_Piece]:
        """The next call, from the two lines in turn: the first job's texts, then those of the jobs
        after it with the same options, in line order, up to max_texts texts and max_work work
        (at least one text)."""
        self._from_turns = bool(self._turns) and (self._turn_due or not self._line)
        line = self._turns if self._from_turns else self._line
        first = line[0]
        pieces: list[_Piece] = []
        texts, work = 0, 0.0
        for job in line:
            if job.options != first.options or (pieces and job.alone):
                continue
            start = stop = len(job.results)
            while stop < len(job.texts) and texts < self.max_texts:
                if texts and work + job.costs[stop] > self.max_work:
                    break
                work, texts, stop = work + job.costs[stop], texts + 1, stop + 1
            if stop > start:
                pieces.append(_Piece(job, start, stop))
            if first.alone or stop < len(job.texts):
                break
        return pieces

    async def _run(self, pieces: list[_Piece]) -> None:
        """One model call; each job gets its results, and goes to the back of the line if texts are left."""
        jobs = [piece.job for piece in pieces]
        texts = [text for p in pieces for text in p.job.texts[p.start : p.stop]]

        def should_stop() -> bool:  # asked in the model thread before every search step
            now = time.monotonic()
            return self._stopping or all(job.gone(now) for job in jobs)

        self.calls += 1
        self._running, self._call_deadline = jobs, max(job.deadline for job in jobs)
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(
                self._executor, self.run_batch, texts, jobs[0].options, should_stop
            )
        except Exception as err:  # noqa: BLE001 - it goes to its caller; the worker lives on
            if not should_stop():  # else every caller has gone: nobody to tell
                self._failed(pieces, err)
            return
        finally:
            self._running, self._call_deadline = [], None
        cut = any(piece.stop < len(piece.job.texts) for piece in pieces)
        self._turn_due = not self._from_turns and not cut  # a cut job had its turn already
        offset = 0
        for piece in pieces:
            job, count = piece.job, piece.stop - piece.start
            job.results.extend(results[offset : offset + count])
            offset += count
            if job.future.done():  # its caller has gone
                continue
            self._remove(job)
            if job.left:
                self._turns.append(job)  # round robin: the others in line go first
            else:
                job.future.set_result(job.results)

    def _failed(self, pieces: list[_Piece], err: Exception) -> None:
        """Fail the job the error is about; the others stay in line for the next call."""
        index = err.index if isinstance(err, TextError) else -1
        for piece in pieces:
            count = piece.stop - piece.start
            if 0 <= index < count:
                self._fail(piece.job, TextError(piece.start + index, err.reason))
                return
            index -= count
        if len(pieces) == 1:
            self._fail(pieces[0].job, err)
            return
        for piece in pieces:  # which request the error is about is unknown: try each on its own
            piece.job.alone = True
