"""The one writer to `__consumer_offsets`: `PartitionWriter`.

Everything the coordinator persists goes through `PartitionWriter.write`: the records of one input are
split by the offsets partition of their group (Kafka's `partition_for`), each partition's share becomes
ONE RecordBatch v2 (one coordinator write: all of it is read back or none), appended to that partition's
log, and whoever waits for new data on the partition (a Fetch long poll of `__consumer_offsets`) is told.
`sync(logs)` waits until those appends are durable under the `--fsync` policy.

A write or fsync that fails is fail-stop: the writer remembers the error (`failed`), calls `on_fatal`
once, and refuses every later write, so nothing it could not keep is ever acknowledged.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable

import tenure.protocol  # noqa: F401 - first: it loads kafka-python without its import-time warning
from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.broker.topics import OFFSETS_TOPIC
from tenure.protocol import records as rec
from tenure.storage.durability import Durability

from .routing import partition_for

log = logging.getLogger("tenure.coordinator")


class PartitionWriter:
    def __init__(self, topic, clock_ms: Callable[[], int], *, durability: Durability | None = None,
                 notify_append: Callable[[str, int], None] | None = None,
                 on_fatal: Callable[[BaseException], None] | None = None) -> None:
        self.topic = topic                       # __consumer_offsets: its `partitions` are the logs
        self.clock_ms = clock_ms                 # the record timestamps: the coordinator's time
        self.durability = durability or Durability("never")
        self.notify_append = notify_append       # (topic, partition) after each append: wakes fetchers
        self.on_fatal = on_fatal
        self.failed: BaseException | None = None

    @property
    def partitions(self) -> int:
        return len(self.topic.partitions)

    def write(self, records: list) -> list:
        """Append `records` (one input's), one batch per offsets partition; returns the logs written.
        Raises the first failure (and every later call raises it too)."""
        if self.failed is not None:
            raise self.failed
        by_partition: dict[int, list] = {}
        n = self.partitions
        for r in records:
            by_partition.setdefault(partition_for(r.group_id, n), []).append(r)
        now = self.clock_ms()
        written = []
        for part, recs in by_partition.items():
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                          producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
            for i, r in enumerate(recs):
                key, value = rec.encode(r)
                b.append(i, timestamp=now, key=key, value=value, headers=[])
            plog = self.topic.partitions[part]
            try:
                plog.append(bytes(b.build()))
            except OSError as exc:
                self.fail(exc)
                raise
            written.append(plog)
            if self.notify_append is not None:
                self.notify_append(OFFSETS_TOPIC, part)
        return written

    async def sync(self, logs: Iterable) -> bool:
        """Wait until everything appended to `logs` is durable under the policy; False (and fail-stop)
        if an fsync failed."""
        try:
            await self.durability.sync(logs)
        except Exception as exc:
            self.fail(exc)
            return False
        return True

    def fail(self, exc: BaseException, what: str = f"cannot write {OFFSETS_TOPIC}") -> None:
        """A write or fsync of group state failed, or a timer could not do its work: stop acknowledging
        anything (fail-stop)."""
        if self.failed is None:
            self.failed = exc
            log.critical("%s (%s); no further group request is answered", what, exc,
                         exc_info=None if isinstance(exc, OSError) else exc)
            if self.on_fatal is not None:
                self.on_fatal(exc)
