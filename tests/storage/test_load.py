"""Loading __consumer_offsets at start-up: latest record per key, replayed in offset order, gives the state a
full replay in log order gives; unknown record types and keyless records are skipped and reported."""
import logging
import random
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.broker.topics import TopicRegistry
from tenure.coordinator import ClassicGroup, GroupShard
from tenure.coordinator.runtime import CoordinatorRuntime
from tenure.protocol import records as rec
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.storage.segments import CorruptLogError, SegmentLog


def history(seed: int, n: int = 400) -> list:
    """A random but well-formed stream of full-value records over a few groups."""
    r = random.Random(seed)
    out = []
    gen = {}
    for _ in range(n):
        gid = f"g{r.randrange(4)}"
        k = r.random()
        if k < 0.45:
            out.append(rec.OffsetCommitRecord(gid, f"t{r.randrange(2)}", r.randrange(3), r.randrange(1000),
                                              -1, "", 1000 + len(out)))
        elif k < 0.55:
            out.append(rec.OffsetCommitRecord(gid, f"t{r.randrange(2)}", r.randrange(3), tombstone=True))
        elif k < 0.85:
            gen[gid] = gen.get(gid, 0) + 1
            members = tuple(rec.MemberRecord(f"{gid}-m{i}-{gen[gid]}", f"{gid}-i{i}" if i % 2 == 0 else None,
                                             "c", "/h", 30000, 10000, b"sub", b"asg")
                            for i in range(r.randrange(0, 4)))
            out.append(rec.GroupMetadataRecord(gid, "consumer", gen[gid], "range" if members else None,
                                               members[0].member_id if members else None, 5, members))
        elif k < 0.95:
            out.append(rec.StaticMemberEventRecord(gid, f"{gid}-i{r.randrange(2)}", rec.REPLACED, "a", "b",
                                                   gen.get(gid, 0), 7, "c", "/h"))
        else:
            out.append(rec.GroupMetadataRecord(gid, tombstone=True))
    return out


def offsets_topic_with(records: list, extra: list[tuple[bytes | None, bytes | None]] = (), log_factory=None):
    topics = TopicRegistry(log_factory=log_factory)
    topic = topics.create(OFFSETS_TOPIC, 1, internal=True, configs={"cleanup.policy": "compact"})
    pairs = [rec.encode(x) for x in records] + list(extra)
    for i in range(0, len(pairs), 7):                    # several batches
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
        for j, (k, v) in enumerate(pairs[i:i + 7]):
            b.append(j, timestamp=1, key=k, value=v, headers=[])
        topic.partitions[0].append(bytes(b.build()))
    return topic


def state(co: GroupShard):
    groups = {gid: (g.state, g.generation, g.protocol_name, g.leader_id, dict(g.static_members),
                    sorted(g.members)) for gid, g in co.groups.items()}
    return groups, co.offsets, {k: set(v) for k, v in getattr(co, "static_event_keys", {}).items() if v}


@pytest.mark.parametrize("seed", range(12))
def test_latest_per_key_load_equals_a_full_replay(seed):
    records = history(seed)
    full = GroupShard()
    for r in records:
        full.replay(r)
    loaded = GroupShard()
    report = CoordinatorRuntime(lambda _partition: loaded, offsets_topic_with(records)).load()
    assert report.records == len(records) and report.replayed <= len(records)
    assert report.replayed == len({rec.encode(r)[0] for r in records})
    assert state(loaded) == state(full)


def test_unknown_record_types_and_keyless_records_are_skipped_and_reported(caplog):
    records = history(1, 50)
    unknown = (struct.pack(">h", 999) + b"future", b"\x00\x00value")
    topic = offsets_topic_with(records, extra=[unknown, unknown, (None, b"x")])
    co = GroupShard()
    with caplog.at_level(logging.WARNING):
        report = CoordinatorRuntime(lambda _partition: co, topic).load()
    assert report.unknown == {999: 1}                   # one key (its latest record) of an unknown type
    assert [(p, reason) for p, _, reason in report.undecodable] == [(0, "record without a key")]
    assert "skipped 1 record key(s) of unknown type (key version 999)" in caplog.text
    full = GroupShard()
    for r in records:
        full.replay(r)
    assert state(co) == state(full)


def test_a_group_left_with_neither_metadata_nor_offsets_is_not_loaded_as_on_kafka():
    """A commit-only group whose offsets were all deleted is gone: after a full replay (the live
    coordinator) and after the load (as Kafka's loader, which has no record naming a live group) alike.
    Nothing acknowledged is lost: it holds nothing."""
    records = [rec.OffsetCommitRecord("shell", "t", 0, 5, -1, "", 1),
               rec.OffsetCommitRecord("shell", "t", 0, tombstone=True),
               rec.OffsetCommitRecord("kept", "t", 0, 9, -1, "", 2)]
    full = GroupShard()
    for r in records:
        full.replay(r)
    loaded = GroupShard()
    CoordinatorRuntime(lambda _partition: loaded, offsets_topic_with(records)).load()
    assert set(full.groups) == {"kept"} and full.offsets.keys() == {"kept"}
    assert loaded.groups == full.groups and loaded.offsets == full.offsets


def test_a_deleted_groups_surviving_offsets_keep_it_as_an_empty_group_as_on_kafka():
    """Group existence is a function of the latest record per key: metadata or offsets. A GroupMetadata
    tombstone followed by a surviving offset gives an Empty group in a full replay and in the load."""
    records = [rec.OffsetCommitRecord("g", "t", 0, 5, -1, "", 1),
               rec.GroupMetadataRecord("g", tombstone=True)]
    full = GroupShard()
    for r in records:
        full.replay(r)
    loaded = GroupShard()
    CoordinatorRuntime(lambda _partition: loaded, offsets_topic_with(records)).load()
    assert full.groups == loaded.groups == {"g": ClassicGroup("g")}
    assert full.offsets == loaded.offsets and full.offsets["g"][("t", 0)].offset == 5


def test_group_partition_follows_kafkas_utils_abs_not_a_sign_mask():
    """Kafka places a group at Utils.abs(groupId.hashCode()) % partitions: Math.abs for a negative hash
    (Integer.MIN_VALUE -> 0), which differs from masking the sign bit for every negative hash."""
    from tenure.coordinator import java_string_hash, partition_for
    assert java_string_hash("roll-g") == -925410537          # Java: "roll-g".hashCode()
    assert partition_for("roll-g", 50) == 925410537 % 50 == 37
    assert java_string_hash("g") == 103 and partition_for("g", 50) == 3
    assert java_string_hash("") == 0 and partition_for("", 7) == 0
    # two strings with the same Java hash land together; "Aa" and "BB" both hash to 2112
    assert partition_for("Aa", 13) == partition_for("BB", 13) == 2112 % 13


def test_a_log_on_disk_loads_as_the_same_log_in_memory(tmp_path):
    records = history(3)
    on_disk = GroupShard()
    topic = offsets_topic_with(records, log_factory=lambda t, p: SegmentLog(tmp_path / f"{t}-{p}"))
    report = CoordinatorRuntime(lambda _partition: on_disk, topic).load()
    in_memory = GroupShard()
    again = CoordinatorRuntime(lambda _partition: in_memory, offsets_topic_with(records)).load()
    assert (report.batches, report.records, report.replayed) == (again.batches, again.records, again.replayed)
    assert state(on_disk) == state(in_memory)
    topic.partitions[0].close()


def test_a_batch_changed_on_disk_after_open_stops_the_load_naming_file_and_byte(tmp_path):
    """The load reads through the segment reader, which checks every batch again: a committed offset whose
    bytes changed on disk after the log was verified at open is never loaded as a different offset."""
    records = [rec.OffsetCommitRecord("g", "t", 0, 4242, -1, "", 1), rec.OffsetCommitRecord("g", "t", 1, 7, -1, "", 1)]
    topic = offsets_topic_with(records, log_factory=lambda t, p: SegmentLog(tmp_path / f"{t}-{p}"))
    path = topic.partitions[0].active.path
    data = path.read_bytes()
    spot = data.index(struct.pack(">q", 4242))
    path.write_bytes(data[:spot] + struct.pack(">q", 4243) + data[spot + 8:])
    with pytest.raises(CorruptLogError) as err:
        CoordinatorRuntime(lambda _partition: GroupShard(), topic).load()
    assert str(path) in str(err.value) and "at byte 0" in str(err.value) and "CRC-32C" in str(err.value)
    topic.partitions[0].close()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_load_holds_automatic_collection_off_and_leaves_it_as_it_was(tmp_path, enabled):
    """The load makes about one object per record: automatic garbage collection is off while it runs
    (tenure/gcpause.py) and as it was afterwards - also when the load stops at a damaged batch - and the
    loaded state is the same as a load with collection on."""
    import gc

    from tenure import gcpause
    records = history(5)
    seen = []

    class Watching(GroupShard):
        def replay(self, *args):
            seen.append((gc.isenabled(), gcpause.paused()))
            return super().replay(*args)

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        watched = Watching()
        CoordinatorRuntime(lambda _partition: watched, offsets_topic_with(records)).load()
        assert seen and set(seen) == {(False, True)}
        assert gc.isenabled() == enabled and not gcpause.paused()
        reference = GroupShard()
        for r in records:
            reference.replay(r)
        assert state(watched) == state(reference)

        topic = offsets_topic_with(records, log_factory=lambda t, p: SegmentLog(tmp_path / f"{t}-{p}"))
        path = topic.partitions[0].active.path
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF                                # the last batch's CRC no longer matches
        path.write_bytes(bytes(data))
        with pytest.raises(CorruptLogError):
            CoordinatorRuntime(lambda _partition: GroupShard(), topic).load()
        assert gc.isenabled() == enabled and not gcpause.paused()
        topic.partitions[0].close()
    finally:
        (gc.enable if was else gc.disable)()
