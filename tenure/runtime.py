"""The coordinator runtime: applies the state machine's Results on the event loop.

For each group request: build the context (token, version, client, now), run the pure coordinator,
then apply the Result in the one safe order - append the records to __consumer_offsets, then release
the responses (to this request or to parked ones), then arm/cancel the keyed timers with
loop.call_later. A parked request is just a future waiting for its token.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Callable

from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.broker.dataplane import Broker
from tenure.broker.topics import Topic
from tenure.coordinator.classic import GroupCoordinator, RequestContext
from tenure.coordinator.state import Result
from tenure.protocol import records as rec
from tenure.protocol.codec import Request

log = logging.getLogger("tenure.coordinator")

OFFSETS_TOPIC = "__consumer_offsets"
GROUP_APIS = frozenset({8, 9, 11, 12, 13, 14, 15, 16, 42, 47})


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's rule: Utils.abs(groupId.hashCode) % offsets.topic.num.partitions."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partitions


class CoordinatorRuntime:
    def __init__(self, coordinator: GroupCoordinator, offsets_topic: Topic, broker: Broker,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.coordinator = coordinator
        self.offsets_topic = offsets_topic
        self.broker = broker
        self.clock_ms = clock_ms
        self._tokens = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}

    async def handle(self, req: Request, client_host: str):
        loop = asyncio.get_running_loop()
        token = next(self._tokens)
        fut = loop.create_future()
        self._waiting[token] = fut
        try:
            ctx = RequestContext(token, req.api_version, req.client_id or "", client_host, self.clock_ms())
            self.apply(self.coordinator.handle(req.api_key, ctx, req.body))
            return await fut
        finally:
            self._waiting.pop(token, None)

    def apply(self, result: Result) -> None:
        if result.records:
            self._persist(result.records)
        for token, body in result.responses:
            fut = self._waiting.get(token)
            if fut is not None and not fut.done():
                fut.set_result(body)
        loop = asyncio.get_running_loop()
        now = self.clock_ms()
        for op in result.timers:
            old = self._timers.pop(op.key, None)
            if old is not None:
                old.cancel()
            if op.deadline_ms is not None:
                delay = max(op.deadline_ms - now, 0) / 1000.0
                self._timers[op.key] = loop.call_later(delay, self._fire, op.key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        try:
            self.apply(self.coordinator.on_timer(key, self.clock_ms()))
        except Exception:
            log.exception("timer %r failed", key)

    def _persist(self, records: list) -> None:
        by_partition: dict[int, list] = {}
        n = len(self.offsets_topic.partitions)
        for r in records:
            by_partition.setdefault(partition_for(r.group_id, n), []).append(r)
        now = self.clock_ms()
        for part, recs in by_partition.items():
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                          producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
            for i, r in enumerate(recs):
                key, value = rec.encode(r)
                b.append(i, timestamp=now, key=key, value=value, headers=[])
            self.offsets_topic.partitions[part].append(bytes(b.build()))
            self.broker.notify_append(OFFSETS_TOPIC, part)

    def close(self) -> None:
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()
