"""A bounded queue in front of the models, which batches requests that arrive together.

Requests wait in one queue for a small pool of worker threads (one by default: PyTorch already
spreads one forward pass over every core). When a worker is free it takes the oldest request and
every other waiting request of the same kind (same model, task and settings), up to
`max_batch_texts` inputs, and runs them in one call, so under load the model sees batches and
no request waits for a timer. At most `max_pending` requests are queued or running; one more is
refused at once (`Overloaded`, answered 503), so a burst cannot grow memory without bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

RunBatch = Callable[[list[Any]], Sequence[Any]]  # inputs -> one output per input, in order


class Overloaded(RuntimeError):
    """The queue is full; the client should retry later."""


@dataclass
class _Job:
    key: Hashable
    run: RunBatch
    inputs: list[Any]
    future: asyncio.Future


class BatchingQueue:
    """Run `submit`ted jobs on worker threads, batching waiting jobs that share a key.

    Use from one event loop: `start()` in the server's startup, `await submit(...)` in request
    handlers, `await stop()` at shutdown.
    """

    def __init__(self, workers: int, max_pending: int, max_batch_texts: int) -> None:
        self.workers = workers
        self.max_pending = max_pending
        self.max_batch_texts = max_batch_texts
        self._waiting: deque[_Job] = deque()
        self._num_pending = 0  # waiting or running
        self._condition: asyncio.Condition | None = None
        self._tasks: list[asyncio.Task] = []
        self._executor: ThreadPoolExecutor | None = None
        # How many calls ran how many inputs (bounded: sizes are 1..max_batch_texts, or one
        # bigger request); for the health endpoint and the batching measurement.
        self.batch_sizes: Counter[int] = Counter()

    def start(self) -> None:
        self._condition = asyncio.Condition()
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="bertlab-serve")
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self.workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._executor.shutdown(wait=True, cancel_futures=True)

    @property
    def num_pending(self) -> int:
        return self._num_pending

    async def submit(self, key: Hashable, run: RunBatch, inputs: Sequence[Any]) -> list[Any]:
        """Run `run(inputs)` (batched with other waiting jobs of the same `key`); its outputs.

        Raises:
            Overloaded: `max_pending` requests are already queued or running.
            Whatever `run` raises: a ValueError is this job's own, never a batch neighbour's.
        """
        if self._num_pending >= self.max_pending:
            raise Overloaded(
                f"the server is busy ({self._num_pending} requests queued or running, "
                f"at most {self.max_pending}); retry in a moment"
            )
        self._num_pending += 1
        try:
            future = asyncio.get_running_loop().create_future()
            async with self._condition:
                self._waiting.append(_Job(key, run, list(inputs), future))
                self._condition.notify()
            return await future
        finally:
            self._num_pending -= 1

    def _take_batch(self) -> list[_Job]:
        """The oldest waiting job and the waiting jobs of its key that fit beside it."""
        first = self._waiting.popleft()
        batch, size, kept = [first], len(first.inputs), deque()
        while self._waiting:
            job = self._waiting.popleft()
            if job.key == first.key and size + len(job.inputs) <= self.max_batch_texts:
                batch.append(job)
                size += len(job.inputs)
            else:
                kept.append(job)
        self._waiting = kept
        return [job for job in batch if not job.future.done()]  # skip cancelled requests

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            async with self._condition:
                await self._condition.wait_for(lambda: bool(self._waiting))
                batch = self._take_batch()
            if batch:
                await self._run(loop, batch)

    async def _run(self, loop: asyncio.AbstractEventLoop, batch: list[_Job]) -> None:
        inputs = [item for job in batch for item in job.inputs]
        self.batch_sizes[len(inputs)] += 1
        try:
            outputs = await loop.run_in_executor(self._executor, batch[0].run, inputs)
        except ValueError as error:
            if len(batch) == 1:
                _settle(batch[0], error=error)
                return
            for job in batch:  # find whose input it was: run each job alone
                await self._run(loop, [job])
            return
        except Exception as error:  # a fault of the server, not of one input: every job gets it
            logger.exception("a batch of %d inputs failed", len(inputs))
            for job in batch:
                _settle(job, error=error)
            return
        start = 0
        for job in batch:
            _settle(job, result=list(outputs[start : start + len(job.inputs)]))
            start += len(job.inputs)


def _settle(job: _Job, result: Any = None, error: BaseException | None = None) -> None:
    if job.future.done():  # the client went away
        return
    if error is not None:
        job.future.set_exception(error)
    else:
        job.future.set_result(result)
