"""Transactions v2 (KIP-890) on the wire and with the clients that do not use it: the `transaction.version`
feature in ApiVersions per setting; a v2 transaction driven request by request (Produce v12 and TxnOffsetCommit
v5 add their partitions, EndTxn v5 bumps the epoch) with the errors of each version, the server serving on after
each; confluent-kafka and kafka-python run transactions v1 against the same server, exactly once."""
from __future__ import annotations

import collections
import contextlib

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import EndTxnRequest, InitProducerIdRequest, ProduceRequest

from tests.integration.test_transactions import (
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    NONE,
    PRODUCER_FENCED,
    consume_all,
    stable_fetch,
    txn_batch,
    txn_offsets,
)
from tests.support.clients import create_topic
from tests.support.wire import WireClient

pytestmark = pytest.mark.timeout(120)

INVALID_TXN_STATE = 48
TRANSACTION_ABORTABLE = 120
UNSTABLE_OFFSET_COMMIT = 88


@contextlib.contextmanager
def versions_on_the_wire(srv):
    """(API name, version) -> how many requests the server answered at that version while inside: each owner's
    route wrapped with a recorder."""
    seen: collections.Counter = collections.Counter()
    routes = srv.server.dispatch.routes
    original = dict(routes)

    def recording(route):
        async def recorded(req, ctx):
            seen[(req.name, req.api_version)] += 1
            return await route(req, ctx)
        return recorded
    srv.call(lambda: routes.update({owner: recording(route) for owner, route in original.items()}))
    try:
        yield seen
    finally:
        srv.call(lambda: routes.update(original))


def versions(seen, api: str) -> set[int]:
    return {v for (name, v) in seen if name == api}


def features(bs: str, version: int = 3):
    with WireClient.to(bs) as w:
        r = w.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), version)
    return ({f.name: (f.min_version, f.max_version) for f in r.supported_features or ()},
            {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features or ()},
            r.finalized_features_epoch)


@pytest.mark.parametrize("tv", [
    pytest.param(tv, marks=pytest.mark.tenure(transaction_version=tv), id=f"transaction.version={tv}")
    for tv in (2, 1, 0)])
def test_api_versions_announces_the_transaction_version_feature(tenure_server, tv):
    """Supported 0-2 (what tenure serves), finalized at the setting (a feature at level 0 is not listed, as
    Kafka lists finalized features), with an epoch Java's client keeps them from; ApiVersions v0-2 has none.
    Beside it the release's other features (protocol/releases.py); v3 leaves out a supported feature whose least
    level is 0, as Kafka does for the clients that cannot parse one, so transaction.version is listed from v4."""
    from tenure.protocol.releases import NEWEST
    bs = tenure_server.bootstrap
    supported, finalized = NEWEST.announced_features(tv)
    assert finalized.get("transaction.version") == ((tv, tv) if tv else None)
    assert supported["transaction.version"] == (0, 2)
    assert features(bs, 4) == (supported, finalized, 1)
    assert features(bs, 3) == ({n: r for n, r in supported.items() if r[0] > 0}, finalized, 1)
    assert "transaction.version" not in features(bs, 3)[0]


def test_the_transaction_version_setting_is_checked():
    from tenure.config import ServerConfig
    with pytest.raises(ValueError, match="transaction.version"):
        ServerConfig(transaction_version=3)


def produce_v(wire, tid, topic, partition, batch, version):
    P = ProduceRequest
    r = wire.call(P(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(index=partition, records=batch)])]),
        version)
    return r.responses[0].partition_responses[0].error_code


def end_v5(wire, tid, pid, epoch, commit):
    r = wire.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit), 5)
    return r.error_code, r.producer_id, r.producer_epoch


def describe(tenure_server, tid):
    return tenure_server.call(lambda: tenure_server.server.txn_runtime.shards[0].transactions[tid])


def test_wire_a_v2_transaction_request_by_request(tenure_server, wire):
    create_topic(tenure_server.bootstrap, "v2w", 2)
    r = wire.call(InitProducerIdRequest(transactional_id="v2w", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 5)
    pid, epoch = r.producer_id, r.producer_epoch
    assert (r.error_code, epoch) == (NONE, 0)
    # Produce v12 adds its partition to the transaction: no AddPartitionsToTxn first
    assert produce_v(wire, "v2w", "v2w", 0, txn_batch(pid, 0, 0, b"a"), 12) == NONE
    t = describe(tenure_server, "v2w")
    assert (t.state_name, t.partitions, t.client_version) == ("Ongoing", frozenset({("v2w", 0)}), 2)
    # Produce v11 does not add: a partition not in the transaction is TRANSACTION_ABORTABLE (v11), not appended
    assert produce_v(wire, "v2w", "v2w", 1, txn_batch(pid, 0, 0, b"b"), 11) == TRANSACTION_ABORTABLE
    assert produce_v(wire, "v2w", "v2w", 1, txn_batch(pid, 0, 0, b"b"), 10) == INVALID_TXN_STATE
    # TxnOffsetCommit v5 adds the group's offsets partition: no AddOffsetsToTxn first
    r = wire.call(txn_offsets("v2w", pid, 0, "g-v2w", {("v2w", 0): 1}), 5)
    assert [p.error_code for t in r.topics for p in t.partitions] == [NONE]
    assert stable_fetch(wire, "g-v2w", "v2w", [0]) == {0: (UNSTABLE_OFFSET_COMMIT, -1)}
    # a wrong epoch: fenced (Produce and TxnOffsetCommit report INVALID_PRODUCER_EPOCH, EndTxn PRODUCER_FENCED)
    assert produce_v(wire, "v2w", "v2w", 0, txn_batch(pid, 3, 0, b"z"), 12) == INVALID_PRODUCER_EPOCH
    r = wire.call(txn_offsets("v2w", pid, 3, "g-v2w", {("v2w", 0): 9}), 5)
    assert [p.error_code for t in r.topics for p in t.partitions] == [INVALID_PRODUCER_EPOCH]
    assert end_v5(wire, "v2w", pid, 3, True) == (PRODUCER_FENCED, -1, -1)
    # an unknown transactional id or producer id
    assert produce_v(wire, "nobody", "v2w", 0, txn_batch(pid, 0, 0, b"z"), 12) == INVALID_PRODUCER_ID_MAPPING
    assert produce_v(wire, "v2w", "v2w", 0, txn_batch(pid + 99, 0, 0, b"z"), 12) == INVALID_PRODUCER_ID_MAPPING
    # EndTxn v5 commits and names the bumped epoch; the offsets count; the old epoch's batches are fenced
    assert end_v5(wire, "v2w", pid, 0, True) == (NONE, pid, 1)
    assert end_v5(wire, "v2w", pid, 0, True) == (NONE, pid, 1)             # a retry
    assert stable_fetch(wire, "g-v2w", "v2w", [0]) == {0: (NONE, 1)}
    assert produce_v(wire, "v2w", "v2w", 0, txn_batch(pid, 0, 1, b"late"), 12) == INVALID_PRODUCER_EPOCH
    # the next transaction, under epoch 1, aborted
    assert produce_v(wire, "v2w", "v2w", 1, txn_batch(pid, 1, 0, b"gone"), 12) == NONE
    assert end_v5(wire, "v2w", pid, 1, False) == (NONE, pid, 2)
    assert consume_all(tenure_server.bootstrap, "v2w", 2, "read_committed", 1, wait=0.5) == [b"a"]
    # the markers carry the bumped epochs
    from tenure.storage import parse_batches
    logs = tenure_server.call(lambda: list(tenure_server.server.topics.get("v2w").partitions))
    got = [[(b.is_control, b.producer_epoch) for b in parse_batches(tenure_server.call(lambda log=log: log.read(
        0, 1 << 20)))] for log in logs]
    assert got == [[(False, 0), (True, 1)], [(False, 1), (True, 2)]]
    # and the server serves on
    assert features(tenure_server.bootstrap)[1]["transaction.version"] == (2, 2)


def test_wire_produce_v12_before_any_transaction_coordinator(tenure_server, wire):
    """A transactional batch naming a transactional id no coordinator knows (none started yet on a fresh
    server, or an unknown id): INVALID_PRODUCER_ID_MAPPING, nothing appended."""
    create_topic(tenure_server.bootstrap, "v2-none", 1)
    assert produce_v(wire, "never-initialized", "v2-none", 0, txn_batch(1, 0, 0, b"x"), 12) == \
        INVALID_PRODUCER_ID_MAPPING
    assert consume_all(tenure_server.bootstrap, "v2-none", 1, "read_uncommitted", 0, wait=0.3) == []


def test_confluent_kafka_runs_transactions_v1_against_a_v2_server(tenure_server):
    """librdkafka (confluent-kafka 2.x) does not implement transactions v2: against tenure finalizing
    transaction.version 2 it adds partitions itself (AddPartitionsToTxn, AddOffsetsToTxn) and ends with an EndTxn
    below v5, keeping its epoch, exactly once as before."""
    from confluent_kafka import Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "ck-v1", 1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "ck-v1"})
    with versions_on_the_wire(tenure_server) as seen:
        p.init_transactions(30)
        for i, commit in enumerate((True, False, True)):
            p.begin_transaction()
            p.produce("ck-v1", value=f"v{i}".encode(), partition=0)
            assert p.flush(10) == 0
            (p.commit_transaction if commit else p.abort_transaction)(30)
    # librdkafka's own versions: AddPartitionsToTxn v0, EndTxn v1 (measured with confluent-kafka 2.x)
    assert (versions(seen, "AddPartitionsToTxn"), versions(seen, "EndTxn")) == ({0}, {1}), seen
    assert max(versions(seen, "Produce")) <= 11, seen
    t = describe(tenure_server, "ck-v1")
    assert (t.state_name, t.producer_epoch, t.client_version) == ("CompleteCommit", 0, 0)
    assert consume_all(bs, "ck-v1", 1, "read_committed", 2, wait=0.5) == [b"v0", b"v2"]


def test_kafka_python_runs_transactions_v1_against_a_v2_server(tenure_server):
    from kafka import KafkaProducer
    bs = tenure_server.bootstrap
    create_topic(bs, "kp-v1", 1)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-v1")
    try:
        with versions_on_the_wire(tenure_server) as seen:
            p.init_transactions()
            p.begin_transaction()
            p.send("kp-v1", b"kept", partition=0)
            p.commit_transaction()
            p.begin_transaction()
            p.send("kp-v1", b"dropped", partition=0)
            p.abort_transaction()
    finally:
        p.close()
    # kafka-python 3's: AddPartitionsToTxn v3, EndTxn v3 (it reads no transaction.version feature)
    assert (versions(seen, "AddPartitionsToTxn"), versions(seen, "EndTxn")) == ({3}, {3}), seen
    assert describe(tenure_server, "kp-v1").producer_epoch == 0
    assert consume_all(bs, "kp-v1", 1, "read_committed", 1, wait=0.5) == [b"kept"]


def test_aiokafka_runs_transactions_v1_against_a_v2_server(tenure_server):
    import asyncio

    from aiokafka import AIOKafkaProducer
    bs = tenure_server.bootstrap
    create_topic(bs, "aio-v1", 1)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-v1")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait("aio-v1", b"kept", partition=0)
            await p.begin_transaction()
            await p.send_and_wait("aio-v1", b"dropped", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()
    with versions_on_the_wire(tenure_server) as seen:
        asyncio.run(run())
    # aiokafka 0.14 reads no transaction.version feature (it asks ApiVersions v0): v1 with AddPartitionsToTxn v0
    # and EndTxn v0, its epoch kept
    assert (versions(seen, "AddPartitionsToTxn"), versions(seen, "EndTxn"), seen[("EndTxn", 0)]) == ({0}, {0}, 2), seen
    assert describe(tenure_server, "aio-v1").producer_epoch == 0
    assert consume_all(bs, "aio-v1", 1, "read_committed", 1, wait=0.5) == [b"kept"]


def test_wire_v2_adds_while_the_transaction_coordinator_loads(tenure_server, wire):
    """While __transaction_state's coordinator is being loaded (a move), the coordinator answers the broker's
    add COORDINATOR_LOAD_IN_PROGRESS: Produce v12 reports it as Kafka's broker does, NOT_ENOUGH_REPLICAS (19, a
    retriable error that does not send the producer to refresh its metadata), TxnOffsetCommit v5 as is (14);
    nothing is appended, and the same requests succeed once it is loaded."""
    NOT_ENOUGH_REPLICAS, COORDINATOR_LOAD_IN_PROGRESS = 19, 14
    create_topic(tenure_server.bootstrap, "v2-load", 1)
    r = wire.call(InitProducerIdRequest(transactional_id="v2-load", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 5)
    pid = r.producer_id
    runtime = tenure_server.server.txn_runtime
    tenure_server.call(lambda: runtime.begin_move(0))
    try:
        assert produce_v(wire, "v2-load", "v2-load", 0, txn_batch(pid, 0, 0, b"a"), 12) == NOT_ENOUGH_REPLICAS
        r = wire.call(txn_offsets("v2-load", pid, 0, "g-v2-load", {("v2-load", 0): 1}), 5)
        assert [p.error_code for t in r.topics for p in t.partitions] == [COORDINATOR_LOAD_IN_PROGRESS]
    finally:
        tenure_server.call(lambda: runtime.finish_move(0))
    assert consume_all(tenure_server.bootstrap, "v2-load", 1, "read_uncommitted", 0, wait=0.3) == []
    assert produce_v(wire, "v2-load", "v2-load", 0, txn_batch(pid, 0, 0, b"a"), 12) == NONE
    r = wire.call(txn_offsets("v2-load", pid, 0, "g-v2-load", {("v2-load", 0): 1}), 5)
    assert [p.error_code for t in r.topics for p in t.partitions] == [NONE]
    assert end_v5(wire, "v2-load", pid, 0, True) == (NONE, pid, 1)
    assert consume_all(tenure_server.bootstrap, "v2-load", 1, "read_committed", 1, wait=0.3) == [b"a"]


def test_wire_v1_verification_while_the_transaction_coordinator_loads(tenure_server, wire):
    """The same for a v1 batch (Produce v11, verified, not added): NOT_ENOUGH_REPLICAS while the coordinator
    loads, appended once it is loaded (and the verification asks the coordinator loaded by the move)."""
    from tests.integration.test_transactions import add_v3, codes_v3
    NOT_ENOUGH_REPLICAS = 19
    create_topic(tenure_server.bootstrap, "v1-load", 2)
    r = wire.call(InitProducerIdRequest(transactional_id="v1-load", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 4)
    pid = r.producer_id
    assert codes_v3(wire.call(add_v3("v1-load", pid, 0, [("v1-load", [0])]), 3)) == {("v1-load", 0): NONE}
    runtime = tenure_server.server.txn_runtime
    tenure_server.call(lambda: runtime.begin_move(0))
    try:
        assert produce_v(wire, "v1-load", "v1-load", 0, txn_batch(pid, 0, 0, b"a"), 11) == NOT_ENOUGH_REPLICAS
    finally:
        tenure_server.call(lambda: runtime.finish_move(0))
    assert produce_v(wire, "v1-load", "v1-load", 0, txn_batch(pid, 0, 0, b"a"), 11) == NONE
    assert wire.call(EndTxnRequest(transactional_id="v1-load", producer_id=pid, producer_epoch=0, committed=True),
                     4).error_code == NONE
    # a transaction begun after the move is verified against the coordinator the move loaded (the one before
    # it never saw partition 1 added)
    assert codes_v3(wire.call(add_v3("v1-load", pid, 0, [("v1-load", [1])]), 3)) == {("v1-load", 1): NONE}
    assert produce_v(wire, "v1-load", "v1-load", 1, txn_batch(pid, 0, 0, b"b"), 11) == NONE
    assert wire.call(EndTxnRequest(transactional_id="v1-load", producer_id=pid, producer_epoch=0, committed=True),
                     4).error_code == NONE
    assert sorted(consume_all(tenure_server.bootstrap, "v1-load", 2, "read_committed", 2, wait=0.3)) == [b"a", b"b"]


def test_wire_an_empty_transactional_id_is_an_invalid_request(tenure_server, wire):
    """Kafka answers INVALID_REQUEST (42) to an empty transactional id (null means none: an idempotent
    producer's InitProducerId): InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v4 and v5, the
    broker's add for a Produce v12 or a TxnOffsetCommit v5, the verification of a Produce v11; nothing is
    created or appended, and the server serves on."""
    from kafka.protocol.producer import AddOffsetsToTxnRequest

    from tests.integration.test_transactions import add_v3, codes_v3
    INVALID_REQUEST = 42
    create_topic(tenure_server.bootstrap, "v2-empty", 1)
    r = wire.call(InitProducerIdRequest(transactional_id="", transaction_timeout_ms=60000, producer_id=-1,
                                        producer_epoch=-1), 5)
    assert (r.error_code, r.producer_id) == (INVALID_REQUEST, -1)
    assert codes_v3(wire.call(add_v3("", 1, 0, [("v2-empty", [0])]), 3)) == {("v2-empty", 0): INVALID_REQUEST}
    assert wire.call(AddOffsetsToTxnRequest(transactional_id="", producer_id=1, producer_epoch=0, group_id="g"),
                     3).error_code == INVALID_REQUEST
    for version in (4, 5):
        r = wire.call(EndTxnRequest(transactional_id="", producer_id=1, producer_epoch=0, committed=True), version)
        assert r.error_code == INVALID_REQUEST, version
    assert produce_v(wire, "", "v2-empty", 0, txn_batch(1, 0, 0, b"x"), 12) == INVALID_REQUEST
    assert produce_v(wire, "", "v2-empty", 0, txn_batch(1, 0, 0, b"x"), 11) == INVALID_REQUEST
    r = wire.call(txn_offsets("", 1, 0, "g-empty", {("v2-empty", 0): 1}), 5)
    assert [p.error_code for t in r.topics for p in t.partitions] == [INVALID_REQUEST]
    assert "" not in tenure_server.call(lambda: set(tenure_server.server.txn_runtime.shards[0].transactions))
    assert consume_all(tenure_server.bootstrap, "v2-empty", 1, "read_uncommitted", 0, wait=0.3) == []
    r = wire.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                        producer_epoch=-1), 5)
    assert (r.error_code, r.producer_epoch) == (NONE, 0)              # null: an idempotent producer's id


def test_wire_txn_offset_commit_v5_of_unknown_partitions_only_adds_nothing(tenure_server, wire):
    """As Kafka's broker: a TxnOffsetCommit whose partitions are all unknown is answered 3 for each and never
    reaches the transaction coordinator (v5 adds nothing to the transaction); one with a known partition and
    a fenced epoch is answered 3 for the unknown ones and INVALID_PRODUCER_EPOCH for the others."""
    UNKNOWN = 3
    create_topic(tenure_server.bootstrap, "v2-unk", 1)
    r = wire.call(InitProducerIdRequest(transactional_id="v2-unk", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1), 5)
    pid = r.producer_id
    r = wire.call(txn_offsets("v2-unk", pid, 0, "g-v2-unk", {("nope", 0): 1, ("v2-unk", 4): 2}), 5)
    assert [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == \
        [("nope", 0, UNKNOWN), ("v2-unk", 4, UNKNOWN)]
    t = describe(tenure_server, "v2-unk")
    assert (t.state_name, t.partitions) == ("Empty", frozenset())
    r = wire.call(txn_offsets("v2-unk", pid, 7, "g-v2-unk", {("nope", 0): 1, ("v2-unk", 0): 2}), 5)
    assert [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == \
        [("nope", 0, UNKNOWN), ("v2-unk", 0, INVALID_PRODUCER_EPOCH)]
    assert describe(tenure_server, "v2-unk").state_name == "Empty"
