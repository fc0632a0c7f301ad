"""Offsets committed inside transactions in the audit: offsets_history names the transactional id, producer id
and epoch and the outcome (committed / aborted / open), and aborted or open ones do not count as the group's
commits - on a crafted log (one case each) and on a log written by a real transactional producer."""
from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tenure.audit import job
from tenure.protocol import records as rec
from tenure.protocol import txn_records as txr
from tenure.protocol.markers import control_batch
from tenure.storage.reader import SegmentReader
from tenure.storage.segments import LogConfig, SegmentLog

from .logs import T0, Writer

G, TOPIC = "pay", "in"


def txn_batch(records: list, pid: int, epoch: int, ts: int) -> bytes:
    """A producer's transactional batch of offset commits, as TxnOffsetCommit writes it."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=0, batch_size=2 ** 31 - 1)
    for i, r in enumerate(records):
        key, value = rec.encode(r)
        b.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(b.build())


def commit(partition: int, offset: int, ts: int, group: str = G, metadata: str = "") -> rec.OffsetCommitRecord:
    return rec.OffsetCommitRecord(group, TOPIC, partition, offset, -1, metadata, ts)


def crafted(tmp: Path) -> None:
    state = SegmentLog(tmp / "__transaction_state-0", LogConfig(segment_bytes=1 << 20))
    for tid, pid, epoch, st in (("tx-a", 1000, 0, txr.COMPLETE_COMMIT), ("tx-b", 1001, 3, txr.COMPLETE_ABORT),
                                ("tx-c", 1002, 1, txr.ONGOING)):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=2 ** 31 - 1)
        key, value = txr.encode(txr.TransactionRecord(tid, pid, epoch, 60000, st, frozenset(), T0, T0))
        b.append(0, timestamp=T0, key=key, value=value, headers=[])
        state.append(bytes(b.build()))
    state.close()
    w = Writer(tmp, 0)
    w.add(commit(0, 5, T0 + 1), T0 + 1)                                             # a plain commit
    w.log.append(txn_batch([commit(0, 10, T0 + 2), commit(1, 20, T0 + 2)], 1000, 0, T0 + 2))   # committed
    w.log.append(txn_batch([commit(0, 99, T0 + 3)], 1001, 3, T0 + 3))                          # aborted
    w.log.append(control_batch(1000, 0, True, 0, T0 + 4))
    w.log.append(control_batch(1001, 3, False, 0, T0 + 5))
    w.log.append(txn_batch([commit(2, 7, T0 + 6)], 1002, 1, T0 + 6))                           # open
    # a producer id whose __transaction_state record is gone: committed, its transactional id unknown
    w.log.append(txn_batch([commit(3, 1, T0 + 7)], 1003, 0, T0 + 7))
    w.log.append(control_batch(1003, 0, True, 0, T0 + 8))
    w.close()


COLS = ("partition", "offset", "transactional_id", "producer_id", "producer_epoch", "outcome", "marker_offset",
        "log_offset")


def test_transactional_commits_are_named_with_their_producer_and_outcome(spark, tmp_path):
    crafted(tmp_path)
    code, summary = job.run(job.Options(str(tmp_path), str(tmp_path / "out")), spark=spark)
    assert code == 0
    html = (tmp_path / "out" / "report.html").read_text()
    assert "offset commits in transactions" in html and "aborted 1, committed 3, open 1" in html
    rows = sorted(tuple(r[c] for c in COLS)
                  for r in spark.read.parquet(str(tmp_path / "out" / "offsets_history")).collect())
    assert rows == [
        (0, 5, None, None, None, None, None, 0),
        (0, 10, "tx-a", 1000, 0, "committed", 4, 1),
        (0, 99, "tx-b", 1001, 3, "aborted", 5, 3),
        (1, 20, "tx-a", 1000, 0, "committed", 4, 2),
        (2, 7, "tx-c", 1002, 1, "open", None, 6),
        (3, 1, None, 1003, 0, "committed", 8, 7),
    ]
    # the group's commits: the plain one and the three of committed transactions, not the aborted or open
    assert summary["offset_commits"] == 4
    assert summary["transactional_commits"] == {"aborted": 1, "committed": 3, "open": 1}
    assert summary["errors"] == 0


def test_a_checkpoint_committed_in_an_aborted_transaction_is_not_a_catchup_checkpoint(spark, tmp_path):
    w = Writer(tmp_path, 0)
    md = "tenure.catchup/1 instance=w1 ranges="
    w.add(commit(0, 70, T0 + 1, group="app.catchup", metadata=md + "70-120:70"), T0 + 1)
    w.log.append(txn_batch([commit(0, 120, T0 + 2, group="app.catchup", metadata=md)], 7, 0, T0 + 2))
    w.log.append(control_batch(7, 0, False, 0, T0 + 3))
    w.close()
    tables, _ = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out")))
    ranges = [(r["lo"], r["hi"], r["owed_from"], r["closed"]) for r in tables["catchup_ranges"].collect()]
    assert ranges == [(70, 120, 70, None)]       # the aborted checkpoint did not close the range


def test_a_real_transactional_producers_offsets(spark, tmp_path):
    """confluent-kafka's transactional producer sends offsets in a committed, an aborted and a still open
    transaction: the audit names them as the server's own state says, and its latest counting commit is the
    offset the server answers for the group."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from tenure.config import ServerConfig
    from tenure.server import ServerThread

    data = tmp_path / "data"
    with ServerThread(ServerConfig(port=0, data_dir=str(data))) as s:
        bs = s.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        c = Consumer({"bootstrap.servers": bs, "group.id": G, "enable.auto.commit": False})
        p = Producer({"bootstrap.servers": bs, "transactional.id": "audit-tx"})
        p.init_transactions(30)
        for offset, end in ((5, p.commit_transaction), (9, p.abort_transaction), (12, None)):
            if end is None:
                # before the open transaction: while it holds offsets the client's committed() (a stable
                # OffsetFetch) is answered UNSTABLE_OFFSET_COMMIT until it ends
                committed = c.committed([TopicPartition(TOPIC, 0)], 30)[0].offset
            p.begin_transaction()
            p.produce(TOPIC, b"x")
            p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, offset)], c.consumer_group_metadata(), 30)
            if end is not None:
                end(30)
        p.flush(30)
        c.close()
    del p
    assert committed == 5
    code, _ = job.run(job.Options(str(data), str(tmp_path / "out"), report=False), spark=spark)
    assert code == 0
    rows = sorted((r.asDict() for r in spark.read.parquet(str(tmp_path / "out" / "offsets_history")).collect()
                   if r["group"] == G), key=lambda r: r["log_offset"])
    assert [(r["offset"], r["transactional_id"], r["outcome"]) for r in rows] == [
        (5, "audit-tx", "committed"), (9, "audit-tx", "aborted"), (12, "audit-tx", "open")]
    # the producer as the server's __transaction_state says (read here with the storage engine's reader)
    state = [txr.decode(r.key, r.value) for path in sorted(data.glob("__transaction_state-*/*.log"))
             for item in SegmentReader(str(path)) for r in DefaultRecordBatch(item.data)]
    producers = {(r["producer_id"], r["producer_epoch"]) for r in rows}
    assert len(producers) == 1 and next(iter(producers))[0] >= 0
    assert producers <= {(x.producer_id, x.producer_epoch) for x in state if x.transactional_id == "audit-tx"}
    counting = [r for r in rows if r["outcome"] in (None, "committed")]
    last = max(counting, key=lambda r: r["marker_offset"] if r["marker_offset"] is not None else r["log_offset"])
    assert last["offset"] == committed
