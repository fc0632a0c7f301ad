"""The replica manager: the table of this broker's partitions (partition.py), the one append path and the one
read path (what Kafka's `ReplicaManager` does with `Partition` and `UnifiedLog`, reduced to one storage).

Three writers append, all through `append`, which does every partition's bookkeeping the same way: the log
append at the partition's leader epoch, the producer state (idempotent sequences), the transaction index
(a transactional batch opens its producer's transaction, a control batch ends it), the high watermark, and
the fetches long-polling the partition woken:

- client Produce (`append_records`: the producer dedup first - a retried batch answers its first offset),
- the transaction markers of data partitions (`write_txn_marker`),
- the coordinators' records and markers in `__consumer_offsets` / `__transaction_state` (`append`, the
  coordinator's `PartitionWriter` protocol, coordinator/writer.py).

The commit point: a write is acknowledged once it is **durable** (`durable`): today an fsync under the
`--fsync` policy (storage/durability.py); with replication it would be the high watermark passing it.

The read path (`read`) serves a Fetch by offset within a byte budget, up to the high watermark
(read_uncommitted) or the last stable offset with the aborted transactions of the range (read_committed).
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tenure.protocol.errors import ErrorCode
from tenure.protocol.markers import control_batch
from tenure.storage import BatchHeader, Log
from tenure.storage.durability import Durability

from .cluster import Cluster
from .partition import Partition
from .topics import TopicRegistry
from .txn_index import cut_at

if TYPE_CHECKING:                  # (made by the transaction coordinator: protocol/txn_records.py)
    from tenure.protocol.txn_records import TxnMarker


class Appended:
    """What an append did: its error, the batch's base offset, and whether it was a retried batch already in the
    log at `base_offset`. (Plain classes, this and LogRead: their callers read the fields, nothing compares or
    prints them, and a dataclass's build cost ~0.4 ms of every server's start-up.)"""

    __slots__ = ("error", "base_offset", "duplicate")

    def __init__(self, error: ErrorCode, base_offset: int, duplicate: bool = False) -> None:
        self.error = error
        self.base_offset = base_offset
        self.duplicate = duplicate            # a retried batch: already in the log at `base_offset`


class LogRead:
    """What a read returns: the records' bytes and, read_committed, the aborted transactions among them."""

    __slots__ = ("records", "aborted")

    def __init__(self, records: bytes, aborted: list[tuple[int, int]] | None) -> None:
        self.records = records
        self.aborted = aborted                # read_committed: (producer id, first offset) of aborted ones


class ReplicaManager:
    def __init__(self, topics: TopicRegistry, cluster: Cluster, durability: Durability | None = None) -> None:
        self.topics = topics
        self.cluster = cluster
        self.durability = durability if durability is not None else Durability("never")
        self.stopping = False             # the server is stopping: long-polling fetches answer now
        self._partitions: dict[tuple[str, int], Partition] = {}
        topics.watch(self)                # partitions are made and dropped with their topics
        self.topics_changed(None)

    # ------------------------------------------------------------------ the partition table
    def get(self, topic: str, index: int) -> Partition | None:
        """The partition, or None if the topic or partition does not exist."""
        plog = self.topics.partition(topic, index)
        if plog is None:
            return None
        p = self._partitions.get((topic, index))
        if p is None or p.log is not plog:          # a topic created again: new logs, new partitions
            p = self._partitions[(topic, index)] = Partition(topic, index, plog, self.cluster)
        return p

    def of_topic(self, name: str) -> list[Partition]:
        """The partitions of a topic, by index ([] if it does not exist)."""
        topic = self.topics.get(name)
        parts = [self.get(name, i) for i in range(len(topic.partitions) if topic is not None else 0)]
        return [p for p in parts if p is not None]

    def topics_changed(self, names: list[str] | None) -> None:
        """The topic table changed (TopicRegistry's watchers): partitions of new topics and added partitions
        are made; those of deleted topics are dropped, their long-polling fetches woken."""
        if names is None:
            names = sorted({t for t, _ in self._partitions} | {t.name for t in self.topics.all()})
        for name in names:
            topic = self.topics.get(name)
            for key in [k for k in self._partitions if k[0] == name]:
                if topic is None or key[1] >= len(topic.partitions) or \
                        self._partitions[key].log is not topic.partitions[key[1]]:
                    self._partitions.pop(key).wake()
            for i in range(len(topic.partitions) if topic is not None else 0):
                self.get(name, i)

    # ------------------------------------------------------------------ storage facts (the cluster table's)
    def log_end_offset(self, topic: str, index: int) -> int:
        p = self.get(topic, index)
        return p.log_end_offset if p is not None else 0

    def last_epoch(self, topic: str, index: int) -> int:
        p = self.get(topic, index)
        return p.last_epoch() if p is not None else 0

    # ------------------------------------------------------------------ the one append path
    def append(self, topic: str, index: int, batch: bytes) -> Log:
        """Append already-built batches (a coordinator's records or marker) to a partition; returns its log
        (what `durable` waits for). Raises OSError if the log cannot be written, KeyError if the partition
        does not exist."""
        p = self.get(topic, index)
        if p is None:
            raise KeyError(f"no partition {topic}-{index}")
        self._append(p, batch)
        return p.log

    def _append(self, p: Partition, batch: bytes) -> tuple[int, list[BatchHeader]]:
        """THE append: to the log at the partition's leader epoch, then the partition's bookkeeping."""
        base, stamped = p.log.append(batch, p.leader_epoch)
        pos = 0
        for h in stamped:
            p.producers.appended(h)
            p.txns.appended(h, batch[pos:pos + h.size] if h.is_control else b"")
            pos += h.size
        p.advance_high_watermark()
        p.wake()
        return base, stamped

    def append_records(self, p: Partition, records: bytes, headers: list[BatchHeader]) -> Appended:
        """A client's Produce to one partition (its batches checked by the caller): appended at a base offset,
        a retried batch already in the log (its first offset; nothing appended), or refused by the producer
        state (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER). Raises OSError if the log cannot be
        written."""
        if len(headers) == 1:
            code, dup = p.producers.check(headers[0])
            if code:
                return Appended(code, -1)
            if dup is not None:
                return Appended(ErrorCode.NONE, dup, duplicate=True)
        base, _ = self._append(p, records)
        return Appended(ErrorCode.NONE, base)

    def write_txn_marker(self, m: TxnMarker, now_ms: int) -> Log | None:
        """One transaction marker (a control batch) into a data partition; its log, or None if the topic was
        deleted while the transaction was open."""
        p = self.get(m.topic, m.partition)
        if p is None:
            return None
        self._append(p, control_batch(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, now_ms))
        return p.log

    # ------------------------------------------------------------------ the commit point
    @property
    def durable_needed(self) -> bool:
        """Whether `durable` waits for anything (False: --fsync never, or in memory)."""
        return self.durability.needed

    async def durable(self, logs: Iterable[Log]) -> None:
        """Wait until everything appended to `logs` is durable: an fsync under the `--fsync` policy (a
        replicated high watermark later). Raises what the fsync raised."""
        await self.durability.sync(logs)

    # ------------------------------------------------------------------ the one read path
    def read_end(self, p: Partition, committed: bool) -> int:
        """Where a fetch stops: the last stable offset (read_committed) or the high watermark."""
        return p.last_stable_offset if committed else p.high_watermark

    def read(self, p: Partition, offset: int, max_bytes: int, committed: bool) -> LogRead:
        """Whole batches from `offset` (at least one if any is below the end, even past `max_bytes`), up to
        the high watermark, or for read_committed up to the last stable offset with the aborted
        transactions overlapping the range."""
        end = self.read_end(p, committed)
        if offset >= end:
            return LogRead(b"", [] if committed else None)
        data = p.log.read(offset, max_bytes)
        if committed or end < p.log_end_offset:
            data = cut_at(data, end)
        return LogRead(data, p.txns.aborted(offset, end) if committed else None)

    async def wait_for_append(self, partitions: list[Partition], timeout: float) -> None:
        """Wait (a long-polling fetch) until one of `partitions` is appended to, deleted, or the server stops,
        at most `timeout` seconds."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for p in partitions:
            p.waiters[fut] = None
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for p in partitions:
                p.waiters.pop(fut, None)

    def waiting(self) -> list[Partition]:
        """The partitions a fetch is long-polling."""
        return [p for p in self._partitions.values() if p.waiters]

    def stop_waiting(self) -> None:
        """The server is stopping: every long-polling fetch answers now with what it has (a fetch may always
        return fewer than min_bytes), so a drain does not wait out max_wait_ms."""
        self.stopping = True
        for p in self._partitions.values():
            p.wake()
