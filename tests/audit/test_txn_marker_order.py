"""The audit's committed offsets against the group coordinator's loader (coordinator/loader.py), for logs where
plain and transactional commits of one partition interleave (Kafka's replayEndTransactionMarker: at a commit
marker a transaction's offset becomes the group's only if its record is later in the log than the committed
one's; a tombstone drops the open transactions' offsets of its partition). Each crafted log is audited and
loaded into a GroupShard: the offsets the audit says are committed (offsets_history's rows with outcome null
or `committed`, the latest by coalesce(marker_offset, log_offset) then log_offset, none after a tombstone) are
the shard's, partition by partition; and a real confluent-kafka transactional producer's data dir, with a
consumer's plain commits between send_offsets_to_transaction and commit_transaction, gives the audit the
offsets the server answers."""
from __future__ import annotations

from pathlib import Path

import pytest

from tenure.audit import job
from tenure.coordinator import GroupShard
from tenure.coordinator.loader import LoadReport, replay_partition
from tenure.protocol import records as rec
from tenure.protocol.markers import control_batch

from .logs import T0, Writer, open_log
from .test_catchup_ranges import ck
from .test_transactions import txn_batch

G, TOPIC = "pay", "in"


def commit(partition: int, offset: int, metadata: str = "") -> rec.OffsetCommitRecord:
    return rec.OffsetCommitRecord(G, TOPIC, partition, offset, -1, metadata, T0)


class Log:
    """A crafted __consumer_offsets-0: plain commits, tombstones, transactional batches and markers, in order."""

    def __init__(self, tmp: Path) -> None:
        self.w = Writer(tmp, 0)
        self.t = T0

    def _ts(self) -> int:
        self.t += 1
        return self.t

    def plain(self, partition: int, offset: int) -> None:
        self.w.add(commit(partition, offset), self._ts())

    def delete(self, partition: int) -> None:
        self.w.add(rec.OffsetCommitRecord(G, TOPIC, partition, tombstone=True), self._ts())

    def txn(self, pid: int, *commits: tuple[int, int]) -> None:
        self.w.log.append(txn_batch([commit(p, o) for p, o in commits], pid, 0, self._ts()))

    def end(self, pid: int, commit: bool = True) -> None:
        self.w.log.append(control_batch(pid, 0, commit, 0, self._ts()))


def crafted(tmp: Path) -> dict[int, str]:
    """One case per partition of topic `in` (each its own producer ids); the outcomes the audit must give."""
    log = Log(tmp)
    # 0: a plain commit between a transactional commit and its marker: the plain one stays
    log.txn(1, (0, 20))
    log.plain(0, 10)
    log.end(1)
    # 1: a plain commit before the transactional one: the transaction's wins at its marker
    log.plain(1, 5)
    log.txn(2, (1, 25))
    log.end(2)
    # 2: a tombstone (OffsetDelete) between: the marker brings nothing back
    log.plain(2, 3)
    log.txn(3, (2, 30))
    log.delete(2)
    log.end(3)
    # 3: overlapping transactions, the later-written one committed first: the earlier-written one loses
    log.txn(4, (3, 40))
    log.txn(5, (3, 41))
    log.end(5)
    log.end(4)
    # 4: overlapping transactions committed in their writing order: both count, the later one last
    log.txn(6, (4, 50))
    log.txn(7, (4, 51))
    log.end(6)
    log.end(7)
    # 5: a plain commit after the marker: it wins (the usual order)
    log.txn(8, (5, 60))
    log.end(8)
    log.plain(5, 61)
    # 6: one transaction committing the partition twice: the later record
    log.txn(9, (6, 70), (6, 71))
    log.end(9)
    # 7: an aborted transaction and a still open one around a plain commit: the plain one
    log.txn(10, (7, 80))
    log.plain(7, 81)
    log.end(10, commit=False)
    log.txn(11, (7, 82))
    # 8: a plain commit, a transaction, a tombstone after its marker: none
    log.plain(8, 90)
    log.txn(12, (8, 91))
    log.end(12)
    log.delete(8)
    # 9: a tombstone, then a transaction written after it: the transaction's offset
    log.plain(9, 1)
    log.delete(9)
    log.txn(13, (9, 99))
    log.end(13)
    log.w.close()
    return {20: "superseded", 25: "committed", 30: "superseded", 40: "superseded", 41: "committed",
            50: "committed", 51: "committed", 60: "committed", 70: "committed", 71: "committed", 80: "aborted",
            82: "open", 91: "committed", 99: "committed"}


def audit_committed(rows: list[dict]) -> dict[tuple[str, str, int], int]:
    """The committed offsets the audit's offsets_history says: per (group, topic, partition), the latest of
    its plain and committed rows by coalesce(marker_offset, log_offset), then log_offset (docs/audit.md)."""
    latest: dict[tuple[str, str, int], dict] = {}
    for r in rows:
        if r["outcome"] not in (None, "committed"):
            continue
        key = (r["group"], r["topic"], r["partition"])
        at = (r["marker_offset"] if r["marker_offset"] is not None else r["log_offset"], r["log_offset"])
        if key not in latest or at > latest[key]["at"]:
            latest[key] = {**r, "at": at}
    return {k: r["offset"] for k, r in latest.items() if not r["deleted"]}


def loader_committed(data_dir: Path, partitions: int = 1) -> dict[tuple[str, str, int], int]:
    """The committed offsets the group coordinator's loader gives for the same log."""
    out: dict[tuple[str, str, int], int] = {}
    for part in range(partitions):
        plog, shard, report = open_log(data_dir, part), GroupShard(), LoadReport()
        try:
            replay_partition(plog, part, shard, rec, report)
        finally:
            plog.close()
        assert not report.undecodable and not report.unknown
        out.update({(g, t, p): r.offset for g, offsets in shard.offsets.items() for (t, p), r in offsets.items()})
    return out


def offsets_rows(spark, out: Path) -> list[dict]:
    return [r.asDict() for r in spark.read.parquet(str(out / "offsets_history")).collect()]


def test_the_audits_committed_offsets_are_the_loaders(spark, tmp_path):
    outcomes = crafted(tmp_path)
    code, summary = job.run(job.Options(str(tmp_path), str(tmp_path / "out"), report=False), spark=spark)
    assert code == 0
    rows = offsets_rows(spark, tmp_path / "out")
    assert {r["offset"]: r["outcome"] for r in rows if r["producer_id"] is not None} == outcomes
    expected = {(G, TOPIC, 0): 10, (G, TOPIC, 1): 25, (G, TOPIC, 3): 41, (G, TOPIC, 4): 51, (G, TOPIC, 5): 61,
                (G, TOPIC, 6): 71, (G, TOPIC, 7): 81, (G, TOPIC, 9): 99}
    assert loader_committed(tmp_path) == expected
    assert audit_committed(rows) == expected
    # the group's commits: 10 plain ones (tombstones too) and the 9 that became the group's at their markers
    assert summary["transactional_commits"] == {"aborted": 1, "committed": 9, "open": 1, "superseded": 3}
    assert summary["offset_commits"] == 10 + 9


def test_a_superseded_checkpoint_closes_no_range(spark, tmp_path):
    """catchup_ranges follows the same rule: a checkpoint committed in a transaction whose marker comes after a
    later plain checkpoint does not count; the plain one is the range's last word."""
    w = Writer(tmp_path, 0)
    md = "tenure.catchup/1 instance=w1 ranges="
    ck(w, 0, "0-10:0", T0 + 1, group="app.catchup", offset=0)
    w.log.append(txn_batch([rec.OffsetCommitRecord("app.catchup", "t", 0, 10, -1, md, T0 + 2)], 5, 0, T0 + 2))
    ck(w, 0, "0-10:4", T0 + 3, group="app.catchup", offset=4)          # plain, before the marker: it stays
    w.log.append(control_batch(5, 0, True, 0, T0 + 4))
    w.close()
    t = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out")))[0]
    assert [(r["lo"], r["hi"], r["closed"], r["owed_from"], r["owed_to"])
            for r in t["catchup_ranges"].collect()] == [(0, 10, None, 4, 10)]
    assert loader_committed(tmp_path) == {("app.catchup", "t", 0): 4}


@pytest.mark.timeout(120)
def test_a_real_producers_send_offsets_interleaved_with_plain_commits(spark, tmp_path):
    """confluent-kafka: a consumer's plain commit between send_offsets_to_transaction and commit_transaction
    (kept), one before it (replaced at the marker), and an OffsetDelete between (kafka-python's admin:
    nothing comes back): the audit's committed offsets are the server's answer and its loader's."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTopicPartition

    from tenure.config import ServerConfig
    from tenure.server import ServerThread

    data, topic, group = tmp_path / "data", "amo", "amo-group"
    with ServerThread(ServerConfig(port=0, data_dir=str(data))) as s:
        bs = s.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
        p = Producer({"bootstrap.servers": bs, "transactional.id": "amo-tx"})
        try:
            p.init_transactions(30)
            c.commit(offsets=[TopicPartition(topic, 1, 5), TopicPartition(topic, 2, 6)], asynchronous=False)
            p.begin_transaction()
            p.produce(topic, b"x", partition=0)
            p.send_offsets_to_transaction([TopicPartition(topic, q, o) for q, o in ((0, 20), (1, 25), (2, 30))],
                                          c.consumer_group_metadata(), 30)
            c.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)       # between: kept
            kp = KafkaAdminClient(bootstrap_servers=bs)       # OffsetDelete (confluent-kafka's admin has none)
            try:
                kp.delete_group_offsets(group, [KTopicPartition(topic, 2)])           # between: drops 30
            finally:
                kp.close()
            p.commit_transaction(30)
            answered = {tp.partition: tp.offset
                        for tp in c.committed([TopicPartition(topic, q) for q in range(3)], 30)}
        finally:
            c.close()
        del p
    assert answered == {0: 10, 1: 25, 2: -1001}                                   # -1001: no offset
    code, _ = job.run(job.Options(str(data), str(tmp_path / "out"), report=False), spark=spark)
    assert code == 0
    parts = len(list(data.glob("__consumer_offsets-*")))
    expected = {(group, topic, q): o for q, o in answered.items() if o >= 0}
    assert {k: v for k, v in loader_committed(data, parts).items() if k[0] == group} == expected
    rows = [r for r in offsets_rows(spark, tmp_path / "out") if r["group"] == group]
    assert audit_committed(rows) == expected
    assert sorted((r["partition"], r["offset"], r["outcome"]) for r in rows if r["producer_id"] is not None) == [
        (0, 20, "superseded"), (1, 25, "committed"), (2, 30, "superseded")]
