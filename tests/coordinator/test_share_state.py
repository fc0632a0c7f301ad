"""The share coordinator's state machine (coordinator/share_state/) and its records (Kafka's ShareSnapshot and
ShareUpdate in __share_group_state): what a write gives, what replay makes of it, and that the latest snapshot
and update of a key - what compaction and the loader keep - give the same state as the whole log."""
from __future__ import annotations

import uuid

from tenure.coordinator.share_state import SNAPSHOT_EVERY, ShareStateShard, runs
from tenure.protocol.share_state_records import (
    SHARE_SNAPSHOT_KEY_VERSION,
    SHARE_UPDATE_KEY_VERSION,
    ShareStateRecord,
    UnknownRecordType,
    decode,
    encode,
)

TID = uuid.UUID(int=7)
KEY = ("g", TID, 0)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def write(shard: ShareStateShard, start: int, batches) -> ShareStateRecord:
    r = shard.write(KEY, start, tuple(batches))
    k, v = encode(r)
    assert decode(k, v) == r                   # Kafka's bytes give the same record
    shard.replay(r)
    return r


def compacted(log: list[ShareStateRecord]) -> ShareStateShard:
    latest: dict[bytes, ShareStateRecord] = {}
    for r in log:
        k = encode(r)[0]
        latest.pop(k, None)
        latest[k] = r
    fresh = ShareStateShard()
    for r in latest.values():
        fresh.replay(r)
    return fresh


def test_the_first_write_is_a_snapshot_then_updates_then_a_snapshot_again():
    s = ShareStateShard()
    first = write(s, 0, [(0, 4, AVAILABLE, 1)])
    assert first.snapshot and encode(first)[0][:2] == SHARE_SNAPSHOT_KEY_VERSION.to_bytes(2, "big")
    second = write(s, 2, [(2, 2, ARCHIVED, 5), (3, 4, AVAILABLE, 2)])
    assert not second.snapshot and encode(second)[0][:2] == SHARE_UPDATE_KEY_VERSION.to_bytes(2, "big")
    assert s.read(KEY) == (2, ((2, 2, ARCHIVED, 5), (3, 4, AVAILABLE, 2)))
    log = [first, second]
    for i in range(SNAPSHOT_EVERY + 1):
        log.append(write(s, 3 + i, [(3 + i, 3 + i, AVAILABLE, 1)]))
    snapshots = [r for r in log if r.snapshot]
    # Kafka's snapshotUpdateCount: the first update after the first snapshot counts 0, so the second snapshot
    # follows SNAPSHOT_EVERY + 1 updates (and each later one SNAPSHOT_EVERY)
    assert len(snapshots) == 2 and snapshots[1].snapshot_epoch == 1 and snapshots[1] is log[-1]
    assert s.read(KEY) == (3 + SNAPSHOT_EVERY, ((3 + SNAPSHOT_EVERY, 3 + SNAPSHOT_EVERY, AVAILABLE, 1),))
    assert compacted(log).read(KEY) == s.read(KEY)
    for _ in range(SNAPSHOT_EVERY):
        log.append(write(s, 3, []))
    assert not log[-1].snapshot and write(s, 3, []).snapshot              # then every SNAPSHOT_EVERY-th


def test_an_update_moves_the_start_and_replaces_the_batches_it_names():
    s = ShareStateShard()
    log = [write(s, 10, [(10, 19, AVAILABLE, 1)]),
           write(s, 12, [(12, 13, ACKNOWLEDGED, 1), (14, 19, AVAILABLE, 3)]),
           write(s, 14, [(14, 15, ARCHIVED, 5), (16, 19, AVAILABLE, 3)])]
    assert s.read(KEY) == (14, ((14, 15, ARCHIVED, 5), (16, 19, AVAILABLE, 3)))
    assert compacted(log).read(KEY) == s.read(KEY)
    assert s.read(("g", TID, 1)) is None and s.group_ids() == ["g"]


def test_a_snapshot_tombstone_forgets_the_share_partition_and_other_keys_raise():
    s = ShareStateShard()
    write(s, 0, [(0, 0, AVAILABLE, 1)])
    s.replay(ShareStateRecord("g", TID, 0, True, tombstone=True))
    assert s.read(KEY) is None
    try:
        decode((2).to_bytes(2, "big") + b"\x00", None)
    except UnknownRecordType as exc:
        assert exc.key_version == 2
    else:
        raise AssertionError("key version 2 decoded")


def test_runs_join_consecutive_offsets_of_one_state_and_count():
    assert runs({1: (0, 1), 2: (0, 1), 3: (2, 1), 5: (2, 1), 6: (2, 1)}) == (
        (1, 2, 0, 1), (3, 3, 2, 1), (5, 6, 2, 1))


# ---------------------------------------------------------------- the partitions of __share_group_state
def test_a_share_partitions_coordinator_key_and_partition_are_kafkas():
    """Kafka's SharePartitionKey.asCoordinatorKey ("group:topic id:partition", the topic id as Uuid.toString
    writes it: URL-safe base64, no padding) and ShareCoordinatorService.partitionFor (abs(String.hashCode) % the
    partitions); the key parsed back as SharePartitionKey.validate checks it."""
    import pytest

    from tenure.protocol.internal_topics import (
        java_string_hash,
        kafka_uuid,
        parse_share_coordinator_key,
        share_coordinator_key,
    )
    assert kafka_uuid(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"          # Kafka's Uuid.ONE_UUID
    tid = uuid.UUID("5d1b0ac4-6b2f-4ff3-8a1e-8c4f8d1b2e3a")
    key = share_coordinator_key("orders", tid, 3)
    assert key == f"orders:{kafka_uuid(tid)}:3" and len(kafka_uuid(tid)) == 22
    assert parse_share_coordinator_key(key) == ("orders", tid, 3)
    assert parse_share_coordinator_key(f" orders :{kafka_uuid(tid)}=:+3::") == ("orders", tid, 3)
    for bad in ("", "orders", f"orders:{kafka_uuid(tid)}", f"a:b:{kafka_uuid(tid)}:1", f"  :{kafka_uuid(tid)}:1",
                "orders:not-a-uuid:1", f"orders:{kafka_uuid(tid)}:x", f"orders:{kafka_uuid(tid)}:2147483648",
                "orders:AAAA:1", f"orders:{tid}:1"):
        with pytest.raises(ValueError):
            parse_share_coordinator_key(bad)
    h = java_string_hash(key)
    from tenure.coordinator.share_state import ShareStateRuntime
    rt = _runtime(50)
    assert rt.partition_of_key(("orders", tid, 3)) == abs(h) % 50
    assert isinstance(rt, ShareStateRuntime)


def _runtime(partitions: int):
    from tenure.broker.topics import TopicRegistry
    from tenure.coordinator.clock import CoordinatorClock
    from tenure.coordinator.share_state import ShareStateRuntime
    from tenure.protocol import share_state_records
    from tenure.protocol.internal_topics import SHARE_STATE_TOPIC
    topic = TopicRegistry().create(SHARE_STATE_TOPIC, partitions, internal=True, configs={"cleanup.policy": "compact"})
    return ShareStateRuntime(ShareStateShard, topic, clock=CoordinatorClock(lambda: 1_000_000),
                             codec=share_state_records, timer_keys=())


def test_share_state_spreads_over_the_partitions_and_a_moved_shard_loads_it_back():
    """Share partitions' state lands in the partition of its key; a shard that moves (unloaded, then loaded
    again from its partition's log by replay) gives every share partition the state it had, the broker's calls
    waiting while it loads and writing on after it (updates, not a new snapshot)."""
    import asyncio

    from tenure.coordinator.share_state import ShareStateUnavailable

    async def run() -> None:
        rt = _runtime(50)
        keys = [(f"g{i}", uuid.UUID(int=i + 1), i % 3) for i in range(40)]
        for i, k in enumerate(keys):
            assert await rt.write(k, i, ((i, i + 1, AVAILABLE, 2), (i + 2, i + 2, ARCHIVED, 5)))
        used = {rt.partition_of_key(k) for k in keys}
        assert len(used) > 10                                      # spread by Kafka's hash, not all in one
        for k in keys:
            assert k in rt.shards[rt.partition_of_key(k)].states
        before = {k: rt.read(k) for k in keys}
        moved = rt.partition_of_key(keys[0])
        rt.begin_move(moved)
        try:
            rt.read(keys[0])
            raise AssertionError("read a shard that is loading")
        except ShareStateUnavailable as exc:
            assert exc.code == 14 and exc.partition == moved
        waiter = asyncio.ensure_future(rt.write(keys[0], 1, ((1, 1, ACKNOWLEDGED, 2),)))
        await asyncio.sleep(0.02)
        assert not waiter.done()                                   # waits for the load
        await rt.finish_move(moved)
        assert await asyncio.wait_for(waiter, 5)
        assert {k: rt.read(k) for k in keys[1:]} == {k: before[k] for k in keys[1:]}
        assert rt.read(keys[0]) == (1, ((1, 1, ACKNOWLEDGED, 2), (2, 2, ARCHIVED, 5)))   # an update: what it names
        assert rt.shards[moved].states[keys[0]].updates == 0       # the loaded snapshot, then an update (Kafka
        #                                                            counts the first one 0)
        rt.begin_move(moved, loading=False)                        # no leader: the broker's write is refused
        assert await rt.write(keys[0], 2, ()) is False
    asyncio.run(run())


def test_updates_carry_the_batches_written_and_a_snapshot_combines_and_prunes_them_as_kafkas_coordinator():
    """Kafka's ShareCoordinatorShard: an update record carries the write's batches (combined among themselves,
    nothing pruned); the SNAPSHOT_EVERY-th write is a snapshot of the recorded batches combined with the new
    ones, those below the start offset pruned. Where batches overlap the higher delivery count wins, then the
    higher state (PersisterStateBatchCombiner)."""
    from tenure.coordinator.share_state import combine
    assert combine({5: (AVAILABLE, 3)}, ((4, 6, ACKNOWLEDGED, 2),), 0) == {
        4: (ACKNOWLEDGED, 2), 5: (AVAILABLE, 3), 6: (ACKNOWLEDGED, 2)}          # count 3 over count 2
    assert combine({5: (AVAILABLE, 2)}, ((5, 5, ARCHIVED, 2),), 0) == {5: (ARCHIVED, 2)}   # same count: the state
    assert combine({1: (ARCHIVED, 1), 5: (AVAILABLE, 2)}, ((3, 6, AVAILABLE, 1),), 4) == {
        4: (AVAILABLE, 1), 5: (AVAILABLE, 2), 6: (AVAILABLE, 1)}               # pruned below the start
    s = ShareStateShard()
    log = [write(s, 0, [(0, 9, AVAILABLE, 1)])]
    log.append(write(s, 0, [(0, 0, ACKNOWLEDGED, 1), (1, 1, ACKNOWLEDGED, 1), (2, 2, ARCHIVED, 1)]))
    assert not log[-1].snapshot and log[-1].batches == ((0, 1, ACKNOWLEDGED, 1), (2, 2, ARCHIVED, 1))
    assert log[-1].start_offset == 0
    assert s.read(KEY) == (0, ((0, 1, ACKNOWLEDGED, 1), (2, 2, ARCHIVED, 1), (3, 9, AVAILABLE, 1)))
    for i in range(SNAPSHOT_EVERY):
        log.append(write(s, 3, [(3 + i % 7, 3 + i % 7, AVAILABLE, 2)]))
    assert not any(r.snapshot for r in log[1:])
    log.append(write(s, 5, [(9, 9, ARCHIVED, 5)]))                              # the SNAPSHOT_EVERY-th write
    snap = log[-1]
    assert snap.snapshot and snap.snapshot_epoch == 1 and snap.start_offset == 5
    assert snap.batches == ((5, 8, AVAILABLE, 2), (9, 9, ARCHIVED, 5))          # combined, pruned below 5
    assert s.read(KEY) == (5, snap.batches)
    full = ShareStateShard()                                                    # a replay of every record
    for r in log:
        full.replay(r)
    assert full.read(KEY) == s.read(KEY)
    after = ShareStateShard()                                                   # or from the snapshot on
    after.replay(snap)
    assert after.read(KEY) == s.read(KEY)


def test_a_reload_replays_every_update_in_log_order():
    """Updates are deltas, not full values: a shard loaded again from its partition's log (a coordinator move,
    a restart) replays every record, not only the latest of each key, and has the state it had."""
    async def run() -> None:
        rt = _runtime(1)
        assert await rt.write(KEY, 0, ((0, 5, AVAILABLE, 1),))
        assert await rt.write(KEY, 0, ((0, 0, ARCHIVED, 1),))
        assert await rt.write(KEY, 0, ((1, 1, ACKNOWLEDGED, 1), (2, 2, AVAILABLE, 1)))
        assert await rt.write(KEY, 3, ((3, 3, AVAILABLE, 2),))
        before = rt.read(KEY)
        assert before == (3, ((3, 3, AVAILABLE, 2), (4, 5, AVAILABLE, 1)))
        rt.begin_move(0)
        report = await rt.finish_move(0)
        assert rt.read(KEY) == before and report.replayed == 4
    import asyncio
    asyncio.run(run())


def test_records_below_the_lowest_latest_snapshot_are_pruned_and_a_reload_keeps_the_state():
    """Kafka's prune of __share_group_state (ShareCoordinatorOffsetsManager's last redundant offset): once every
    share partition of a partition has a snapshot above them, the records below the lowest are deleted (the
    log start moves); a deleted share partition holds nothing back; a reload from what is left gives the
    state."""
    async def run() -> None:
        rt = _runtime(1)
        plog = rt.offsets_topic.partitions[0]
        other = ("h", TID, 1)
        assert await rt.write(KEY, 0, ((0, 9, AVAILABLE, 1),))                    # offset 0: KEY's snapshot
        assert await rt.write(other, 0, ((0, 0, AVAILABLE, 1),))                  # 1: other's snapshot
        for i in range(SNAPSHOT_EVERY + 1):                                        # 2..: KEY's updates
            assert await rt.write(KEY, 0, ((i % 10, i % 10, AVAILABLE, 2 + i // 10),))
        assert plog.log_start_offset == 0
        assert await rt.write(KEY, 3, ((3, 3, ARCHIVED, 5),))                     # KEY's new snapshot
        snap_at = plog.log_end_offset - 1
        assert rt.shards[0].snapshots == {KEY: snap_at, other: 1}
        assert plog.log_start_offset == 1                                          # held back by other's
        assert await rt.delete(other)                                              # other gone
        assert await rt.write(KEY, 4, ((4, 4, ACKNOWLEDGED, 9),))                 # an update: prunes to KEY's
        assert plog.log_start_offset == snap_at
        before = rt.read(KEY)
        rt.begin_move(0)
        report = await rt.finish_move(0)
        assert rt.read(KEY) == before and rt.read(other) is None
        assert report.replayed == plog.log_end_offset - snap_at
    import asyncio
    asyncio.run(run())
