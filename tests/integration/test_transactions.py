"""Transactions with real clients and on the wire: a transactional producer's commits are seen by a
read_committed consumer, its aborts are not; a second producer with the same transactional id fences the
first; the transaction state survives a restart."""
from __future__ import annotations

import time

import pytest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tests.support.clients import create_topic
from tests.support.wire import WireClient

pytestmark = pytest.mark.timeout(120)

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90


def consume_all(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int,
                wait: float = 3.0) -> list[bytes]:
    """Every value of `topic` from the start, as a consumer with `isolation` sees it: polls until `expect`
    records came, then `wait` seconds more (so a record that should not be seen has its chance to show)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got: list[bytes] = []
    deadline = time.time() + 30
    quiet_until = None
    try:
        while time.time() < deadline:
            if quiet_until is None and len(got) >= expect:
                quiet_until = time.time() + wait
            if quiet_until is not None and time.time() >= quiet_until:
                break
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m.value())
    finally:
        c.close()
    return got


def send_in_transaction(p, topic: str, prefix: str, n: int) -> None:
    """Begin a transaction on confluent-kafka producer `p` and send n values `<prefix>-<i>` over 2 partitions."""
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % 2)


# ------------------------------------------------------------------------------------------------ confluent-kafka
def test_confluent_kafka_commit_and_abort_seen_by_read_committed(tenure_server):
    from confluent_kafka import Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "txn-ck", 2)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-ck", "linger.ms": 5})
    p.init_transactions(30)
    send_in_transaction(p, "txn-ck", "commit-1", 6)
    p.commit_transaction(30)
    send_in_transaction(p, "txn-ck", "abort", 4)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("txn-ck", value=b"commit-2-0", partition=1)
    p.commit_transaction(30)
    committed = sorted([f"commit-1-{i}".encode() for i in range(6)] + [b"commit-2-0"])
    assert sorted(consume_all(bs, "txn-ck", 2, "read_committed", len(committed))) == committed
    everything = consume_all(bs, "txn-ck", 2, "read_uncommitted", 11)
    assert sorted(everything) == sorted(committed + [f"abort-{i}".encode() for i in range(4)])


def test_confluent_kafka_open_transaction_holds_back_read_committed(tenure_server):
    from confluent_kafka import Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "txn-open", 1)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("txn-open", value=b"before", partition=0)
    plain.flush(10)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-open"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-open", value=b"pending", partition=0)
    p.flush(10)
    plain.produce("txn-open", value=b"after", partition=0)      # behind the open transaction
    plain.flush(10)
    # the last stable offset stops at the transaction's first record: "after" waits with it
    assert consume_all(bs, "txn-open", 1, "read_committed", 1, wait=1.5) == [b"before"]
    p.commit_transaction(30)
    assert consume_all(bs, "txn-open", 1, "read_committed", 3) == [b"before", b"pending", b"after"]


def test_confluent_kafka_zombie_producer_is_fenced(tenure_server):
    from confluent_kafka import KafkaException, Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "txn-zombie", 1)
    old = Producer({"bootstrap.servers": bs, "transactional.id": "tx-zombie"})
    old.init_transactions(30)
    old.begin_transaction()
    old.produce("txn-zombie", value=b"zombie-open", partition=0)
    old.flush(10)
    new = Producer({"bootstrap.servers": bs, "transactional.id": "tx-zombie"})
    new.init_transactions(30)          # fences `old` and aborts its open transaction
    new.begin_transaction()
    new.produce("txn-zombie", value=b"new", partition=0)
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as exc:
        old.produce("txn-zombie", value=b"zombie-late", partition=0)
        old.commit_transaction(30)
    assert exc.value.args[0].fatal(), exc.value.args[0]
    assert exc.value.args[0].name() in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"), exc.value.args[0]
    assert consume_all(bs, "txn-zombie", 1, "read_committed", 1) == [b"new"]


# ------------------------------------------------------------------------------------------------ restart
@pytest.mark.tenure(data_dir=True)
def test_transactions_survive_a_restart(tenure_server):
    """Committed records stay visible after a restart; a transaction left open by the restart keeps
    read_committed consumers waiting, is aborted by its timeout, and its records are never seen."""
    from confluent_kafka import Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "txn-restart", 1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-restart", "transaction.timeout.ms": 3000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-restart", value=b"committed", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("txn-restart", value=b"left-open", partition=0)
    p.flush(10)
    tenure_server.restart()
    open_txn = tenure_server.call(lambda: tenure_server.server.txn_runtime.shards[0].transactions["tx-restart"])
    assert open_txn.state_name == "Ongoing" and open_txn.partitions == {("txn-restart", 0)}
    assert consume_all(bs, "txn-restart", 1, "read_committed", 1, wait=0.5) == [b"committed"]
    deadline = time.time() + 20
    while tenure_server.call(lambda: tenure_server.server.txn_runtime.shards[0].transactions["tx-restart"]
                             .state_name) != "CompleteAbort":
        assert time.time() < deadline, "the open transaction was not aborted by its timeout"
        time.sleep(0.2)
    # later records are readable again; the aborted one never is
    plain = Producer({"bootstrap.servers": bs})
    plain.produce("txn-restart", value=b"later", partition=0)
    plain.flush(10)
    assert consume_all(bs, "txn-restart", 1, "read_committed", 2) == [b"committed", b"later"]
    p2 = Producer({"bootstrap.servers": bs, "transactional.id": "tx-restart"})
    p2.init_transactions(30)       # the id lives on: its epoch moves on from the recovered one


# ------------------------------------------------------------------------------------------------ on the wire
def txn_batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=2**20)
    b.append(0, timestamp=None, key=None, value=value, headers=[])
    return bytes(b.build())


def produce(wire, tid, topic, batch):
    P = ProduceRequest
    r = wire.call(P(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=0,
                                                                                               records=batch)])]), 9)
    return r.responses[0].partition_responses[0].error_code


def add_v3(tid, pid, epoch, topics):
    A = AddPartitionsToTxnRequest
    return A(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
             v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics])


def codes_v3(r):
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


@pytest.mark.parametrize("tv", [
    pytest.param(tv, marks=pytest.mark.tenure(transaction_version=tv), id=f"transaction.version={tv}")
    for tv in (2, 1)])
def test_wire_transaction_checks(tenure_server, wire, tv):
    create_topic(tenure_server.bootstrap, "txn-wire", 2)
    r = wire.call(InitProducerIdRequest(transactional_id="tw", transaction_timeout_ms=10**9,
                                        producer_id=-1, producer_epoch=-1), 4)
    assert r.error_code == INVALID_TRANSACTION_TIMEOUT
    r = wire.call(InitProducerIdRequest(transactional_id="tw", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 4)
    pid, epoch = r.producer_id, r.producer_epoch
    assert (r.error_code, epoch) == (NONE, 0)
    # nothing added yet: a transactional batch is refused, EndTxn has nothing to end
    assert produce(wire, "tw", "txn-wire", txn_batch(pid, epoch, 0, b"x")) == INVALID_TXN_STATE
    assert wire.call(EndTxnRequest(transactional_id="tw", producer_id=pid, producer_epoch=epoch,
                                   committed=True), 3).error_code == INVALID_TXN_STATE
    # an unknown partition refuses the whole request: the others are not attempted
    r = wire.call(add_v3("tw", pid, epoch, [("txn-wire", [0, 5]), ("no-such-topic", [0])]), 3)
    assert codes_v3(r) == {("txn-wire", 0): OPERATION_NOT_ATTEMPTED, ("txn-wire", 5): UNKNOWN_TOPIC_OR_PARTITION,
                           ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert codes_v3(wire.call(add_v3("tw", pid + 1, epoch, [("txn-wire", [0])]), 3)) == \
        {("txn-wire", 0): INVALID_PRODUCER_ID_MAPPING}
    assert codes_v3(wire.call(add_v3("tw", pid, epoch, [("txn-wire", [0])]), 3)) == {("txn-wire", 0): NONE}
    assert produce(wire, "tw", "txn-wire", txn_batch(pid, epoch, 0, b"x")) == NONE
    # v4+: batched by transactional id, with verify_only (what a broker asks before appending): a partition not
    # in the transaction is TRANSACTION_ABORTABLE (120), as Kafka's coordinator answers a verification
    A = AddPartitionsToTxnRequest
    T = A.AddPartitionsToTxnTransaction
    r = wire.call(A(transactions=[
        T(transactional_id="tw", producer_id=pid, producer_epoch=epoch, verify_only=True,
          topics=[A.AddPartitionsToTxnTopic(name="txn-wire", partitions=[0, 1])])]), 4)
    [res] = r.results_by_transaction
    assert {p.partition_index: p.partition_error_code for t in res.topic_results for p in t.results_by_partition} \
        == {0: NONE, 1: 120}
    # a new producer with the same id fences this one: the old epoch is PRODUCER_FENCED from v2 (AddPartitions,
    # EndTxn), INVALID_PRODUCER_EPOCH before; its batches are INVALID_PRODUCER_EPOCH
    # as Kafka: the open transaction is fenced and aborted, the new producer retries (CONCURRENT_TRANSACTIONS)
    # and its retry bumps the epoch once more than the abort's
    init = InitProducerIdRequest(transactional_id="tw", transaction_timeout_ms=60000, producer_id=-1,
                                 producer_epoch=-1)
    assert wire.call(init, 4).error_code == CONCURRENT_TRANSACTIONS
    aborted = epoch + 1 if tv == 1 else epoch + 2         # the server's transaction version ends its own abort
    r = wire.call(init, 4)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (NONE, pid, aborted + 1)
    assert produce(wire, "tw", "txn-wire", txn_batch(pid, epoch, 1, b"y")) == INVALID_PRODUCER_EPOCH
    end = dict(transactional_id="tw", producer_id=pid, producer_epoch=epoch, committed=True)
    assert wire.call(EndTxnRequest(**end), 1).error_code == INVALID_PRODUCER_EPOCH
    assert wire.call(EndTxnRequest(**end), 2).error_code == PRODUCER_FENCED
    assert codes_v3(wire.call(add_v3("tw", pid, epoch, [("txn-wire", [1])]), 1)) == \
        {("txn-wire", 1): INVALID_PRODUCER_EPOCH}
    assert codes_v3(wire.call(add_v3("tw", pid, epoch, [("txn-wire", [1])]), 2)) == {("txn-wire", 1): PRODUCER_FENCED}
    # the fenced producer's open transaction was aborted with a marker under the fencing epoch (at transaction
    # version 2 bumped once more, as a v2 end is)
    log = tenure_server.call(lambda: tenure_server.server.topics.get("txn-wire").partitions[0])
    from tenure.storage import parse_batches
    batches = parse_batches(tenure_server.call(lambda: log.read(0, 1 << 20)))
    assert [(b.is_transactional, b.is_control, b.producer_epoch) for b in batches] == \
        [(True, False, epoch), (True, True, aborted)]


# ------------------------------------------------------------------------------------------------ Java
@pytest.mark.java
@pytest.mark.parametrize("tv", [
    pytest.param(tv, marks=pytest.mark.tenure(transaction_version=tv), id=f"transaction.version={tv}")
    for tv in (2, 1)])
def test_java_commit_abort_and_zombie_fencing(tenure_server, tv):
    """Java runs transactions v2 against transaction.version 2 (the zombie's next Produce v12 is fenced by the
    coordinator's add) and v1 against 1 (by the verification); the zombie sees the same exceptions."""
    from tests.support.java import run_java
    create_topic(tenure_server.bootstrap, "txn-java", 1)
    fenced, consumed = run_java("TxnProduce", tenure_server.bootstrap, "txn-java", "tx-java", timeout=120)
    assert fenced == {"type": "fenced", "send": "org.apache.kafka.common.errors.InvalidProducerEpochException",
                      "abort": "org.apache.kafka.common.errors.ProducerFencedException"}
    assert consumed == {"type": "consumed", "values": ["commit-0", "commit-1", "commit-2", "second"]}


# ------------------------------------------------------------------------------------------------ offsets in txns
UNKNOWN_MEMBER_ID = 25
ILLEGAL_GENERATION = 22
FENCED_INSTANCE_ID = 82
UNSTABLE_OFFSET_COMMIT = 88


def txn_offsets(tid, pid, epoch, group, offsets, generation=-1, member="", instance=None):
    from kafka.protocol.producer import TxnOffsetCommitRequest as R
    T = R.TxnOffsetCommitRequestTopic
    return R(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=generation,
             member_id=member, group_instance_id=instance, topics=[
                 T(name=t, partitions=[T.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                                         committed_leader_epoch=-1,
                                                                         committed_metadata="m")])
                 for (t, p), o in offsets.items()])


def stable_fetch(wire, group, topic, partitions):
    from kafka.protocol.consumer.group import OffsetFetchRequest as F
    r = wire.call(F(group_id=group, topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)],
                    require_stable=True), 7)
    return {p.partition_index: (p.error_code, p.committed_offset) for t in r.topics for p in t.partitions}


def begin_offsets(wire, tid, group):
    from kafka.protocol.producer import AddOffsetsToTxnRequest
    r = wire.call(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 4)
    pid, epoch = r.producer_id, r.producer_epoch
    assert wire.call(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                            group_id=group), 3).error_code == NONE
    return pid, epoch


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_wire_offsets_in_a_transaction_count_only_on_commit(tenure_server, wire, commit):
    from kafka.protocol.producer import AddOffsetsToTxnRequest
    create_topic(tenure_server.bootstrap, "txo", 2)
    # a TxnOffsetCommit before AddOffsetsToTxn is refused (the transaction does not hold the group's partition)
    r = wire.call(InitProducerIdRequest(transactional_id="txo", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 4)
    refused = wire.call(txn_offsets("txo", r.producer_id, r.producer_epoch, "g-txo", {("txo", 0): 5}), 3)
    assert refused.topics[0].partitions[0].error_code == INVALID_TXN_STATE
    pid, epoch = r.producer_id, r.producer_epoch
    assert wire.call(AddOffsetsToTxnRequest(transactional_id="txo", producer_id=pid, producer_epoch=epoch + 1,
                                            group_id="g-txo"), 3).error_code == PRODUCER_FENCED
    assert wire.call(AddOffsetsToTxnRequest(transactional_id="txo", producer_id=pid, producer_epoch=epoch,
                                            group_id="g-txo"), 3).error_code == NONE
    r = wire.call(txn_offsets("txo", pid, epoch, "g-txo", {("txo", 0): 5, ("txo", 1): 7}), 3)
    assert [p.error_code for t in r.topics for p in t.partitions] == [NONE, NONE]
    # pending: a stable fetch is told to retry, a plain fetch sees no offset yet
    assert stable_fetch(wire, "g-txo", "txo", [0, 1]) == {0: (UNSTABLE_OFFSET_COMMIT, -1),
                                                         1: (UNSTABLE_OFFSET_COMMIT, -1)}
    from tests.support.groupwire import fetch_all
    assert fetch_all(wire, ["g-txo"]) == {"g-txo": {}}
    assert wire.call(EndTxnRequest(transactional_id="txo", producer_id=pid, producer_epoch=epoch,
                                   committed=commit), 3).error_code == NONE
    expected = {("txo", 0): 5, ("txo", 1): 7} if commit else {}
    assert fetch_all(wire, ["g-txo"]) == {"g-txo": expected}
    assert stable_fetch(wire, "g-txo", "txo", [0, 1]) == {0: (NONE, 5 if commit else -1),
                                                         1: (NONE, 7 if commit else -1)}


def offsets_topic_stability(wire, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) of a __consumer_offsets partition, as a read_committed Fetch says."""
    from tests.support.wire import fetch_request
    r = wire.call(fetch_request(OFFSETS_TOPIC, partition, 0, isolation_level=1), 12).responses[0].partitions[0]
    assert r.error_code == NONE
    return r.last_stable_offset, r.high_watermark


@pytest.mark.tenure(data_dir=True)
def test_offsets_of_committed_aborted_and_open_transactions_survive_a_restart(tenure_server):
    from tests.support.groupwire import fetch_all
    from tests.support.wire import WireClient
    create_topic(tenure_server.bootstrap, "txr", 1)
    with WireClient.to(tenure_server.bootstrap) as w:
        for tid, group, offset, commit in (("txr-c", "g-c", 11, True), ("txr-a", "g-a", 12, False)):
            pid, epoch = begin_offsets(w, tid, group)
            assert w.call(txn_offsets(tid, pid, epoch, group, {("txr", 0): offset}), 3).topics[0] \
                .partitions[0].error_code == NONE
            assert w.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                        committed=commit), 3).error_code == NONE
        pid, epoch = begin_offsets(w, "txr-o", "g-o")
        w.call(txn_offsets("txr-o", pid, epoch, "g-o", {("txr", 0): 13}), 3)
        # the open transaction's offsets hold __consumer_offsets' last stable offset (a read_committed reader of
        # the topic stops there), and a restart rebuilds the same
        stable_before = offsets_topic_stability(w, tenure_server.call(lambda: tenure_server.server.runtime
                                                                         .partition_of("g-o")))
        assert stable_before[0] < stable_before[1]
    tenure_server.restart()
    with WireClient.to(tenure_server.bootstrap) as w:
        assert offsets_topic_stability(w, tenure_server.call(lambda: tenure_server.server.runtime
                                                                .partition_of("g-o"))) == stable_before
        assert fetch_all(w, ["g-c", "g-a", "g-o"]) == {"g-c": {("txr", 0): 11}, "g-a": {}, "g-o": {}}
        assert stable_fetch(w, "g-o", "txr", [0]) == {0: (UNSTABLE_OFFSET_COMMIT, -1)}
        assert w.call(EndTxnRequest(transactional_id="txr-o", producer_id=pid, producer_epoch=epoch,
                                    committed=True), 3).error_code == NONE
        assert fetch_all(w, ["g-o"]) == {"g-o": {("txr", 0): 13}}


def test_wire_a_fenced_static_member_cannot_commit_in_a_transaction(tenure_server, wire):
    """KIP-447: TxnOffsetCommit v3+ carries the member id, generation and instance id, checked as
    OffsetCommit checks them."""
    from tests.support.groupwire import join, sync
    create_topic(tenure_server.bootstrap, "txs", 1)
    j = join(wire, "g-txs", "", "static-a", "txs", session_ms=30000)
    old_member, generation = j.member_id, j.generation_id
    assert sync(wire, "g-txs", old_member, generation, "static-a").error_code == NONE
    replaced = join(wire, "g-txs", "", "static-a", "txs", session_ms=30000)      # the same instance id again
    assert replaced.error_code == NONE and replaced.member_id != old_member
    pid, epoch = begin_offsets(wire, "txs", "g-txs")

    def code(generation, member, instance):
        r = wire.call(txn_offsets("txs", pid, epoch, "g-txs", {("txs", 0): 3}, generation, member, instance), 3)
        return r.topics[0].partitions[0].error_code

    assert code(generation, old_member, "static-a") == FENCED_INSTANCE_ID
    assert code(generation + 5, replaced.member_id, "static-a") == ILLEGAL_GENERATION
    assert code(generation, "someone-else", None) == UNKNOWN_MEMBER_ID
    assert code(replaced.generation_id, replaced.member_id, "static-a") == NONE


@pytest.mark.java
def test_java_consume_transform_produce_with_a_static_consumer(tenure_server):
    """sendOffsetsToTransaction(offsets, consumer.groupMetadata()) from a static member: on abort neither the
    output nor the offsets count; on commit both do, and a second run starts where the first committed."""
    from confluent_kafka import Producer

    from tests.support.groupwire import fetch_all
    from tests.support.java import run_java
    from tests.support.wire import WireClient
    bs = tenure_server.bootstrap
    create_topic(bs, "ctp-in", 2)
    create_topic(bs, "ctp-out", 2)
    p = Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce("ctp-in", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(10) == 0
    args = [bs, "ctp-in", "ctp-out", "ctp-group", "ctp-static-0", "ctp-txn"]
    [aborted] = run_java("TxnTransform", *args, "abort", "10", timeout=120)
    assert (aborted["type"], aborted["consumed"]) == ("done", 10), aborted
    with WireClient.to(bs) as w:
        assert fetch_all(w, ["ctp-group"]) == {"ctp-group": {}}
    assert consume_all(bs, "ctp-out", 2, "read_committed", 0, wait=1.0) == []
    [committed] = run_java("TxnTransform", *args, "commit", "10", timeout=120)
    assert (committed["type"], committed["consumed"]) == ("done", 10), committed
    with WireClient.to(bs) as w:
        assert fetch_all(w, ["ctp-group"]) == {"ctp-group": {("ctp-in", 0): 5, ("ctp-in", 1): 5}}
    assert sorted(consume_all(bs, "ctp-out", 2, "read_committed", 10)) == sorted(f"V{i}".encode() for i in range(10))


# ---------------------------------------------------------------------------------------- kafka-python, aiokafka
def test_kafka_python_transactional_producer(tenure_server):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    from tests.support.groupwire import fetch_all
    from tests.support.wire import WireClient
    bs = tenure_server.bootstrap
    create_topic(bs, "kp-txn", 1)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-txn")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("kp-txn", b"committed", partition=0)
        p.send_offsets_to_transaction({TopicPartition("kp-txn", 0): OffsetAndMetadata(3, "", -1)}, "kp-txn-group")
        p.commit_transaction()
        p.begin_transaction()
        p.send("kp-txn", b"aborted", partition=0)
        p.send_offsets_to_transaction({TopicPartition("kp-txn", 0): OffsetAndMetadata(9, "", -1)}, "kp-txn-group")
        p.abort_transaction()
    finally:
        p.close(timeout=5)
    c = KafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", enable_auto_commit=False)
    tp = TopicPartition("kp-txn", 0)
    c.assign([tp])
    c.seek_to_beginning()
    got: list[bytes] = []
    try:
        deadline = time.time() + 30
        # until the position is the high watermark its fetches gave: a read_committed consumer gets there only once
        # the aborted transaction's marker is in the log (the aborted record may or may not be: kafka-python drops
        # a batch still unsent at abort_transaction)
        while c.highwater(tp) is None or c.position(tp) < c.highwater(tp):
            assert time.time() < deadline, (c.position(tp), c.highwater(tp), got)
            got += [m.value for ms in c.poll(timeout_ms=200).values() for m in ms]
    finally:
        c.close()
    assert got == [b"committed"]
    with WireClient.to(bs) as w:
        assert fetch_all(w, ["kp-txn-group"]) == {"kp-txn-group": {("kp-txn", 0): 3}}


def test_aiokafka_transactional_producer_and_read_committed_consumer(tenure_server):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition
    bs = tenure_server.bootstrap
    create_topic(bs, "aio-txn", 1)

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-txn")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("aio-txn", b"committed", partition=0)
                await p.send_offsets_to_transaction({TopicPartition("aio-txn", 0): 1}, "aio-txn-group")
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send_and_wait("aio-txn", b"aborted", partition=0)
                    raise RuntimeError("abort this one")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", group_id="aio-txn-group",
                             enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition("aio-txn", 0)
            assert await c.committed(tp) == 1
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got: list[bytes] = []
            deadline = time.time() + 30
            # until the position is the high watermark its fetches gave: past the aborted transaction's marker
            while c.highwater(tp) is None or await c.position(tp) < c.highwater(tp):
                assert time.time() < deadline, (await c.position(tp), c.highwater(tp), got)
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    got += [m.value for m in msgs]
            return got
        finally:
            await c.stop()

    assert asyncio.run(run()) == [b"committed"]


# ------------------------------------------------------------------------------------------------ kill -9
def test_sigkill_mid_transaction(tmp_path):
    """A server SIGKILLed with one transaction committed and one open: after the restart the committed one
    is all there, the open one holds read_committed consumers back until its timeout aborts it, and none of
    its records is ever seen."""
    from confluent_kafka import Producer

    from tests.support.procs import TenureProcess
    with TenureProcess(tmp_path / "data", fsync="batch") as srv:
        srv.start()
        create_topic(srv.bootstrap, "kill-txn", 2)
        p = Producer({"bootstrap.servers": srv.bootstrap, "transactional.id": "kill-txn",
                      "transaction.timeout.ms": 3000})
        p.init_transactions(30)
        send_in_transaction(p, "kill-txn", "committed", 6)
        p.commit_transaction(30)
        send_in_transaction(p, "kill-txn", "open", 4)
        assert p.flush(10) == 0
        srv.kill()
        srv.start()
        bs = srv.bootstrap
        committed = sorted(f"committed-{i}".encode() for i in range(6))
        assert sorted(consume_all(bs, "kill-txn", 2, "read_committed", 6, wait=0.5)) == committed
        # the open transaction times out (3 s after it began) and is aborted; then later records flow again
        late = Producer({"bootstrap.servers": bs})
        for part in (0, 1):
            late.produce("kill-txn", value=f"later-{part}".encode(), partition=part)
        assert late.flush(10) == 0
        seen = consume_all(bs, "kill-txn", 2, "read_committed", 8, wait=1.0)
        assert sorted(seen) == sorted(committed + [b"later-0", b"later-1"])


@pytest.mark.tenure(acls=["allow User:ANONYMOUS all transactional_id:acl-tx", "allow User:ANONYMOUS all topic:acl-t"],
                     topics={"acl-t": 2})
def test_add_partitions_to_txn_v4_is_the_brokers_and_needs_cluster_action(tenure_server, wire):
    """AddPartitionsToTxn v4+ (KIP-890) is what a broker asks its transaction coordinator; Kafka announces 0-5 to
    everyone (clients build v3 at most) and, under an authorizer, answers a v4+ request without CLUSTER_ACTION on
    the cluster with CLUSTER_AUTHORIZATION_FAILED (31) for the whole request; with it, the request is served (and
    with no authorizer at all it always is - test_transaction_apis_over_the_wire)."""
    assert served_range(tenure_server, 24) == (0, 5)
    r = wire.call(InitProducerIdRequest(transactional_id="acl-tx", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 4)
    pid, epoch = r.producer_id, r.producer_epoch
    assert codes_v3(wire.call(add_v3("acl-tx", pid, epoch, [("acl-t", [0])]), 3)) == {("acl-t", 0): NONE}
    A = AddPartitionsToTxnRequest
    verify = A(transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id="acl-tx", producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[A.AddPartitionsToTxnTopic(name="acl-t", partitions=[0, 1])])])
    for version in (4, 5):
        r = wire.call(verify, version)
        assert (r.error_code, r.results_by_transaction) == (31, [])
    tenure_server.add_acl("allow User:ANONYMOUS cluster_action cluster:kafka-cluster")
    [res] = wire.call(verify, 5).results_by_transaction
    assert {p.partition_index: p.partition_error_code for t in res.topic_results for p in t.results_by_partition} \
        == {0: NONE, 1: 120}


def served_range(st, key: int) -> tuple[int, int]:
    from kafka.protocol.metadata import ApiVersionsRequest
    with WireClient.to(st.bootstrap) as c:
        r = c.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    return next((k.min_version, k.max_version) for k in r.api_keys if k.api_key == key)


# ------------------------------------------------------------------------------------------------ admin
def open_transaction(bs: str, topic: str, tid: str):
    """A confluent-kafka producer with one record sent in an open transaction (returned to keep it open)."""
    from confluent_kafka import Producer
    create_topic(bs, topic, 1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"v", partition=0)
    assert p.flush(10) == 0
    return p


@pytest.mark.java
def test_java_admin_lists_and_describes_transactions_and_producers(tenure_server):
    from tests.support.java import run_java
    bs = tenure_server.bootstrap
    p = open_transaction(bs, "adm-txn", "adm-tx")
    pid = tenure_server.call(lambda: tenure_server.server.txn_runtime.shards[0].transactions["adm-tx"].producer_id)
    listed, described, producers = run_java("AdminOps", bs, "transactions", "adm-tx", "adm-txn", "0", timeout=120)
    assert listed == {"type": "listed", "transactions": [{"id": "adm-tx", "producer_id": pid, "state": "Ongoing"}]}
    assert described == {"type": "described", "state": "Ongoing", "producer_id": pid, "epoch": 0,
                         "timeout_ms": 60000, "partitions": ["adm-txn-0"]}
    assert producers == {"type": "producers", "producers": [
        {"producer_id": pid, "epoch": 0, "last_sequence": 0, "txn_start_offset": 0}]}
    p.abort_transaction(30)


@pytest.mark.java
def test_java_admin_lists_transactions_by_transactional_id_pattern(tenure_server):
    """Java 4.3's Admin sends ListTransactions v2 (KIP-1152) with filterOnTransactionalIdPattern: the ids the whole
    of which the pattern matches are listed; a pattern RE2/J refuses fails the call with Kafka's
    InvalidRegularExpressionException. The versions on the wire are v2."""
    from tests.support.java import run_java
    bs = tenure_server.bootstrap
    producers = [open_transaction(bs, f"pat-txn-{tid}", tid) for tid in ("pat-a1", "pat-a2", "other-b1")]
    [matched] = run_java("AdminOps", bs, "list-transactions", "pat-a.*", timeout=120)
    assert matched == {"type": "listed", "transactions": ["pat-a1", "pat-a2"], "error": None}
    assert run_java("AdminOps", bs, "list-transactions", "pat", timeout=120)[0]["transactions"] == []
    [bad] = run_java("AdminOps", bs, "list-transactions", "(ab(cd", timeout=120)
    assert bad["exception"] == "org.apache.kafka.common.errors.InvalidRegularExpression"
    served = {(x.version, x.error) for x in tenure_server.requests("ListTransactions")}
    assert served == {(2, 0), (2, 128)}
    for p in producers:
        p.abort_transaction(30)


def test_kafka_python_admin_lists_and_describes_transactions_and_producers(tenure_server):
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition
    bs = tenure_server.bootstrap
    p = open_transaction(bs, "kpa-txn", "kpa-tx")
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        pid = tenure_server.call(
            lambda: tenure_server.server.txn_runtime.shards[0].transactions["kpa-tx"].producer_id)
        [listed] = admin.list_transactions()[0]
        assert (listed.transactional_id, listed.producer_id, listed.state.value) == ("kpa-tx", pid, "Ongoing")
        assert admin.list_transactions(state_filters=["CompleteCommit"]) == {0: []}
        d = admin.describe_transactions(["kpa-tx"])["kpa-tx"]
        assert (d.state.value, d.producer_id, d.producer_epoch, d.transaction_timeout_ms, d.topic_partitions) == \
            ("Ongoing", pid, 0, 60000, {TopicPartition("kpa-txn", 0)})
        [ps] = admin.describe_producers([TopicPartition("kpa-txn", 0)])[TopicPartition("kpa-txn", 0)].active_producers
        assert (ps.producer_id, ps.producer_epoch, ps.last_sequence, ps.current_transaction_start_offset) == \
            (pid, 0, 0, 0)
        from kafka.errors import TransactionalIdNotFoundError
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions(["no-such-tx"])
    finally:
        admin.close()
        p.abort_transaction(30)


@pytest.mark.parametrize("aborted_epoch", [
    pytest.param(1, marks=pytest.mark.tenure(transaction_version=1), id="transaction.version=1"),
    # Kafka's coordinator ends its own abort as the server's transaction version ends one: at 2 the fencing
    # epoch is bumped once more
    pytest.param(2, marks=pytest.mark.tenure(transaction_version=2), id="transaction.version=2"),
])
def test_advance_clock_expires_an_open_transaction(tenure_server, aborted_epoch):
    """The transaction timeout runs on the coordinator's clock: advance_clock past it aborts the transaction
    (fencing its producer) and read_committed consumers move on."""
    from confluent_kafka import KafkaException
    p = open_transaction(tenure_server.bootstrap, "txn-clock", "tx-clock")
    fired = tenure_server.advance_clock(60_000)
    assert "txn_timeout/tx-clock" in fired
    state = tenure_server.call(lambda: tenure_server.server.txn_runtime.shards[0].transactions["tx-clock"])
    assert (state.state_name, state.producer_epoch) == ("CompleteAbort", aborted_epoch)
    assert consume_all(tenure_server.bootstrap, "txn-clock", 1, "read_committed", 0, wait=1.0) == []
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_wire_txn_offset_commit_for_unknown_partitions_stores_nothing(tenure_server, wire):
    """As OffsetCommit: partitions of a topic that does not exist, or beyond its count, are answered
    UNKNOWN_TOPIC_OR_PARTITION and never reach the transaction; the others are committed with it."""
    from tests.support.groupwire import fetch_all
    create_topic(tenure_server.bootstrap, "txu", 1)
    pid, epoch = begin_offsets(wire, "txu", "g-txu")
    r = wire.call(txn_offsets("txu", pid, epoch, "g-txu", {("txu", 0): 4, ("txu", 3): 5, ("nope", 0): 6}), 3)
    assert [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == \
        [("txu", 0, NONE), ("txu", 3, UNKNOWN_TOPIC_OR_PARTITION), ("nope", 0, UNKNOWN_TOPIC_OR_PARTITION)]
    assert wire.call(EndTxnRequest(transactional_id="txu", producer_id=pid, producer_epoch=epoch,
                                   committed=True), 3).error_code == NONE
    assert fetch_all(wire, ["g-txu"]) == {"g-txu": {("txu", 0): 4}}


@pytest.mark.tenure(data_dir=True)
def test_a_prepared_commit_completes_at_restart(tenure_server):
    """The server stopped right after writing PrepareCommit (before any marker): at start-up the
    transaction coordinator writes the commit markers and CompleteCommit, as Kafka's does on loading."""
    import dataclasses

    from tenure.protocol.txn_records import PREPARE_COMMIT
    bs = tenure_server.bootstrap
    p = open_transaction(bs, "txn-prep", "tx-prep")
    server = tenure_server.server
    ongoing = tenure_server.call(lambda: server.txn_runtime.shards[0].transactions["tx-prep"])
    # the PrepareCommit record alone reaches the log (what EndTxn writes first), then the server stops
    tenure_server.call(lambda: server.txn_runtime.writer.write([dataclasses.replace(ongoing, state=PREPARE_COMMIT)]))
    tenure_server.restart()
    done = tenure_server.call(lambda: tenure_server.server.txn_runtime.shards[0].transactions["tx-prep"])
    assert (done.state_name, done.partitions) == ("CompleteCommit", frozenset())
    assert consume_all(bs, "txn-prep", 1, "read_committed", 1) == [b"v"]
    del p


@pytest.mark.tenure(data_dir=True)
def test_fencing_a_transaction_at_the_last_epoch_gives_the_new_producer_a_new_id(tenure_server, wire):
    """A transaction open at epoch 32766 (planted in __transaction_state with the project's codec, then a
    batch of it produced): a new confluent-kafka producer with the same transactional id is answered
    CONCURRENT_TRANSACTIONS while the old transaction is aborted under the last epoch of its producer id,
    then gets a new producer id; the old records are never seen."""
    from confluent_kafka import Producer

    from tenure.protocol.txn_records import ONGOING, TransactionRecord
    bs = tenure_server.bootstrap
    create_topic(bs, "txn-last", 1)
    r = wire.call(InitProducerIdRequest(transactional_id="tx-last", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 4)
    pid, now = r.producer_id, int(time.time() * 1000)
    planted = TransactionRecord("tx-last", pid, 32766, 60000, ONGOING, frozenset({("txn-last", 0)}), now, now)
    tenure_server.call(lambda: tenure_server.server.txn_runtime.writer.write([planted]))
    tenure_server.restart()
    from tests.support.wire import WireClient
    with WireClient.to(tenure_server.bootstrap) as w:
        assert produce(w, "tx-last", "txn-last", txn_batch(pid, 32766, 0, b"old")) == NONE
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-last"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-last", value=b"new", partition=0)
    p.commit_transaction(30)
    state = tenure_server.call(lambda: tenure_server.server.txn_runtime.shards[0].transactions["tx-last"])
    assert (state.state_name, state.producer_epoch) == ("CompleteCommit", 0) and state.producer_id != pid
    assert consume_all(bs, "txn-last", 1, "read_committed", 1, wait=1.0) == [b"new"]
    log = tenure_server.call(lambda: tenure_server.server.topics.get("txn-last").partitions[0])
    from tenure.storage import parse_batches
    batches = parse_batches(tenure_server.call(lambda: log.read(0, 1 << 20)))
    assert [(b.producer_id, b.producer_epoch, b.is_control) for b in batches] == \
        [(pid, 32766, False), (pid, 32767, True), (state.producer_id, 0, False), (state.producer_id, 0, True)]
