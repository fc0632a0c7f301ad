"""The share coordinator (KIP-932): the state of every share partition - a share group's view of one
topic-partition: its start offset and the delivery state and count of its in-flight records - persisted in
`__share_group_state` as Kafka's share coordinator persists it (protocol/share_state_records.py), through the
one coordinator writer, and read back when a share partition is first used after a start or a restart.

`ShareStateShard` is the state machine of one `__share_group_state` partition (replay is its only mutator; a
write gives the records, which are replayed as they are written). `ShareStateRuntime` is the coordinator
runtime over that topic (runtime.py) with the broker's calls: `read`, `write` and `delete`. A share partition's
state lives in the partition Kafka's ShareCoordinatorService.partitionFor gives its coordinator key
"group:topic id:partition" (the topic id as Kafka writes a Uuid); each partition's shard is hosted by the
partition's leader and moves with it (unloaded, then loaded again from the log by replay), as the group
coordinator's shards do; while a shard loads, the broker's calls wait for it (`ready`).

What is written: the first write of a share partition, and every `SNAPSHOT_EVERY`-th after it, is a
ShareSnapshot (the whole state); the others are ShareUpdates carrying the start offset and every in-flight
batch, so the latest snapshot and the latest update of a key - all that compaction and the loader keep - give
the state. Records acquired at the time of a write are written as available with their delivery count: after a
restart they are delivered again, their deliveries counted.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import share_coordinator_key
from tenure.protocol.share_state_records import ShareStateRecord, StateBatch

from ..result import Result
from ..routing import partition_for
from ..runtime import CoordinatorRuntime

log = logging.getLogger("tenure.coordinator")

SNAPSHOT_EVERY = 500          # Kafka's share.coordinator.snapshot.update.records.per.snapshot
LOAD_WAIT_S = 30.0            # how long the broker's calls wait for a moving shard to load


class ShareStateUnavailable(Exception):
    """The share partition's shard is not loaded here: COORDINATOR_LOAD_IN_PROGRESS (14) while a move loads it,
    NOT_COORDINATOR (16) when no broker leads its partition."""

    def __init__(self, code: int, partition: int) -> None:
        super().__init__(f"__share_group_state-{partition} is not loaded (error {code})")
        self.code, self.partition = code, partition

Key = tuple[str, uuid.UUID, int]      # (group id, topic id, partition)


@dataclass
class PartitionState:
    start_offset: int
    records: dict[int, tuple[int, int]] = field(default_factory=dict)    # offset -> (delivery state, count)
    snapshot_epoch: int = 0
    state_epoch: int = 0
    updates: int = 0                   # updates since the latest snapshot

    def batches(self) -> tuple[StateBatch, ...]:
        return runs(self.records)


def runs(records: dict[int, tuple[int, int]]) -> tuple[StateBatch, ...]:
    """Offsets with their (state, count) as batches of consecutive offsets sharing both."""
    out: list[StateBatch] = []
    for off in sorted(records):
        state, count = records[off]
        if out and out[-1][1] == off - 1 and out[-1][2:] == (state, count):
            out[-1] = (out[-1][0], off, state, count)
        else:
            out.append((off, off, state, count))
    return tuple(out)


class ShareStateShard:
    """One `__share_group_state` partition's share partitions."""

    def __init__(self, partition: int = 0) -> None:
        self.partition = partition
        self.states: dict[Key, PartitionState] = {}

    # ---- the one mutator
    def replay(self, record: ShareStateRecord) -> None:
        key = (record.group_id, record.topic_id, record.partition)
        if record.tombstone:
            if record.snapshot:
                self.states.pop(key, None)
            return
        st = self.states.get(key)
        if record.snapshot or st is None:
            st = self.states[key] = PartitionState(record.start_offset, snapshot_epoch=record.snapshot_epoch,
                                                   state_epoch=record.state_epoch)
            if not record.snapshot:
                st.updates = 1
        else:
            st.updates += 1
            if record.start_offset >= 0:
                st.start_offset = record.start_offset
        st.records = {o: v for o, v in st.records.items() if o >= st.start_offset}
        for first, last, state, count in record.batches:
            for off in range(max(first, st.start_offset), last + 1):
                st.records[off] = (state, count)

    # ---- what the runtime asks of a shard
    def loaded(self, now_ms: int) -> Result:
        return Result()

    def unload(self, now_ms: int) -> Result:
        self.states.clear()
        return Result()

    def on_timer(self, key: Any, now_ms: int) -> Result:
        raise AssertionError(f"the share coordinator arms no timer ({key!r})")

    def handle(self, api_key: int, ctx: Any, body: Any) -> Result:
        raise AssertionError(f"the share coordinator answers no API here ({api_key})")

    def group_ids(self) -> list[str]:
        return sorted({g for g, _, _ in self.states})

    # ---- the broker's calls
    def read(self, key: Key) -> tuple[int, tuple[StateBatch, ...]] | None:
        st = self.states.get(key)
        return None if st is None else (st.start_offset, st.batches())

    def write(self, key: Key, start_offset: int, batches: tuple[StateBatch, ...]) -> ShareStateRecord:
        """The record persisting a share partition's state now: a snapshot the first time and every
        SNAPSHOT_EVERY-th write, else an update (the start offset and every in-flight batch)."""
        st = self.states.get(key)
        group_id, topic_id, partition = key
        if st is None or st.updates + 1 >= SNAPSHOT_EVERY:
            epoch = 0 if st is None else (st.snapshot_epoch + 1) % 65536
            return ShareStateRecord(group_id, topic_id, partition, True, epoch, 0 if st is None else st.state_epoch,
                                    0, start_offset, batches)
        return ShareStateRecord(group_id, topic_id, partition, False, st.snapshot_epoch, 0, 0, start_offset, batches)


class ShareStateRuntime(CoordinatorRuntime[ShareStateShard]):
    """The coordinator runtime over `__share_group_state` (one shard per partition, by Kafka's hash of
    "group:topic id:partition")."""

    def partition_of_key(self, key: Key) -> int:
        """The partition of a share partition's state: Kafka's hash of its coordinator key (the rule the writer
        places its records by)."""
        return partition_for(share_coordinator_key(*key), self.partitions)

    def _shard_of(self, key: Key) -> ShareStateShard:
        part = self.partition_of_key(key)
        shard = self.shards.get(part)
        if shard is None:
            raise ShareStateUnavailable(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if part in self.loading
                                        else ErrorCode.NOT_COORDINATOR, part)
        return shard

    async def ready(self, key: Key | None = None) -> None:
        """Wait until the shard of `key` (None: every shard) is loaded, while a move loads it (at most
        LOAD_WAIT_S; after that the caller's read or write finds it unavailable)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOAD_WAIT_S
        parts = None if key is None else {self.partition_of_key(key)}
        while (self.loading if parts is None else self.loading & parts) and loop.time() < deadline:
            await asyncio.sleep(0.005)

    def read(self, key: Key) -> tuple[int, tuple[StateBatch, ...]] | None:
        return self._shard_of(key).read(key)

    def keys(self, group_id: str) -> list[Key]:
        """The share partitions of a group that have state (in the shards loaded now)."""
        return sorted(k for shard in self.shards.values() for k in shard.states if k[0] == group_id)

    async def delete(self, key: Key) -> bool:
        """Forget a share partition's state: tombstones for its snapshot and update keys."""
        if self.failed is not None:
            return False
        await self.ready(key)
        try:
            shard = self._shard_of(key)
        except ShareStateUnavailable as exc:
            log.warning("share state of %s not written: %s", key, exc)
            return False
        records = [ShareStateRecord(*key, snapshot, tombstone=True) for snapshot in (True, False)]
        logs = self.writer.write(records)
        for r in records:
            shard.replay(r)
        return await self.writer.sync(logs)

    async def write(self, key: Key, start_offset: int, batches: tuple[StateBatch, ...]) -> bool:
        """Persist a share partition's state: its record written through the one writer and replayed, then
        waited for until durable. False if the writer has failed (fail-stop)."""
        if self.failed is not None:
            return False
        await self.ready(key)
        try:
            shard = self._shard_of(key)
        except ShareStateUnavailable as exc:
            log.warning("share state of %s not written: %s", key, exc)
            return False
        record = shard.write(key, start_offset, batches)
        logs = self.writer.write([record])
        shard.replay(record)
        return await self.writer.sync(logs)
