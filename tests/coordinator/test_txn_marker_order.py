"""A transaction's commit marker against plain commits of the same partition (Kafka's
OffsetMetadataManager.replayEndTransactionMarker and its replay of a tombstone):

- at a COMMIT marker, a pending transactional offset becomes the group's only if no offset is committed for
  its partition or its record (the TxnOffsetCommit's OffsetCommit record in __consumer_offsets) is later in
  the log than the committed one's: "the most recent committed offset" wins, whichever kind wrote it;
- a tombstone (OffsetDelete) removes the committed offset AND every open transaction's pending offset of
  the partition, so a marker after it brings nothing back; OffsetDelete writes that tombstone when only a
  pending offset exists too (Kafka's deleteOffsets).

Each case is run live (the shard replaying as it answers, markers replayed as the runtime does) with every
record and marker appended to a real log through the coordinator's writer, and then the log is loaded into a
fresh shard (coordinator/loader.py): live, journal replay and load must give the same offsets and the same
pending ones. A transaction still open at a load is completed by a marker afterwards on the loaded shard.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.producer import TxnOffsetCommitRequest

from tenure.coordinator import GroupShard
from tenure.coordinator.loader import LoadReport, replay_partition
from tenure.coordinator.writer import CoordinatorWriter
from tenure.protocol import records as rec
from tenure.protocol.records import OffsetCommitRecord, TransactionEnd
from tenure.storage import MemoryLog

from .harness import TXN_OFFSET_COMMIT, Harness


@dataclass
class Topic:
    name: str
    partitions: list


class Partition:
    """One __consumer_offsets partition: a harness's shard answering, its records and the markers appended
    to a MemoryLog through the CoordinatorWriter in the order they happen (as the runtime does)."""

    def __init__(self) -> None:
        self.h = Harness()       # its invariants after every input: journal replay, records, compaction
        self.log = MemoryLog("__consumer_offsets-0")
        self.writer = CoordinatorWriter(Topic("__consumer_offsets", [self.log]), lambda: self.h.now_ms)

    @property
    def shard(self) -> GroupShard:
        return self.h.coordinator

    def _written(self) -> None:
        records = self.h.take_records()
        if records:
            self.writer.write(records)

    def commit(self, offset: int, partition: int = 0) -> None:
        self.h.commit("g", "", -1, None, {"t": [(partition, offset)]})
        self._written()

    def txn_commit(self, pid: int, offset: int, partition: int = 0) -> None:
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        body = TxnOffsetCommitRequest(
            version=3, transactional_id=f"tx{pid}", group_id="g", producer_id=pid, producer_epoch=0,
            generation_id=-1, member_id="", group_instance_id=None, topics=[T(version=3, name="t", partitions=[
                T.TxnOffsetCommitRequestPartition(version=3, partition_index=partition, committed_offset=offset,
                                                  committed_leader_epoch=-1, committed_metadata="")])])
        token = self.h.send(TXN_OFFSET_COMMIT, 3, body)
        assert self.h.resp(token)["topics"][0]["partitions"][0]["error_code"] == 0
        self._written()

    def delete(self, partition: int = 0) -> None:
        token = self.h.offset_delete("g", {"t": [partition]})
        assert self.h.resp(token)["error_code"] == 0
        self._written()

    def marker(self, pid: int, commit: bool = True) -> None:
        self.writer.write_marker(0, pid, 0, commit, 0, self.h.now_ms)
        self.shard.replay(TransactionEnd(pid, 0, commit))

    def fetched(self, partition: int = 0) -> int:
        r = self.h.resp(self.h.fetch("g", {"t": [partition]}, version=7))
        return r["topics"][0]["partitions"][0]["committed_offset"]

    def loaded(self) -> GroupShard:
        fresh = GroupShard()
        report = LoadReport()
        replay_partition(self.log, 0, fresh, rec, report)
        assert not report.undecodable and not report.unknown
        return fresh

    def agree(self) -> GroupShard:
        """Live state == journal replay == the records replayed, compacted or not (the harness's invariants)
        == the log loaded into a fresh shard (offsets and pending ones)."""
        self.h.check_journal_replay()
        self.h.check_durable_replay()
        fresh = self.loaded()
        assert fresh.offsets == self.shard.offsets, "the load and the live shard differ"
        assert fresh.pending_offsets == self.shard.pending_offsets, "the load and the live shard differ (pending)"
        return fresh


def offset_of(shard: GroupShard, partition: int = 0) -> int | None:
    r = shard.committed_offsets("g").get(("t", partition))
    return None if r is None else r.offset


def test_a_plain_commit_before_the_transactional_one_is_replaced_at_the_marker():
    p = Partition()
    p.commit(10)
    p.txn_commit(7, 20)
    assert p.fetched() == 10                       # pending until the marker
    p.marker(7)
    assert p.fetched() == 20 and offset_of(p.agree()) == 20


def test_a_plain_commit_between_the_transactional_one_and_its_marker_is_kept():
    p = Partition()
    p.txn_commit(7, 20)
    p.commit(10)                                   # written after the transaction's record: the most recent
    p.marker(7)
    assert p.fetched() == 10 and offset_of(p.agree()) == 10
    assert not p.shard.has_pending_offsets("g")
    p.txn_commit(8, 30)                            # a later transaction replaces it
    p.marker(8)
    assert p.fetched() == 30 and offset_of(p.agree()) == 30


def test_only_the_partition_written_in_between_keeps_its_plain_commit():
    p = Partition()
    p.txn_commit(7, 20, partition=0)
    p.txn_commit(7, 21, partition=1)
    p.commit(10, partition=0)
    p.marker(7)
    assert (p.fetched(0), p.fetched(1)) == (10, 21)
    loaded = p.agree()
    assert (offset_of(loaded, 0), offset_of(loaded, 1)) == (10, 21)


def test_an_offset_delete_between_the_transactional_commit_and_its_marker_drops_the_pending_offset():
    p = Partition()
    p.commit(10)
    p.txn_commit(7, 20)
    p.delete()
    assert p.h.take_records() == [] and not p.shard.has_pending_offsets("g")
    p.marker(7)
    assert p.fetched() == -1 and offset_of(p.agree()) is None


def test_an_offset_delete_with_only_a_pending_offset_writes_a_tombstone():
    p = Partition()
    p.txn_commit(7, 20)
    token = p.h.offset_delete("g", {"t": [0, 0]})            # a repeated partition: one tombstone
    assert p.h.take_records() == [OffsetCommitRecord("g", "t", 0, tombstone=True)]
    assert p.h.resp(token)["error_code"] == 0
    assert not p.shard.has_pending_offsets("g")
    p.marker(7)
    assert p.fetched() == -1


def test_a_plain_commit_after_the_delete_stays_and_a_later_transaction_still_counts():
    p = Partition()
    p.txn_commit(7, 20)
    p.delete()
    p.commit(15)
    p.marker(7)                                    # its offset was dropped by the tombstone
    assert p.fetched() == 15 and offset_of(p.agree()) == 15


def test_two_overlapping_transactions_the_later_record_wins_whatever_the_marker_order():
    p = Partition()
    p.txn_commit(7, 30)
    p.txn_commit(8, 40)
    p.marker(8)
    p.marker(7)                                    # 7's record is older than 8's, committed first
    assert p.fetched() == 40 and offset_of(p.agree()) == 40


def test_an_aborted_transaction_leaves_the_plain_commit():
    p = Partition()
    p.commit(10)
    p.txn_commit(7, 20)
    p.marker(7, commit=False)
    assert p.fetched() == 10 and offset_of(p.agree()) == 10


def test_a_transaction_open_at_a_load_is_judged_by_log_places_when_its_marker_follows():
    """The open transaction's record is loaded as pending with its log offset; a plain commit before the load
    (later in the log) and one after it (live) both win at the marker."""
    p = Partition()
    p.txn_commit(7, 20)
    p.commit(10)
    loaded = p.agree()
    assert loaded.has_pending_offsets("g", "t", 0)
    loaded.replay(TransactionEnd(7, 0, True))
    assert offset_of(loaded) == 10

    q = Partition()
    q.txn_commit(7, 20, partition=0)
    q.commit(5, partition=1)
    q.h.coordinator = q.agree()                    # the shard now answering is the loaded one (no journal
    q.h.auto_check = False                         # of what it loaded: the load is checked against the log)
    q.commit(10, partition=0)                      # live, after the load: numbered after every loaded record
    q.marker(7)
    assert q.fetched(0) == 10
    assert offset_of(q.loaded()) == 10


def test_an_open_transaction_at_a_load_whose_partition_was_deleted_is_not_pending():
    p = Partition()
    p.commit(10)
    p.txn_commit(7, 20)
    p.delete()
    loaded = p.agree()
    assert not loaded.has_pending_offsets("g") and offset_of(loaded) is None


def test_delete_groups_writes_a_tombstone_for_a_partition_only_an_open_transaction_holds():
    """Kafka's deleteAllOffsets: DeleteGroups writes a tombstone for each committed offset and for each
    partition an open transaction holds an offset of; the transaction's marker after it brings nothing back."""
    p = Partition()
    p.commit(10, partition=0)
    p.txn_commit(7, 20, partition=1)
    token = p.h.delete("g")
    assert p.h.resp(token)["results"][0]["error_code"] == 0
    tombstones = [r for r in p.h.take_records() if isinstance(r, OffsetCommitRecord)]
    assert tombstones == [OffsetCommitRecord("g", "t", 0, tombstone=True), OffsetCommitRecord("g", "t", 1, tombstone=True)]
    p.writer.write(tombstones)
    assert not p.shard.has_pending_offsets("g")
    p.marker(7)
    assert p.shard.committed_offsets("g") == {} and p.fetched(1) == -1
    assert p.agree().committed_offsets("g") == {}
