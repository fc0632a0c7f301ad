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
    for i in range(SNAPSHOT_EVERY):
        log.append(write(s, 3 + i, [(3 + i, 3 + i, AVAILABLE, 1)]))
    snapshots = [r for r in log if r.snapshot]
    assert len(snapshots) == 2 and snapshots[1].snapshot_epoch == 1
    assert s.read(KEY) == (3 + SNAPSHOT_EVERY - 1, ((3 + SNAPSHOT_EVERY - 1, 3 + SNAPSHOT_EVERY - 1, AVAILABLE, 1),))
    assert compacted(log).read(KEY) == s.read(KEY)


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
