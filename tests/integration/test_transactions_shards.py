"""Transactions over several `__consumer_offsets` partitions (`--offsets-partitions 8`): a confluent-kafka
consume-transform-produce for two groups on different offsets partitions. The offsets a transaction commits
are written to the group's own partition as the producer's transactional batch, held by that partition's
shard (OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT, 88) until the marker the transaction
coordinator writes there: commit makes them the group's, abort drops them; a restart restores both, and a
transaction left open across it still holds its group's offsets until it commits."""
from __future__ import annotations

import time

import pytest

from tenure.config import ServerConfig
from tenure.coordinator import partition_for
from tenure.coordinator.loader import iter_batches
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.protocol.markers import COMMIT, marker_type
from tenure.server import ServerThread
from tests.support.groupwire import fetch_all
from tests.support.wire import WireClient, create_topic

pytestmark = pytest.mark.timeout(120)

N = 8
NONE, UNSTABLE_OFFSET_COMMIT = 0, 88
IN, OUT = "ctp-in", "ctp-out"


def two_groups() -> tuple[str, str]:
    """Two group ids on different offsets partitions."""
    first = "ctp-g0"
    for i in range(1, 100):
        gid = f"ctp-g{i}"
        if partition_for(gid, N) != partition_for(first, N):
            return first, gid
    raise AssertionError("no second partition")


def stable_fetch(c: WireClient, group: str) -> dict[int, tuple[int, int]]:
    from kafka.protocol.consumer.group import OffsetFetchRequest as F
    r = c.call(F(group_id=group, topics=[F.OffsetFetchRequestTopic(name=IN, partition_indexes=[0, 1])],
                 require_stable=True), 7)
    return {p.partition_index: (p.error_code, p.committed_offset) for t in r.topics for p in t.partitions}


def unstable(sent: dict[int, int]) -> dict[int, tuple[int, int]]:
    """What require_stable answers while a transaction holds offsets for the partitions in `sent` (Kafka
    checks each partition: the others answer as usual, here nothing committed)."""
    return {p: (UNSTABLE_OFFSET_COMMIT if p in sent else NONE, -1) for p in (0, 1)}


def pending_shards(st: ServerThread, group: str) -> list[int]:
    """The offsets partitions whose shard holds offsets of an open transaction for `group`."""
    return st.call(lambda: [p for p, shard in st.server.runtime.shards.items() if shard.has_pending_offsets(group)])


def markers(st: ServerThread) -> dict[int, list[str]]:
    """The transaction markers (commit/abort) in each __consumer_offsets partition, in log order."""
    def read():
        out = {}
        for p, plog in enumerate(st.server.topics.get(OFFSETS_TOPIC).partitions):
            found = ["commit" if marker_type(raw) == COMMIT else "abort"
                     for h, raw in iter_batches(plog) if h.is_control]
            if found:
                out[p] = found
        return out
    return st.call(read)


def consume(consumer, count: int) -> list:
    got, deadline = [], time.time() + 30
    while len(got) < count:
        assert time.time() < deadline, f"consumed {len(got)} of {count}"
        m = consumer.poll(0.2)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m)
    return got


def transform(bs: str, group: str, consumer, producer, count: int) -> dict[int, int]:
    """Consume `count` records, produce their transform and send the consumer's positions to the open
    transaction (the transaction is left open); returns the positions sent."""
    from confluent_kafka import TopicPartition
    producer.begin_transaction()
    for m in consume(consumer, count):
        producer.produce(OUT, value=f"{group}:{m.value().decode()}".encode(), partition=0)
    positions = {tp.partition: tp.offset for tp in consumer.position([TopicPartition(IN, 0), TopicPartition(IN, 1)])
                 if tp.offset >= 0}
    producer.send_offsets_to_transaction([TopicPartition(IN, p, o) for p, o in positions.items()],
                                         consumer.consumer_group_metadata(), 30)
    producer.flush(30)
    return positions


def read_committed(bs: str, expect: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "ctp-reader", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(OUT, 0, 0)])
    try:
        got = [m.value() for m in consume(c, expect)]
        extra = c.poll(1.0)                      # nothing more: the aborted transaction's records never show
        assert extra is None or extra.error() is not None, extra.value()
        return got
    finally:
        c.close()


def test_consume_transform_produce_over_eight_offsets_partitions(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    g1, g2 = two_groups()
    p1, p2 = partition_for(g1, N), partition_for(g2, N)
    cfg = ServerConfig(port=0, data_dir=str(tmp_path / "d"), offsets_partitions=N)
    with ServerThread(cfg) as st:
        bs = st.bootstrap
        with WireClient.to(bs) as c:
            create_topic(c, IN, 2)
            create_topic(c, OUT, 1)
        source = Producer({"bootstrap.servers": bs})
        for i in range(12):
            source.produce(IN, value=str(i).encode(), partition=i % 2)
        source.flush(30)
        clients = {}
        for g in (g1, g2):
            consumer = Consumer({"bootstrap.servers": bs, "group.id": g, "enable.auto.commit": False,
                                 "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
            consumer.subscribe([IN])
            producer = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{g}", "linger.ms": 5})
            producer.init_transactions(30)
            clients[g] = (consumer, producer)
        try:
            # g1 commits: its offsets are pending in its own shard only until the commit marker
            sent1 = transform(bs, g1, *clients[g1], count=6)
            assert sent1 and sum(sent1.values()) == 6
            with WireClient.to(bs) as c:
                assert stable_fetch(c, g1) == unstable(sent1)
                assert fetch_all(c, [g1]) == {g1: {}}
            assert pending_shards(st, g1) == [p1]
            clients[g1][1].commit_transaction(30)
            with WireClient.to(bs) as c:
                assert fetch_all(c, [g1]) == {g1: {(IN, p): o for p, o in sent1.items()}}
                assert stable_fetch(c, g1) == {p: (NONE, sent1.get(p, -1)) for p in (0, 1)}
            assert pending_shards(st, g1) == []

            # g2 aborts: its offsets never become the group's
            sent2 = transform(bs, g2, *clients[g2], count=6)
            with WireClient.to(bs) as c:
                assert stable_fetch(c, g2) == unstable(sent2)
                assert stable_fetch(c, g1) == {p: (NONE, sent1.get(p, -1)) for p in (0, 1)}   # g1 unaffected
            assert pending_shards(st, g2) == [p2]
            clients[g2][1].abort_transaction(30)
            with WireClient.to(bs) as c:
                assert fetch_all(c, [g2]) == {g2: {}}
                assert stable_fetch(c, g2) == {0: (NONE, -1), 1: (NONE, -1)}
            assert pending_shards(st, g2) == []
            # each marker is in its group's offsets partition and nowhere else
            assert markers(st) == {p1: ["commit"], p2: ["abort"]}

            # g2 again, left open across a restart
            consumer2, producer2 = clients[g2]
            producer2.begin_transaction()
            sent3 = dict(sent2)
            producer2.produce(OUT, value=f"{g2}:after-restart".encode(), partition=0)
            producer2.send_offsets_to_transaction([TopicPartition(IN, p, o) for p, o in sent3.items()],
                                                  consumer2.consumer_group_metadata(), 30)
            producer2.flush(30)
            for consumer, _ in clients.values():
                consumer.close()
            st.restart()
            with WireClient.to(bs) as c:
                assert fetch_all(c, [g1, g2]) == {g1: {(IN, p): o for p, o in sent1.items()}, g2: {}}
                assert stable_fetch(c, g2) == unstable(sent2)
            assert pending_shards(st, g2) == [p2]
            producer2.commit_transaction(30)
            with WireClient.to(bs) as c:
                assert fetch_all(c, [g1, g2]) == {g1: {(IN, p): o for p, o in sent1.items()},
                                                  g2: {(IN, p): o for p, o in sent3.items()}}
                assert stable_fetch(c, g2) == {p: (NONE, sent3.get(p, -1)) for p in (0, 1)}
            assert markers(st) == {p1: ["commit"], p2: ["abort", "commit"]}
            # read_committed sees g1's transform and g2's committed one, never g2's aborted records
            out = read_committed(bs, 7)
            assert len(out) == 7 and f"{g2}:after-restart".encode() in out
            assert sum(v.startswith(f"{g1}:".encode()) for v in out) == 6
        finally:
            for _consumer, producer in clients.values():
                producer.flush(5)


def test_transaction_timeouts_share_the_group_timer_wheel():
    """One timer wheel for both coordinators: advance_clock fires a transaction's timeout and a member's
    session in the order of their deadlines; unloading the offsets partition its transactional id hashes
    to leaves the transaction's timer alone."""
    from kafka.protocol.producer import InitProducerIdRequest

    from tests.integration.test_transactions import add_v3, codes_v3
    from tests.support.groupwire import join, sync
    tid = next(f"ctp-tx{i}" for i in range(100) if partition_for(f"ctp-tx{i}", N) != partition_for("ctp-g0", N))
    with ServerThread(ServerConfig(port=0, offsets_partitions=N)) as st, WireClient.to(st.bootstrap) as c:
        create_topic(c, IN, 1)
        r = join(c, "ctp-g0", "", "i-1", IN, session_ms=20_000)
        assert sync(c, "ctp-g0", r.member_id, r.generation_id, "i-1", {r.member_id: b""}).error_code == NONE
        r = c.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=10_000, producer_id=-1,
                                         producer_epoch=-1), 4)
        added = c.call(add_v3(tid, r.producer_id, r.producer_epoch, [(IN, [0])]), 3)
        assert codes_v3(added) == {(IN, 0): NONE}
        st.call(lambda: st.server.runtime.unload(partition_for(tid, N)))
        fired = st.advance_clock(60_000)
        assert [f.split("/")[0] for f in fired if f.startswith(("txn_timeout/", "heartbeat/"))] \
            == ["txn_timeout", "heartbeat"], fired
        state = st.call(lambda: st.server.txn_runtime.shards[0].transactions[tid])
        assert state.state_name == "CompleteAbort"


def test_unloading_an_offsets_partition_drops_its_pending_offsets_and_reload_reads_them_back():
    """Unload drops the shard's pending transactional offsets with the rest of its state; a marker written
    while the partition is unloaded goes to its log, and the reload reads the offsets and the marker back."""
    from kafka.protocol.producer import EndTxnRequest

    from tests.integration.test_transactions import begin_offsets, txn_offsets
    g1, g2 = two_groups()
    p1 = partition_for(g1, N)
    with ServerThread(ServerConfig(port=0, offsets_partitions=N)) as st, WireClient.to(st.bootstrap) as c:
        create_topic(c, IN, 2)
        sent = {}
        for g, tid, offset in ((g1, "ctp-u1", 5), (g2, "ctp-u2", 9)):
            pid, epoch = begin_offsets(c, tid, g)
            r = c.call(txn_offsets(tid, pid, epoch, g, {(IN, 0): offset}), 3)
            assert [p.error_code for t in r.topics for p in t.partitions] == [NONE]
            sent[g] = (tid, pid, epoch, offset)
        assert pending_shards(st, g1) == [p1]
        st.call(lambda: st.server.runtime.unload(p1))
        assert pending_shards(st, g1) == []
        for g in (g1, g2):                       # both commit; g1's marker lands while its partition is unloaded
            tid, pid, epoch, _ = sent[g]
            assert c.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                        committed=True), 3).error_code == NONE
        assert fetch_all(c, [g2]) == {g2: {(IN, 0): 9}}
        st.call(lambda: st.server.runtime.reload(p1))
        assert fetch_all(c, [g1]) == {g1: {(IN, 0): 5}}
        assert pending_shards(st, g1) == []
        assert markers(st)[p1] == ["commit"]
