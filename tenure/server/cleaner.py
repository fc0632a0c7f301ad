"""The log cleaner's schedule (storage/compaction.py does the cleaning).

With --data-dir, every cleaner_interval_ms one bounded pass (cleaner_pass_bytes of segment reads in all)
over the partitions of compacted topics, round robin; parsing runs on a worker thread, every file and
segment-list change on the server's loop. `compact_now` cleans until there is nothing left to do. The cleaning
modules (storage/compaction.py, storage/cleaning.py) are imported at the first pass, or when the stats are first
asked for (deferred.py): a server whose cleaner never runs never imports them."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tenure.deferred import deferred

if TYPE_CHECKING:
    from tenure.storage.compaction import CleanStats, CompactionPolicy, Compactor
    from tenure.storage.segments import SegmentLog

log = logging.getLogger("tenure.server")
compaction = deferred("tenure.storage.compaction")      # the log cleaner's passes: at the first one
segments = deferred("tenure.storage.segments")          # (a server with --data-dir has imported it at start)


class _Periodic:
    """A pass every interval_ms on the running loop (0: never): `start`, and `stop` before the logs close. A
    subclass sets interval_ms and writes `_loop`."""
    interval_ms: int
    _task: asyncio.Task | None = None

    def start(self) -> None:
        if self.interval_ms > 0:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self, timeout_s: float) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=timeout_s)
            self._task = None

    async def _loop(self) -> None:
        raise NotImplementedError


class LogCleaner(_Periodic):
    def __init__(self, topics, clock_ms: Callable[[], int], *, interval_ms: int, pass_bytes: int) -> None:
        self.topics = topics
        self.clock_ms = clock_ms
        self.interval_ms, self.pass_bytes = interval_ms, pass_bytes
        self._stats: CleanStats | None = None     # what the log cleaner has done since start (`stats`)
        self._lock = asyncio.Lock()
        self._next = 0
        self._compactor: Compactor | None = None
        self._task: asyncio.Task | None = None

    @property
    def stats(self) -> CleanStats:
        """What the log cleaner has done since start."""
        if self._stats is None:
            self._stats = compaction.CleanStats()
        return self._stats

    def _compacted_logs(self) -> list[tuple[SegmentLog, CompactionPolicy]]:
        out = []
        for topic in self.topics.all():
            if compaction.is_compacted(topic.config("cleanup.policy")):
                policy = compaction.CompactionPolicy.from_configs(topic.config)
                out += [(plog, policy) for plog in topic.partitions if isinstance(plog, segments.SegmentLog)]
        return out

    @property
    def compactor(self) -> Compactor:
        if self._compactor is None:
            self._compactor = compaction.Compactor(clock_ms=self.clock_ms, pass_bytes=self.pass_bytes)
        return self._compactor

    async def clean_pass(self, budget: int | None) -> CleanStats:
        """One pass over the compacted logs, starting where the last pass stopped."""
        total: CleanStats = compaction.CleanStats()
        async with self._lock:
            logs = self._compacted_logs()
            for k in range(len(logs)):
                i = (self._next + k) % len(logs)
                left = None if budget is None else budget - total.bytes_read
                if left is not None and left <= 0:
                    total.more = True
                    self._next = i
                    break
                plog, policy = logs[i]
                total += await self.compactor.clean_async(plog, policy, 1 << 62 if left is None else left)
        stats = self.stats
        stats += total                            # (in place: the stats object a caller holds adds up)
        return total

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            try:
                st = await self.clean_pass(self.pass_bytes)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner pass failed; the next one runs in %d ms", self.interval_ms)
                continue
            if st.groups_cleaned:
                log.debug("log cleaner: %d segment(s) -> %d, %d -> %d byte(s), %d tombstone(s) dropped",
                          st.segments_before, st.segments_after, st.bytes_before, st.bytes_after,
                          st.tombstones_dropped)

    async def compact_now(self) -> CleanStats:
        """Clean every compacted log until a pass finds nothing to do (call on the server's loop)."""
        total: CleanStats = compaction.CleanStats()
        while True:
            st = await self.clean_pass(None)
            total += st
            if not st.did_work:
                return total


class RetentionChecker(_Periodic):
    """Kafka's log.retention.check.interval.ms: every interval_ms, one retention pass (broker/retention.py) over
    the `cleanup.policy=delete` topics, in memory or on disk (0: never)."""

    def __init__(self, run_pass: Callable[[int], int], clock_ms: Callable[[], int], interval_ms: int) -> None:
        self.run_pass, self.clock_ms, self.interval_ms = run_pass, clock_ms, interval_ms
        self._task: asyncio.Task | None = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            try:
                self.run_pass(self.clock_ms())
            except OSError:
                log.exception("retention pass failed; the next one runs in %d ms", self.interval_ms)
