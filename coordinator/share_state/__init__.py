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

What is written: a write names the start offset and the state batches that changed (the broker's, or a
WriteShareGroupState's). The first write of a share partition, and one once `SNAPSHOT_EVERY` updates are counted, is a
ShareSnapshot (the whole state: the recorded batches combined with the new ones, pruned below the start
offset); the others are ShareUpdates carrying the batches as written, replayed by combining them over the
state (`combine`: Kafka's rule, the higher delivery count, then the higher state, wins where batches overlap)
and pruning below the start offset. Records acquired at the time of a write are written as available with their
delivery count: after a restart they are delivered again, their deliveries counted.
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
    # Kafka's snapshotUpdateCount: None until the first update, which counts 0, each later one 1 more; a
    # snapshot resets it to 0 only once it has reached SNAPSHOT_EVERY (the write that made the snapshot)
    updates: int | None = None
    leader_epoch: int = -1             # the highest leader epoch its records carry (-1: none)

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


def combine(records: dict[int, tuple[int, int]], batches: tuple[StateBatch, ...],
            start: int) -> dict[int, tuple[int, int]]:
    """`records` with `batches` merged over them and everything below `start` pruned, as Kafka's share
    coordinator combines state batches (PersisterStateBatchCombiner): where a batch overlaps a record, the one
    with the higher delivery count wins, at equal counts the higher delivery state (ACKNOWLEDGED and ARCHIVED,
    terminal, over AVAILABLE)."""
    out = {o: v for o, v in records.items() if o >= start}
    for first, last, state, count in batches:
        for off in range(max(first, start), last + 1):
            old = out.get(off)
            if old is None or (count, state) >= (old[1], old[0]):
                out[off] = (state, count)
    return out


class ShareStateShard:
    """One `__share_group_state` partition's share partitions."""

    def __init__(self, partition: int = 0) -> None:
        self.partition = partition
        self.states: dict[Key, PartitionState] = {}
        self.snapshots: dict[Key, int] = {}     # the log offset of each share partition's latest snapshot

    def replayed_at(self, record: ShareStateRecord, offset: int) -> None:
        """Where a record replayed is in the log (Kafka's ShareCoordinatorOffsetsManager): a snapshot's offset is
        its share partition's; a deleted share partition has none."""
        if record.snapshot:
            key = (record.group_id, record.topic_id, record.partition)
            if record.tombstone:
                self.snapshots.pop(key, None)
            else:
                self.snapshots[key] = offset

    def redundant_below(self) -> int | None:
        """The log offset below which no record is needed (the lowest latest snapshot of a share partition with
        state; None: none), Kafka's last redundant offset."""
        return min(self.snapshots.values(), default=None)

    # ---- the one mutator
    def replay(self, record: ShareStateRecord) -> None:
        key = (record.group_id, record.topic_id, record.partition)
        if record.tombstone:
            if record.snapshot:
                self.states.pop(key, None)
            return
        st = self.states.get(key)
        if record.snapshot or st is None:
            leader = max(record.leader_epoch, st.leader_epoch if st is not None else -1)
            counted = None if st is None else (0 if st.updates is not None and st.updates >= SNAPSHOT_EVERY
                                               else st.updates)
            st = self.states[key] = PartitionState(record.start_offset, snapshot_epoch=record.snapshot_epoch,
                                                   state_epoch=record.state_epoch, leader_epoch=leader,
                                                   updates=counted)
            if not record.snapshot:
                st.updates = 0
        else:
            st.updates = 0 if st.updates is None else st.updates + 1
            if record.start_offset >= 0:
                st.start_offset = record.start_offset
            st.leader_epoch = max(st.leader_epoch, record.leader_epoch)
        st.records = combine(st.records, record.batches, st.start_offset)

    # ---- what the runtime asks of a shard
    def loaded(self, now_ms: int) -> Result:
        return Result()

    def unload(self, now_ms: int) -> Result:
        self.states.clear()
        self.snapshots.clear()
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

    def write(self, key: Key, start_offset: int, batches: tuple[StateBatch, ...], state_epoch: int = -1,
              leader_epoch: int = -1) -> ShareStateRecord:
        """The record persisting a write of a share partition's state (its start offset and the state batches
        that changed), as Kafka's ShareCoordinatorShard makes it: the first write a snapshot of the batches
        given; once SNAPSHOT_EVERY updates are counted (Kafka's count: the first update after the first
        snapshot counts 0) a snapshot of the whole state - the recorded batches combined with the new ones,
        those below the start offset pruned; the others an update carrying the batches given (combined among
        themselves, pruned below the write's start offset, as Kafka's mergeBatches). A state or leader epoch of
        -1 keeps the one the state has (0 for a new one)."""
        st = self.states.get(key)
        group_id, topic_id, partition = key
        leader = leader_epoch if leader_epoch >= 0 else (0 if st is None else max(st.leader_epoch, 0))
        if st is None:
            state = state_epoch if state_epoch >= 0 else 0
            return ShareStateRecord(group_id, topic_id, partition, True, 0, state, leader, start_offset,
                                    runs(combine({}, batches, start_offset)))
        if st.updates is not None and st.updates >= SNAPSHOT_EVERY:
            start = start_offset if start_offset >= 0 else st.start_offset
            state = state_epoch if state_epoch >= 0 else st.state_epoch
            return ShareStateRecord(group_id, topic_id, partition, True, (st.snapshot_epoch + 1) % 65536, state,
                                    leader, start, runs(combine(st.records, batches, start)))
        return ShareStateRecord(group_id, topic_id, partition, False, st.snapshot_epoch, 0, leader, start_offset,
                                runs(combine({}, batches, start_offset)))

    def initialize(self, key: Key, state_epoch: int, start_offset: int) -> ShareStateRecord:
        """InitializeShareGroupState's record: a snapshot of the state epoch and start offset given, nothing in
        flight (Kafka's ShareCoordinatorShard.initializeState)."""
        st = self.states.get(key)
        epoch = 0 if st is None else (st.snapshot_epoch + 1) % 65536
        return ShareStateRecord(*key, True, epoch, state_epoch, -1 if st is None else st.leader_epoch, start_offset,
                                ())

    def fencing(self, key: Key, state_epoch: int = -1, leader_epoch: int = -1) -> int:
        """The error a request with these epochs gets (0: none), as Kafka's share coordinator fences a stale
        one: a leader epoch below the recorded one FENCED_LEADER_EPOCH, a state epoch below FENCED_STATE_EPOCH
        (-1: not checked)."""
        st = self.states.get(key)
        if st is None:
            return 0
        if leader_epoch >= 0 and st.leader_epoch > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if state_epoch >= 0 and st.state_epoch > state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return 0


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

    async def _writable_shard(self, key: Key):
        """The loaded shard that writes `key`'s state, or None (logged) if none can: the writer has failed
        (fail-stop) or the key's partition has no leader here."""
        if self.failed is not None:
            return None
        await self.ready(key)
        try:
            return self._shard_of(key)
        except ShareStateUnavailable as exc:
            log.warning("share state of %s not written: %s", key, exc)
            return None

    async def delete(self, key: Key) -> bool:
        """Forget a share partition's state: tombstones for its snapshot and update keys."""
        shard = await self._writable_shard(key)
        if shard is None:
            return False
        records = [ShareStateRecord(*key, snapshot, tombstone=True) for snapshot in (True, False)]
        logs = self.writer.write(records)
        self._replay_written(shard, records, logs)
        return await self.writer.sync(logs)

    # ---- the share coordinator's APIs (InitializeShareGroupState ... ReadShareGroupStateSummary), asked by a
    # broker over the wire: the same shards, writer and replay as the broker's in-process calls
    def refusal(self, key: Key, broker_id: int | None) -> int:
        """NOT_COORDINATOR (16) when the request came in on a broker that does not lead the key's partition (or
        none does), COORDINATOR_LOAD_IN_PROGRESS (14) while a move loads it; 0: this broker coordinates it."""
        return self._refusal(self.partition_of_key(key), broker_id)

    def state_of(self, key: Key) -> PartitionState | None:
        return self._shard_of(key).states.get(key)

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> int:
        """InitializeShareGroupState: FENCED_STATE_EPOCH for an older state epoch, else a snapshot of the
        state epoch and start offset, durable before the answer."""
        shard = self._shard_of(key)
        code = shard.fencing(key, state_epoch=state_epoch)
        if code:
            return code
        return await self._append(shard, shard.initialize(key, state_epoch, start_offset))

    async def write_state(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                          batches: tuple[StateBatch, ...]) -> int:
        """WriteShareGroupState: fenced by an older leader or state epoch, else written as the broker's own
        writes are (a snapshot or an update)."""
        shard = self._shard_of(key)
        code = shard.fencing(key, state_epoch=state_epoch, leader_epoch=leader_epoch)
        if code:
            return code
        return await self._append(shard, shard.write(key, start_offset, batches, state_epoch, leader_epoch))

    async def read_state(self, key: Key, leader_epoch: int) -> tuple[int, PartitionState | None]:
        """ReadShareGroupState: FENCED_LEADER_EPOCH for an older leader epoch; a newer one is recorded first
        (an update carrying it, as Kafka's readStateAndMaybeUpdateLeaderEpoch writes). The state, None when the
        share partition has none (the answer's start offset -1)."""
        shard = self._shard_of(key)
        code = shard.fencing(key, leader_epoch=leader_epoch)
        if code:
            return code, None
        st = shard.states.get(key)
        if st is not None and leader_epoch >= 0 and leader_epoch != st.leader_epoch:
            code = await self._append(shard, shard.write(key, st.start_offset, (), -1, leader_epoch))
        return code, shard.states.get(key)

    async def _append(self, shard: ShareStateShard, record: ShareStateRecord) -> int:
        logs = self.writer.write([record])
        self._replay_written(shard, [record], logs)
        if not await self.writer.sync(logs):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self._prune(shard)
        return 0

    @staticmethod
    def _replay_written(shard: ShareStateShard, records: list[ShareStateRecord], logs: list) -> None:
        """Replay records just written (one batch, the last of its log) with their offsets."""
        end = logs[0].log_end_offset
        for i, r in enumerate(records):
            shard.replay(r)
            shard.replayed_at(r, end - len(records) + i)

    def _prune(self, shard: ShareStateShard) -> None:
        """Kafka's prune of __share_group_state: the records below the lowest latest snapshot of the partition's
        share partitions are no longer needed and are deleted (the log start moves, as DeleteRecords moves it)."""
        below = shard.redundant_below()
        plog = self.offsets_topic.partitions[shard.partition]
        if below is not None and below > plog.log_start_offset:
            plog.advance_start(below)

    async def write(self, key: Key, start_offset: int, batches: tuple[StateBatch, ...]) -> bool:
        """Persist a share partition's state: its record written through the one writer and replayed, then
        waited for until durable. False if the writer has failed (fail-stop)."""
        shard = await self._writable_shard(key)
        if shard is None:
            return False
        return await self._append(shard, shard.write(key, start_offset, batches)) == 0
