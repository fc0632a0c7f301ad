"""The partitions (broker/partition.py) and the replica manager (broker/replica_manager.py): the one append path
of the three writers (client produce, transaction markers, the coordinators' records) with the bookkeeping each
needs, the high watermark, the one read path (read_uncommitted and read_committed), and partitions made and
dropped with their topics."""
from __future__ import annotations

import ast
import asyncio
import pathlib
from types import SimpleNamespace

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tenure.broker.cluster import Cluster
from tenure.broker.dataplane import Broker, Node
from tenure.broker.topics import TopicRegistry
from tenure.coordinator.writer import CoordinatorWriter, LogAppender, PartitionWriter
from tenure.protocol.errors import ErrorCode
from tenure.protocol.markers import TxnMarker, control_batch
from tenure.storage import MemoryLog, parse_batches

REPO = pathlib.Path(__file__).resolve().parents[2]


def batch(n: int = 1, producer_id: int = -1, epoch: int = -1, sequence: int = -1, transactional: bool = False,
          value: bytes = b"v") -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                  batch_size=2**31 - 1)
    for i in range(n):
        b.append(i, timestamp=1000 + i, key=None, value=value, headers=[])
    return bytes(b.build())


def broker(*topics: str, partitions: int = 1) -> Broker:
    b = Broker(Node("127.0.0.1", 0), TopicRegistry(partitions))
    for t in topics:
        b.topics.create(t)
    return b


def produce(b: Broker, topic: str, raw: bytes, index: int = 0):
    p = b.replicas.get(topic, index)
    assert p is not None
    return b.replicas.append_records(p, raw, parse_batches(raw))


def marker(topic: str, producer_id: int, commit: bool, index: int = 0) -> TxnMarker:
    return TxnMarker("tx", topic, index, producer_id, 0, commit)


def offsets(data: bytes) -> list[int]:
    return [h.base_offset for h in parse_batches(data)] if data else []


def test_a_client_append_moves_the_high_watermark_and_a_retried_batch_is_not_appended_again():
    b = broker("t")
    p = b.replicas.get("t", 0)
    assert p.high_watermark == 0
    first = produce(b, "t", batch(3, producer_id=7, epoch=0, sequence=0))
    assert (first.error, first.base_offset, first.duplicate) == (0, 0, False)
    assert p.high_watermark == p.log_end_offset == 3
    again = produce(b, "t", batch(3, producer_id=7, epoch=0, sequence=0))          # the producer's retry
    assert (again.error, again.base_offset, again.duplicate) == (0, 0, True) and p.log_end_offset == 3
    gap = produce(b, "t", batch(1, producer_id=7, epoch=0, sequence=9))
    assert gap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and p.high_watermark == 3
    assert p.producers.active() == [(7, 0, 2, 1002)]


def test_every_append_is_stamped_with_the_partition_s_leader_epoch():
    b = Broker(Node("127.0.0.1", 0), TopicRegistry(1), cluster=Cluster(2))
    b.topics.create("t")
    produce(b, "t", batch())
    st = b.cluster.state("t", 0)
    b.cluster.move_leader("t", 0, st.replicas[1])             # epoch 1 starts at the partition's log end
    assert st.epochs[-1] == (1, 1)
    produce(b, "t", batch())
    headers = [h for h, _ in b.replicas.get("t", 0).log.batches(0)]
    assert [h.partition_leader_epoch for h in headers] == [0, 1]
    p = b.replicas.get("t", 0)
    assert p.leader_epoch == 1 and p.end_offset_for(0) == (0, 1) and p.end_offset_for(1) == (1, 2)
    assert b.replicas.last_epoch("t", 0) == 0                 # in memory: no epoch read back from the log


def test_a_transactional_batch_holds_the_last_stable_offset_until_its_marker():
    b = broker("t")
    p = b.replicas.get("t", 0)
    produce(b, "t", batch(2))                                               # 0-1
    produce(b, "t", batch(2, producer_id=5, epoch=0, sequence=0, transactional=True))   # 2-3, open
    produce(b, "t", batch(1))                                               # 4
    assert (p.high_watermark, p.last_stable_offset) == (5, 2)
    assert p.txns.open_at(5) == 2
    b.write_txn_markers([marker("t", 5, commit=False)], 2000)               # 5: the abort marker
    assert (p.high_watermark, p.last_stable_offset) == (6, 6) and p.txns.open_at(5) == -1
    assert b.replicas.read(p, 0, 1 << 20, committed=True).aborted == [(5, 2)]
    assert b.replicas.read(p, 0, 1 << 20, committed=False).aborted is None
    assert b.replicas.read(p, 5, 1 << 20, committed=True).aborted == [(5, 2)]     # the marker's offset
    assert b.replicas.read(p, 6, 1 << 20, committed=True).records == b""


def test_read_committed_stops_at_the_last_stable_offset_and_read_uncommitted_at_the_high_watermark():
    b = broker("t")
    p = b.replicas.get("t", 0)
    produce(b, "t", batch(1))
    produce(b, "t", batch(1, producer_id=5, epoch=0, sequence=0, transactional=True))
    produce(b, "t", batch(1))
    assert offsets(b.replicas.read(p, 0, 1 << 20, committed=True).records) == [0]
    assert offsets(b.replicas.read(p, 0, 1 << 20, committed=False).records) == [0, 1, 2]
    p.high_watermark = 2                    # its own value: a read never passes it, even below the log end
    assert offsets(b.replicas.read(p, 0, 1 << 20, committed=False).records) == [0, 1]
    assert b.replicas.read_end(p, committed=False) == 2 and b.replicas.read_end(p, committed=True) == 1
    b.write_txn_markers([marker("t", 5, commit=True)], 2000)
    assert p.high_watermark == 4 and offsets(b.replicas.read(p, 0, 1 << 20, committed=True).records) == [0, 1, 2, 3]
    assert b.replicas.read(p, 0, 1 << 20, committed=True).aborted == []


def test_a_read_returns_at_least_one_whole_batch_past_its_byte_budget():
    b = broker("t")
    p = b.replicas.get("t", 0)
    produce(b, "t", batch(1, value=b"x" * 500))
    produce(b, "t", batch(1, value=b"x" * 500))
    assert offsets(b.replicas.read(p, 0, 1, committed=False).records) == [0]
    assert offsets(b.replicas.read(p, 0, 1 << 20, committed=False).records) == [0, 1]


def test_the_coordinator_writes_through_the_replica_manager_with_the_same_bookkeeping():
    b = broker()
    b.topics.create("__consumer_offsets", 2, internal=True)
    through: PartitionWriter = b.replicas                    # the protocol the coordinator declares
    topic = b.topics.get("__consumer_offsets")
    writer = CoordinatorWriter(topic, lambda: 1000, through)
    p = b.replicas.get("__consumer_offsets", 1)
    log = writer._append(1, batch(2, producer_id=9, epoch=0, transactional=True))   # offsets in a transaction
    assert log is p.log and p.high_watermark == 2 and p.last_stable_offset == 0
    writer.write_marker(1, 9, 0, True, 0, 1000)
    assert p.high_watermark == 3 and p.last_stable_offset == 3
    assert not writer.durable_needed
    assert asyncio.run(writer.sync([log])) is True
    [h, _] = next(iter(p.log.batches(2)))
    assert h.is_control


def test_a_long_polling_fetch_is_woken_by_an_append_of_any_writer():
    async def scenario():
        b = broker("t")
        b.topics.create("__consumer_offsets", 1, internal=True)
        for append in (lambda: produce(b, "t", batch()),
                       lambda: b.write_txn_markers([marker("t", 3, commit=False)], 1),
                       lambda: b.replicas.append("__consumer_offsets", 0, batch())):
            parts = [b.replicas.get("t", 0), b.replicas.get("__consumer_offsets", 0)]
            waiting = asyncio.ensure_future(b.replicas.wait_for_append(parts, 30))
            await asyncio.sleep(0)
            assert b.replicas.waiting() == parts
            append()
            await asyncio.wait_for(waiting, 5)
            assert b.replicas.waiting() == []
    asyncio.run(scenario())


def test_deleting_a_topic_drops_its_partitions_and_wakes_their_fetches():
    async def scenario():
        b = broker("t", partitions=2)
        produce(b, "t", batch(1, producer_id=5, epoch=0, sequence=0, transactional=True))
        old = b.replicas.get("t", 0)
        waiting = asyncio.ensure_future(b.replicas.wait_for_append([old], 30))
        await asyncio.sleep(0)
        b.topics.delete("t")
        await asyncio.wait_for(waiting, 5)
        assert b.replicas.get("t", 0) is None and b.replicas.of_topic("t") == []
        assert b.write_txn_markers([marker("t", 5, commit=True)], 1) == []     # a deleted topic: skipped
        b.topics.create("t")                                     # the same name again: a new partition
        new = b.replicas.get("t", 0)
        assert new is not old and new.high_watermark == 0 and new.last_stable_offset == 0
        assert new.producers.active() == []
    asyncio.run(scenario())


def test_added_partitions_and_a_stopping_server():
    async def scenario():
        b = broker("t")
        b.topics.add_partitions("t", 3)
        assert [p.index for p in b.replicas.of_topic("t")] == [0, 1, 2]
        waiting = asyncio.ensure_future(b.replicas.wait_for_append(b.replicas.of_topic("t"), 30))
        await asyncio.sleep(0)
        b.stop_waiting()
        await asyncio.wait_for(waiting, 5)
        assert b.replicas.stopping
    asyncio.run(scenario())


def test_the_cluster_table_reads_its_storage_facts_from_the_partitions():
    b = Broker(Node("127.0.0.1", 0), TopicRegistry(1), cluster=Cluster(3))
    assert b.cluster.storage is b.replicas
    b.topics.create("t")
    produce(b, "t", batch(4))
    assert b.replicas.log_end_offset("t", 0) == 4 and b.replicas.log_end_offset("gone", 0) == 0
    st = b.cluster.state("t", 0)
    b.cluster.move_leader("t", 0, st.replicas[1])
    assert st.epochs == [(0, 0), (1, 4)]


def test_a_txn_index_is_rebuilt_from_the_log():
    b = broker("t")
    p = b.replicas.get("t", 0)
    produce(b, "t", batch(1, producer_id=5, epoch=0, sequence=0, transactional=True))
    b.write_txn_markers([marker("t", 5, commit=False)], 1)
    produce(b, "t", batch(1, producer_id=6, epoch=0, sequence=0, transactional=True))
    before = (dict(p.txns.open), list(p.txns.aborted_txns))
    p.txns.rebuild(p.log.batches(0))
    assert (p.txns.open, p.txns.aborted_txns) == before == ({6: 2}, [(5, 0, 1)])


def test_a_control_batch_is_recognised_by_its_bytes():
    raw = control_batch(5, 0, False, 0, 1)
    [h] = parse_batches(raw)
    assert h.is_control and h.is_transactional
    assert list(DefaultRecordBatch(raw))


def test_the_coordinator_does_not_import_the_broker():
    offenders = []
    for path in sorted((REPO / "coordinator").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "tenure.broker" or n.startswith("tenure.broker.") for n in names):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def test_a_standalone_coordinator_writes_straight_to_its_logs():
    logs = [MemoryLog("__consumer_offsets-0")]
    woken = []
    topic = SimpleNamespace(name="__consumer_offsets", partitions=logs)
    writer = CoordinatorWriter(topic, lambda: 1000, LogAppender(topic, notify_append=lambda t, i: woken.append((t, i))))
    assert writer._append(0, batch()) is logs[0] and woken == [("__consumer_offsets", 0)]
