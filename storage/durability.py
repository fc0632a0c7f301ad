"""When written records become durable: the `--fsync` policy.

- `always`: every state-changing write is fsynced before its response leaves. Each write waits for an
  fsync that starts after it (on a worker thread, so the event loop keeps serving meanwhile).
- `batch`: group commit. Writes that arrive while an fsync is running wait for the next one, which
  covers all of them: one fsync per burst instead of one per write. Same guarantee as `always`.
- `never`: responses leave once the records are written to the OS. A killed server process loses
  nothing (the kernel holds the pages); a machine crash or power loss can lose the last writes.

`Durability.sync(logs)` returns when everything appended to `logs` so far is durable under the policy.
A failed fsync is fatal: the caller stops serving rather than acknowledge a write it cannot keep.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

POLICIES = ("always", "batch", "never")


class Durability:
    def __init__(self, policy: str = "batch", observe: Callable[[float], None] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown fsync policy {policy!r}; choose one of {', '.join(POLICIES)}")
        self.policy = policy
        self._pending: set = set()           # logs written since the running/last group commit started
        self._waiters: list[asyncio.Future] = []
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self.fsyncs = 0
        self.observe = observe                 # called with each fsync's seconds (metrics)

    def _timed(self, calls) -> Callable[[], None]:
        """The fsync calls as one function for a worker thread, reporting its duration."""
        def run():
            t0 = time.perf_counter()
            for c in calls:
                c()
            if self.observe is not None:
                self.observe(time.perf_counter() - t0)
        return run

    @property
    def needed(self) -> bool:
        return self.policy != "never"

    async def sync(self, logs: Iterable) -> None:
        logs = list(logs)
        if not self.needed or not logs:
            return
        loop = asyncio.get_running_loop()
        if self.policy == "always":
            async with self._lock:           # serialized: an empty claim means the last fsync covered us
                for lg in logs:
                    await loop.run_in_executor(None, self._timed([lg.take_sync()]))
                    self.fsyncs += 1
            return
        fut = loop.create_future()
        self._pending.update(logs)
        self._waiters.append(fut)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._group_commit())
        await fut

    async def _group_commit(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiters:
            logs, self._pending = self._pending, set()
            waiters, self._waiters = self._waiters, []
            try:
                calls = [lg.take_sync() for lg in logs]
                await loop.run_in_executor(None, self._timed(calls))
                self.fsyncs += 1
            except BaseException as exc:
                for w in waiters:
                    if not w.done():
                        w.set_exception(exc)
                continue
            for w in waiters:
                if not w.done():
                    w.set_result(None)
