"""The records of a batch (storage/reader.py `batch_records`): kafka-python's reader and the optional C
accelerator (aiokafka's record reader) give the same records - offset, key, value, headers - over every batch
of a log that was compacted, holds transactions (committed, aborted and open), compressed, keyless and
header-carrying records, and had its torn tail cut by recovery; a record that cannot be read makes the whole
batch unreadable for both; and the coordinator's load reaches the same state through either."""
from __future__ import annotations

import random
import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.broker.topics import TopicRegistry
from tenure.coordinator import GroupShard
from tenure.coordinator.runtime import CoordinatorRuntime
from tenure.protocol import records as rec
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.protocol.markers import control_batch
from tenure.storage import reader
from tenure.storage.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, read_header
from tenure.storage.compaction import CompactionPolicy, Compactor
from tenure.storage.segments import LogConfig, SegmentLog


@pytest.fixture(autouse=True)
def _default_reader():
    yield
    reader.set_record_reader(None)


def batch(records, *, compression: int = 0, producer_id: int = -1, transactional: bool = False,
          headers=()) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=0 if producer_id >= 0 else -1, batch_size=2 ** 30)
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=1_700_000_000_000 + i, key=k, value=v, headers=list(headers))
    return bytes(b.build())


def history(seed: int) -> list:
    """Coordinator records over a few groups: offsets, group metadata, static-member events, tombstones."""
    r = random.Random(seed)
    out: list = []
    for n in range(300):
        gid = f"g{r.randrange(3)}"
        k = r.random()
        if k < 0.6:
            out.append(rec.OffsetCommitRecord(gid, "t", r.randrange(4), r.randrange(10 ** 6), -1, "m", n))
        elif k < 0.7:
            out.append(rec.OffsetCommitRecord(gid, "t", r.randrange(4), tombstone=True))
        elif k < 0.9:
            members = tuple(rec.MemberRecord(f"{gid}-m{i}-{n}", f"i{i}", "c", "/h", 30000, 10000, b"s", b"a")
                            for i in range(r.randrange(3)))
            out.append(rec.GroupMetadataRecord(gid, "consumer", n, "range" if members else None,
                                               members[0].member_id if members else None, n, members))
        else:
            out.append(rec.StaticMemberEventRecord(gid, "i0", rec.REPLACED, "a", "b", n, n, "c", "/h"))
    return out


def mixed_log(path, seed: int = 1) -> SegmentLog:
    """Plain batches of coordinator records, transactional offset commits (committed, aborted, one left
    open), a gzip batch, a batch with headers and a keyless record, in small segments; then compacted
    (whole batches dropped, batches rewritten) and given a torn tail that recovery cuts at the next open."""
    plog = SegmentLog(path, LogConfig(segment_bytes=700))
    r = random.Random(seed)
    pairs = [rec.encode(x) for x in history(seed)]
    pid = 7
    while pairs:
        n = r.randrange(1, 5)
        pairs_now, pairs = pairs[:n], pairs[n:]
        roll = r.random()
        if roll < 0.1:
            plog.append(batch(pairs_now, producer_id=pid, transactional=True))
            plog.append(control_batch(pid, 0, r.random() < 0.6, 0, 1_700_000_000_000))
            pid += 1
        elif roll < 0.15:
            plog.append(batch(pairs_now, compression=1))         # gzip
        else:
            plog.append(batch(pairs_now))
    plog.append(batch([(b"k", b"v"), (None, b"keyless")], headers=[("h", b"x"), ("n", None)]))
    plog.append(batch([rec.encode(rec.OffsetCommitRecord("g0", "t", 9, 1, -1, "", 1))], producer_id=99,
                      transactional=True))                      # still open at the end
    Compactor(clock_ms=lambda: 1_800_000_000_000).clean_fully(plog, CompactionPolicy(delete_retention_ms=0))
    # the cleaner removed the aborted transactions and compacted the committed ones by key: appended after
    # it, a committed and an aborted transaction and more plain batches stay as they were written
    more = [rec.encode(x) for x in history(seed + 1000)][:40]
    for i, commit in enumerate((True, False)):
        plog.append(batch(more[i * 4:i * 4 + 4], producer_id=200 + i, transactional=True))
        plog.append(control_batch(200 + i, 0, commit, 0, 1_700_000_000_000))
    for i in range(8, 40, 4):
        plog.append(batch(more[i:i + 4]))
    path_active, size = plog.active.path, plog.active.size
    plog.append(batch([(b"torn", b"tail")]))
    plog.close()
    with open(path_active, "r+b") as f:                          # a crash mid-write: a torn last batch
        f.truncate(size + 30)
    return SegmentLog(path, LogConfig(segment_bytes=700))


def records_by(name: str, plog: SegmentLog) -> list:
    assert reader.set_record_reader(name) == name
    return [[(r.offset, r.key, r.value, list(r.headers)) for r in reader.batch_records(h, raw)]
            for h, raw in plog.batches(0)]


def test_both_readers_give_the_same_records_of_a_compacted_transactional_torn_log(tmp_path):
    plog = mixed_log(tmp_path / f"{OFFSETS_TOPIC}-0")
    try:
        assert plog.truncated, "recovery cut the torn tail"
        headers = [h for h, _ in plog.batches(0)]
        assert any(h.is_control for h in headers) and any(h.is_transactional and not h.is_control for h in headers)
        assert any(h.attributes & 7 for h in headers), "a compressed batch survived compaction"
        offsets = [h.base_offset for h in headers]
        assert any(b > a_next for a_next, b in zip([h.next_offset for h in headers], offsets[1:], strict=False)), \
            "the cleaner left gaps"
        c, python = records_by("c", plog), records_by("kafka-python", plog)
        assert c == python
        flat = [x for b in python for x in b]
        assert len(flat) > 40
        assert (None, b"keyless") in [(k, v) for _, k, v, _ in flat]
        assert [("h", b"x"), ("n", None)] in [hs for *_, hs in flat]
        assert any(v is None for _, _, v, _ in flat), "tombstones are read as None"
    finally:
        plog.close()


def test_the_load_reaches_the_same_state_through_either_reader(tmp_path):
    plog = mixed_log(tmp_path / f"{OFFSETS_TOPIC}-0", seed=5)
    plog.close()
    loaded = {}
    for name in reader.RECORD_READERS:
        reader.set_record_reader(name)
        topics = TopicRegistry(log_factory=lambda t, p: SegmentLog(tmp_path / f"{t}-{p}", LogConfig(segment_bytes=700)))
        topic = topics.create(OFFSETS_TOPIC, 1, internal=True, configs={"cleanup.policy": "compact"})
        shard = GroupShard()
        report = CoordinatorRuntime(lambda _p, shard=shard: shard, topic).load()
        loaded[name] = ((report.batches, report.records, report.replayed, report.undecodable),
                        shard.groups, shard.offsets, shard.static_event_keys)
        topic.partitions[0].close()
    assert loaded["c"] == loaded["kafka-python"]
    (batches, records, replayed, skipped), groups, offsets, _ = loaded["c"]
    assert replayed > 10 and groups and offsets
    assert [why for _, _, why in skipped] == ["record without a key",      # the keyless record, and b"k":
                                             "ValueError: record key shorter than its version prefix"]


def _recount(raw: bytes, count: int) -> bytes:
    """The batch with another records count, its CRC made valid again (written so, not damaged on disk)."""
    b = bytearray(raw)
    struct.pack_into(">i", b, 57, count)
    struct.pack_into(">I", b, CRC_OFFSET, crc32c.crc32c(bytes(b[ATTRIBUTES_OFFSET:])))
    return bytes(b)


@pytest.mark.parametrize("count", [1, 3], ids=["a record left over", "a record missing"])
def test_a_batch_whose_records_cannot_be_read_is_refused_whole_by_both(count):
    raw = _recount(batch([(b"a", b"1"), (b"b", b"2")]), count)
    h = read_header(raw, 0)
    for name in reader.RECORD_READERS:
        reader.set_record_reader(name)
        with pytest.raises(Exception, match="unconsumed bytes|Can't read|invalid record|out of range"):
            reader.batch_records(h, raw)


def test_without_the_accelerator_kafka_pythons_reader_is_used(monkeypatch):
    monkeypatch.setattr(reader, "_c_reader", lambda: None)
    assert reader.set_record_reader("c") == "kafka-python"
    assert reader.set_record_reader(None) == "kafka-python"
    raw = batch([(b"a", b"1")])
    assert [(r.key, r.value) for r in reader.batch_records(read_header(raw, 0), raw)] == [(b"a", b"1")]
    with pytest.raises(ValueError, match="one of c, kafka-python"):
        reader.set_record_reader("rust")


def test_without_aiokafka_installed_the_default_is_kafka_pythons_reader(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "aiokafka.record._crecords.default_records", None)    # not importable
    assert reader.set_record_reader(None) == "kafka-python" == reader.record_reader()


@pytest.mark.parametrize("name", reader.RECORD_READERS)
def test_an_offset_committed_in_a_transaction_counts_at_its_marker_as_the_live_shard_replays_it(tmp_path, name):
    """A transactional commit followed by a plain one of the same partition before its marker: the plain one,
    written later, stays at the marker (Kafka's replayEndTransactionMarker keeps the most recent, as
    `GroupShard.replay` does live); a plain commit after the marker wins over the transaction's; an aborted
    transaction's offset never counts; one still open at the end is pending."""
    reader.set_record_reader(name)
    topics = TopicRegistry(log_factory=lambda t, p: SegmentLog(tmp_path / f"{t}-{p}"))
    topic = topics.create(OFFSETS_TOPIC, 1, internal=True, configs={"cleanup.policy": "compact"})
    plog = topic.partitions[0]

    def offset(p: int, o: int):
        return rec.encode(rec.OffsetCommitRecord("g", "t", p, o, -1, "", 1))
    plog.append(batch([offset(0, 10)], producer_id=5, transactional=True))
    plog.append(batch([offset(0, 20)]))
    plog.append(control_batch(5, 0, True, 0, 1))                 # commit: partition 0 stays 20 (the later)
    plog.append(batch([offset(1, 5)], producer_id=6, transactional=True))
    plog.append(control_batch(6, 0, True, 0, 1))
    plog.append(batch([offset(1, 6)]))                           # after the marker: partition 1 is 6
    plog.append(batch([offset(2, 9)], producer_id=7, transactional=True))
    plog.append(control_batch(7, 0, False, 0, 1))                # abort: partition 2 has none
    plog.append(batch([offset(3, 4)], producer_id=8, transactional=True))   # open at the end
    shard = GroupShard()
    CoordinatorRuntime(lambda _p: shard, topic).load()
    assert {tp: r.offset for tp, r in shard.offsets["g"].items()} == {("t", 0): 20, ("t", 1): 6}
    assert {pid: {tp: r.offset for tp, r in groups["g"].items()} for pid, groups in shard.pending_offsets.items()} \
        == {8: {("t", 3): 4}}
    plog.close()


def test_a_group_deleted_between_a_transactional_commit_and_its_marker_loads_as_live_replay_left_it(tmp_path):
    """The group's metadata is deleted between a transactional commit and its marker: live, the marker's offset
    counts after the deletion (the group is there, with the offset); the load gives the same groups and
    offsets (the survivors are ordered with the transaction's records at its marker)."""
    members = (rec.MemberRecord("m1", "i1", "c", "/h", 30000, 10000, b"s", b"a"),)
    gm = rec.GroupMetadataRecord("g", "consumer", 3, "range", "m1", 7, members)
    tomb = rec.GroupMetadataRecord("g", tombstone=True)
    committed = rec.OffsetCommitRecord("g", "t", 0, 10, -1, "", 1)
    topics = TopicRegistry(log_factory=lambda t, p: SegmentLog(tmp_path / f"{t}-{p}"))
    topic = topics.create(OFFSETS_TOPIC, 1, internal=True, configs={"cleanup.policy": "compact"})
    plog = topic.partitions[0]
    plog.append(batch([rec.encode(gm)]))
    plog.append(batch([rec.encode(committed)], producer_id=5, transactional=True))
    plog.append(batch([rec.encode(tomb)]))
    plog.append(control_batch(5, 0, True, 0, 1))
    live = GroupShard()
    for event in (gm, rec.TransactionalOffsetCommit(5, 0, committed), tomb, rec.TransactionEnd(5, 0, True)):
        live.replay(event)
    loaded = GroupShard()
    CoordinatorRuntime(lambda _p: loaded, topic).load()
    assert (loaded.groups, loaded.offsets) == (live.groups, live.offsets)
    assert "g" in live.groups and live.offsets["g"][("t", 0)].offset == 10
    plog.close()
