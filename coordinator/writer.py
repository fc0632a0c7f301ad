"""How a coordinator writes its internal topic (`__consumer_offsets`, `__transaction_state`).

`PartitionWriter` is the protocol the coordinator writes through: append built batches to one partition of its
topic, and wait until appends are durable (the commit point). The broker implements it - its replica manager
(broker/replica_manager.py), the one append path of every partition, which stamps the leader epoch, keeps the
partition's transaction index and high watermark, and wakes the fetchers of the partition -; `LogAppender`
here implements it straight over the topic's logs, for a coordinator run without a broker (tests, offline
tools). The coordinator never imports the broker.

`CoordinatorWriter` is the coordinator's own writer, the only code that writes its topic: the records of one
input are split by the partition of their key (Kafka's `partition_for` over the group id, or the transactional
id), each partition's share becomes ONE RecordBatch v2 (one coordinator write: all of it is read back or none)
- offsets committed in a transaction go in a transactional batch of their producer's id and epoch -, appended
through the PartitionWriter. `write_marker` appends a transaction's COMMIT/ABORT control batch to one partition
(the end of the offsets a transaction committed there). `sync(logs)` waits until those appends are durable.

A write or fsync that fails is fail-stop: the writer remembers the error (`failed`), calls `on_fatal` once,
and refuses every later write, so nothing it could not keep is ever acknowledged.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

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


class PartitionWriter(Protocol):
    """What a coordinator writes through (the broker's replica manager implements it)."""

    @property
    def durable_needed(self) -> bool:
        """Whether `durable` waits for anything (False: `--fsync never`, or in memory)."""
        ...

    def append(self, topic: str, index: int, batch: bytes) -> Log:
        """Append built batches (records or one control batch) to partition `index` of `topic`; returns the
        partition's log (what `durable` is given). Raises OSError if it cannot be written."""
        ...

    async def durable(self, logs: Iterable[Log]) -> None:
        """The commit point: return once everything appended to `logs` is durable (an fsync under the `--fsync`
        policy). Raises what the fsync raised."""
        ...


class LogAppender:
    """A PartitionWriter straight over an internal topic's logs, for a coordinator run without a broker:
    `notify_append(topic, partition)` after each append."""

    def __init__(self, topic: InternalTopic, durability: Durability | None = None,
                 notify_append: Callable[[str, int], None] | None = None) -> None:
        self.topic = topic
        self.durability = durability or Durability("never")
        self.notify_append = notify_append

    @property
    def durable_needed(self) -> bool:
        return self.durability.needed

    def append(self, topic: str, index: int, batch: bytes) -> Log:
        plog = self.topic.partitions[index]
        plog.append(batch)
        if self.notify_append is not None:
            self.notify_append(topic, index)
        return plog

    async def durable(self, logs: Iterable[Log]) -> None:
        await self.durability.sync(logs)


# what a partition of an internal topic takes by default: Kafka's `message.max.bytes` (1 MiB + 12)
MAX_BATCH_BYTES = 1048588


def ahead_key(record: Any) -> tuple:
    """What a record encoded ahead (`CoordinatorWriter.ahead`) is found by."""
    return type(record), getattr(record, "group_id", None), getattr(record, "member_id", None)


def encode_batch(codec: Any, records: list[Any], now: int, producer: tuple[int, int] | None,
                 ahead: dict | None = None) -> bytes:
    """One RecordBatch v2 of `records` (a transactional one of `producer`'s id and epoch), every record
    stamped `now`; its base offset is the log's to assign. `ahead`: records encoded ahead, by `ahead_key`:
    (the record, its key, its value), used for a record equal to it."""
    pid, epoch = producer or (-1, -1)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer is not None,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=-1,
                                  batch_size=2**31 - 1)
    for i, r in enumerate(records):
        done = ahead.get(ahead_key(r)) if ahead else None
        if done is not None and done[0] == r:
            key, value = done[1], done[2]
        else:
            key, value = codec.encode(r)
        b.append(i, timestamp=now, key=key, value=value, headers=[])
    return bytes(b.build())


@dataclass(frozen=True)
class PreparedBatch:
    """The batch of one partition's records, encoded ahead of the write (`CoordinatorWriter.prepare`)."""
    part: int
    records: list[Any]
    batch: bytes
    producer: tuple[int, int] | None = None      # the transactional batch's producer id and epoch

    def matches(self, records: list[Any]) -> bool:
        """Whether `records` are those this batch was made of: the handler emits the records of the plan the
        batch was made from (offsets.commit_plan) or none; the count and both ends are compared, not every
        record (that would be a walk on the loop)."""
        mine = self.records
        return len(records) == len(mine) and (not mine or (records[0] == mine[0] and records[-1] == mine[-1]))


class CoordinatorWriter:
    def __init__(self, topic: InternalTopic, clock_ms: Callable[[], int], partitions: PartitionWriter | None = None,
                 *, on_fatal: Callable[[BaseException], None] | None = None, codec: Any = rec) -> None:
        self.topic = topic                       # __consumer_offsets: the topic written (its name, partition count)
        self.topic_name = topic.name
        # what the batches are appended through (None: the topic's logs directly, nothing durable)
        self.partition_writer: PartitionWriter = partitions if partitions is not None else LogAppender(topic)
        # the records' codec (encode, partition_key, batch_producer): the group coordinator's records by
        # default, the transaction coordinator's for __transaction_state
        self.codec = codec
        self.clock_ms = clock_ms                 # the record timestamps: the coordinator's time
        self.on_fatal = on_fatal
        self.failed: BaseException | None = None
        # records encoded ahead, off the loop, by whoever expects them to be written (ahead_key -> (record,
        # key, value)); the entry's owner removes it
        self.ahead: dict[tuple, tuple[Any, bytes, bytes | None]] = {}

    @property
    def durable_needed(self) -> bool:
        return self.partition_writer.durable_needed

    @property
    def partitions(self) -> int:
        return len(self.topic.partitions)

    def write(self, records: list[Any], prepared: PreparedBatch | None = None) -> list[Log]:
        """Append `records` (one input's), one batch per offsets partition; returns the logs written.
        `prepared`: the batch of one partition's records already encoded (`prepare`), used if that
        partition's records are the ones it was made of. Raises the first failure (and every later call
        raises it too)."""
        if self.failed is not None:
            raise self.failed
        if prepared is not None and prepared.matches(records):   # all of them: one group's, one batch's
            return [self._append(prepared.part, prepared.batch)]
        by_batch: dict[tuple[int, tuple[int, int] | None], list[Any]] = {}
        n = self.partitions
        parts: dict[str | int, int] = {}
        for r in records:       # one batch per partition, and per producer for transactional offsets
            by = self.codec.partition_key(r)      # a group id, or (a coordinator load record) the partition
            part = parts.get(by)
            if part is None:
                part = parts[by] = by if isinstance(by, int) else partition_for(by, n)
            key = (part, self.codec.batch_producer(r))
            by_batch.setdefault(key, []).append(r)
        now = self.clock_ms()
        written = []
        for (part, producer), recs in by_batch.items():
            if prepared is not None and (prepared.part, prepared.producer) == (part, producer) and \
                    prepared.matches(recs):
                batch = prepared.batch               # encoded off the loop (PreparedBatch)
            else:
                batch = encode_batch(self.codec, recs, now, producer, self.ahead)
            written.append(self._append(part, batch))
        return written

    def max_batch_bytes(self) -> int:
        """The largest batch the topic takes: its `max.message.bytes` (Kafka's coordinator runtime sizes its
        batches by the partition's, and the log refuses a larger one)."""
        config = getattr(self.topic, "config", None)
        value = config("max.message.bytes") if callable(config) else None
        return int(value) if value else MAX_BATCH_BYTES

    def prepare(self, part: int, records: list[Any], now: int,
                producer: tuple[int, int] | None = None) -> PreparedBatch:
        """`records` (all of partition `part`, in `producer`'s transactional batch or none) encoded as the one
        batch `write` would make of them: a pure function, run off the loop for a heavy write
        (group_runtime.py)."""
        return PreparedBatch(part, records, encode_batch(self.codec, records, now, producer), producer)

    def write_marker(self, part: int, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, now_ms: int) -> Log:
        """Append one transaction marker (a control batch) to partition `part`; returns its log."""
        if self.failed is not None:
            raise self.failed
        return self._append(part, control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms))

    def _append(self, part: int, batch: bytes) -> Log:
        try:
            return self.partition_writer.append(self.topic_name, part, batch)
        except OSError as exc:
            self.fail(exc)
            raise

    async def sync(self, logs: Iterable[Log]) -> bool:
        """Wait until everything appended to `logs` is durable (the partition writer's commit point); False
        (and fail-stop) if an fsync failed."""
        try:
            await self.partition_writer.durable(logs)
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
