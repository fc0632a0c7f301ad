"""The one writer to a coordinator's internal topic (`__consumer_offsets`, `__transaction_state`):
`PartitionWriter`.

Everything a coordinator persists goes through `PartitionWriter.write`: the records of one input are
split by the partition of their key (Kafka's `partition_for` over the group id, or the transactional
id), each partition's share becomes ONE RecordBatch v2 (one coordinator write: all of it is read back or
none) - offsets committed in a transaction go in a transactional batch of their producer's id and epoch -
appended to that partition's log, and whoever waits for new data on the partition (a Fetch long poll)
is told. `write_marker` appends a transaction's COMMIT/ABORT control batch to one partition (the end of
the offsets a transaction committed there). `sync(logs)` waits until those appends are durable under the
`--fsync` policy.

A write or fsync that fails is fail-stop: the writer remembers the error (`failed`), calls `on_fatal`
once, and refuses every later write, so nothing it could not keep is ever acknowledged.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.protocol import records as rec
from tenure.protocol.markers import control_batch
from tenure.storage import Log
from tenure.storage.durability import Durability

from .routing import partition_for

log = logging.getLogger("tenure.coordinator")


class InternalTopic(Protocol):
    """What a coordinator needs of its internal topic (the broker's `Topic` is one): its name and one log per
    partition."""
    name: str
    partitions: list[Log]


class PartitionWriter:
    def __init__(self, topic: InternalTopic, clock_ms: Callable[[], int], *, durability: Durability | None = None,
                 notify_append: Callable[[str, int], None] | None = None,
                 on_fatal: Callable[[BaseException], None] | None = None, codec=rec) -> None:
        self.topic = topic                       # __consumer_offsets: its `partitions` are the logs
        self.topic_name = topic.name
        # the records' codec (encode, partition_key, batch_producer): the group coordinator's records by
        # default, the transaction coordinator's for __transaction_state
        self.codec = codec
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
        by_batch: dict[tuple[int, tuple[int, int] | None], list] = {}
        n = self.partitions
        for r in records:       # one batch per partition, and per producer for transactional offsets
            by = self.codec.partition_key(r)      # a group id, or (a coordinator load record) the partition
            key = (by if isinstance(by, int) else partition_for(by, n), self.codec.batch_producer(r))
            by_batch.setdefault(key, []).append(r)
        now = self.clock_ms()
        written = []
        for (part, producer), recs in by_batch.items():
            pid, epoch = producer or (-1, -1)
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer is not None,
                                          producer_id=pid, producer_epoch=epoch, base_sequence=-1,
                                          batch_size=2**31 - 1)
            for i, r in enumerate(recs):
                key, value = self.codec.encode(r)
                b.append(i, timestamp=now, key=key, value=value, headers=[])
            written.append(self._append(part, bytes(b.build())))
        return written

    def write_marker(self, part: int, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, now_ms: int):
        """Append one transaction marker (a control batch) to partition `part`; returns its log."""
        if self.failed is not None:
            raise self.failed
        return self._append(part, control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms))

    def _append(self, part: int, batch: bytes):
        plog = self.topic.partitions[part]
        try:
            plog.append(batch)
        except OSError as exc:
            self.fail(exc)
            raise
        if self.notify_append is not None:
            self.notify_append(self.topic_name, part)
        return plog

    async def sync(self, logs: Iterable) -> bool:
        """Wait until everything appended to `logs` is durable under the policy; False (and fail-stop)
        if an fsync failed."""
        try:
            await self.durability.sync(logs)
        except Exception as exc:
            self.fail(exc)
            return False
        return True

    def fail(self, exc: BaseException, what: str | None = None) -> None:
        """A write or fsync of coordinator state failed, or a timer could not do its work: stop
        acknowledging anything (fail-stop)."""
        if self.failed is None:
            self.failed = exc
            log.critical("%s (%s); no further coordinator request is answered",
                         what or f"cannot write {self.topic_name}", exc,
                         exc_info=None if isinstance(exc, OSError) else exc)
            if self.on_fatal is not None:
                self.on_fatal(exc)
