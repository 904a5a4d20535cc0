"""Micro-batching: requests that arrive within a few milliseconds of each other share one model call.

Beam search over a batch of sentences (section 6.1) costs little more than over one sentence on
the same hardware, so under load a server that waits `wait_ms` for company and translates the
group together answers many more requests per second than one that translates them one at a time.

One asyncio worker collects queued jobs for up to `wait_ms` (or until `max_texts` texts), splits
them into groups with the same decoding options, and runs each group in a single model thread, so
the event loop never blocks and the model is never called from two threads at once. A job whose
caller has given up (timed out) before its turn is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

RunBatch = Callable[[list[str], Any], list[Any]]  # (texts, options) -> one result per text


@dataclass
class _Job:
    texts: list[str]
    options: Hashable  # jobs share a model call only when their options are equal
    future: asyncio.Future


class MicroBatcher:
    """`await batcher.submit(texts, options)` -> run_batch's results for `texts`, batched with others.

    max_texts=1 (or wait_ms=0 under light load) turns batching off: one request per model call.
    """

    def __init__(self, run_batch: RunBatch, wait_ms: float = 5.0, max_texts: int = 64):
        if wait_ms < 0 or max_texts < 1:
            raise ValueError(f"need wait_ms >= 0 and max_texts >= 1, got {wait_ms}, {max_texts}")
        self.run_batch, self.wait_s, self.max_texts = run_batch, wait_ms / 1000.0, max_texts
        self.calls = 0  # model calls made (for tests and monitoring)
        self._queue: asyncio.Queue[_Job] | None = None
        self._held: deque[_Job] = deque()  # taken from the queue but left for the next batch
        self._worker: asyncio.Task | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def queued(self) -> int:
        """Jobs waiting for a model call."""
        return len(self._held) + (self._queue.qsize() if self._queue is not None else 0)

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiayn-model")
        self._worker = asyncio.create_task(self._work(), name="aiayn-batcher")

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self._worker = self._executor = None

    async def submit(self, texts: list[str], options: Hashable) -> list[Any]:
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Job(list(texts), options, future))
        return await future

    async def _work(self) -> None:
        while True:
            jobs = await self._collect()
            for group in _group(jobs):
                await self._run(group)

    async def _next(self, timeout: float | None) -> _Job | None:
        """The next job (held ones first), waiting at most `timeout` seconds (None: forever)."""
        if self._held:
            return self._held.popleft()
        if not self._queue.empty() or timeout is None:
            return await self._queue.get()
        if timeout <= 0:
            return None
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None

    async def _collect(self) -> list[_Job]:
        """One job, then whatever arrives within wait_s, up to max_texts texts in all."""
        loop = asyncio.get_running_loop()
        jobs = [await self._next(None)]
        count, deadline = len(jobs[0].texts), loop.time() + self.wait_s
        while count < self.max_texts:
            job = await self._next(deadline - loop.time())
            if job is None:
                break
            if count + len(job.texts) > self.max_texts:
                self._held.appendleft(job)
                break
            jobs.append(job)
            count += len(job.texts)
        return jobs

    async def _run(self, jobs: list[_Job]) -> None:
        """One model call for jobs with equal options; results (or the error) go to each caller."""
        jobs = [job for job in jobs if not job.future.done()]
        if not jobs:
            return
        texts = [text for job in jobs for text in job.texts]
        loop = asyncio.get_running_loop()
        self.calls += 1
        try:
            results = await loop.run_in_executor(self._executor, self.run_batch, texts, jobs[0].options)
        except Exception as err:  # noqa: BLE001 - the callers get it; the worker lives on
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(err)
            return
        start = 0
        for job in jobs:
            if not job.future.done():
                job.future.set_result(results[start : start + len(job.texts)])
            start += len(job.texts)


def _group(jobs: list[_Job]) -> list[list[_Job]]:
    """Jobs grouped by options, in order of first arrival."""
    groups: dict[Hashable, list[_Job]] = {}
    for job in jobs:
        groups.setdefault(job.options, []).append(job)
    return list(groups.values())
