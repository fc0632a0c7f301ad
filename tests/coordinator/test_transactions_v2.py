"""The transaction coordinator's transactions v2 path (KIP-890 part 2) as a state machine, input by input, as
Kafka 4.x's TransactionCoordinator serves it: partitions added by the broker's AddPartitionsToTxn v5 (for a
Produce v12+ or a TxnOffsetCommit v5+), EndTxn v5 bumping the epoch at every end (retries told apart by their
epoch), the epoch overflow (a new producer id at epoch 0), the coordinator's own aborts under transaction.version
2, the records as Kafka writes them per feature level, and what the broker makes of the coordinator's answers."""
from __future__ import annotations

import dataclasses
import itertools

from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest

from tenure.broker.produce import produce_txn_error
from tenure.coordinator.transactions import TransactionCoordinator, timeout_key, txn_offset_commit_error
from tenure.protocol import txn_records
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.markers import TxnMarker
from tenure.protocol.txn_records import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    TransactionRecord,
)


class Ctx:
    def __init__(self, token, api_version, now_ms):
        self.token, self.api_version, self.now_ms = token, api_version, now_ms


def coordinator(tv: int = 2) -> TransactionCoordinator:
    ids = itertools.count(5000)
    return TransactionCoordinator(lambda: next(ids), {"t": 2}.get, transaction_version=tv,
                                  offsets_partitions=lambda: 4)


def init(c, tid="tx", now=1000, pid=-1, epoch=-1, version=5):
    r = c.handle(22, Ctx(1, version, now), InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=60000, producer_id=pid, producer_epoch=epoch))
    body = r.responses[0][1]
    return body.error_code, body.producer_id, body.producer_epoch


def broker_add(c, pid, epoch, parts, tid="tx", now=2000, topic="t"):
    """What the broker asks before appending a Produce v12 batch (AddPartitionsToTxn v5, not verify-only)."""
    A = AddPartitionsToTxnRequest
    r = c.handle(24, Ctx(2, 5, now), A(transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=False,
        topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=parts)])]))
    [res] = r.responses[0][1].results_by_transaction
    return r, {(t.name, p.partition_index): p.partition_error_code for t in res.topic_results
               for p in t.results_by_partition}


def end(c, pid, epoch, commit, tid="tx", now=3000, version=5):
    r = c.handle(26, Ctx(3, version, now), EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                         committed=commit))
    body = r.responses[0][1]
    return r, (body.error_code, body.producer_id, body.producer_epoch)


def replayed(records) -> dict:
    """The state a fresh coordinator reaches from the records, through the codec (as loading does)."""
    fresh = coordinator()
    for r in records:
        fresh.replay(txn_records.decode(*txn_records.encode(r)))
    return fresh.transactions


def test_a_v2_transaction_bumps_the_epoch_at_its_commit_and_the_markers_carry_it():
    c = coordinator()
    log = []
    assert init(c) == (0, 5000, 0)
    log.append(c.transactions["tx"])
    r, codes = broker_add(c, 5000, 0, [1, 0])
    assert codes == {("t", 0): E.NONE, ("t", 1): E.NONE}
    log += r.records
    assert r.records == [TransactionRecord("tx", 5000, 0, 60000, ONGOING, frozenset({("t", 0), ("t", 1)}), 2000, 2000,
                                           client_version=2)]
    assert r.timers[-1].key == timeout_key("tx")
    r, answer = end(c, 5000, 0, True)
    assert answer == (0, 5000, 1)                                  # EndTxn v5 names the epoch to go on with
    assert [(x.state, x.producer_epoch, x.client_version) for x in r.records] == [(PREPARE_COMMIT, 1, 2)]
    assert r.markers == [TxnMarker("tx", "t", 0, 5000, 1, True), TxnMarker("tx", "t", 1, 5000, 1, True)]
    log += r.records
    done = c.markers_written(r.markers, 3001)
    assert [(x.state, x.producer_id, x.producer_epoch, x.partitions) for x in done.records] == \
        [(COMPLETE_COMMIT, 5000, 1, frozenset())]
    log += done.records
    # the next transaction runs under the bumped epoch; the old one is fenced
    assert broker_add(c, 5000, 0, [0])[1] == {("t", 0): E.PRODUCER_FENCED}
    r, codes = broker_add(c, 5000, 1, [0], now=4000)
    assert codes == {("t", 0): E.NONE} and (r.records[0].state, r.records[0].start_ms) == (ONGOING, 4000)
    log += r.records
    r, answer = end(c, 5000, 1, False, now=5000)
    assert answer == (0, 5000, 2) and r.markers == [TxnMarker("tx", "t", 0, 5000, 2, False)]
    log += r.records + c.markers_written(r.markers, 5001).records
    assert replayed(log) == c.transactions
    # every record is TransactionLogValue v1 (transaction.version >= 1), with the client's transaction version
    assert {x.value_version for x in log} == {1}


def test_endtxn_v5_retries_are_told_apart_by_their_epoch():
    """Kafka's table: in CompleteCommit a commit with the epoch before the bump is a retry (NONE, the current
    id and epoch), with the current epoch it is INVALID_TXN_STATE; an abort with the current epoch ends an
    empty transaction (bumped, no markers); an older epoch is PRODUCER_FENCED."""
    c = coordinator()
    init(c)
    broker_add(c, 5000, 0, [0])
    r, _ = end(c, 5000, 0, True)
    c.markers_written(r.markers, 3001)
    assert end(c, 5000, 0, True)[1] == (E.NONE, 5000, 1)            # retry of the commit
    assert end(c, 5000, 0, False)[1][0] == E.INVALID_TXN_STATE      # "retry" of an abort that never was
    assert end(c, 5000, 1, True)[1][0] == E.INVALID_TXN_STATE       # nothing open to commit
    assert end(c, 4999, 1, True)[1][0] == E.INVALID_PRODUCER_ID_MAPPING
    assert end(c, 5000, 7, True)[1][0] == E.PRODUCER_FENCED
    r, answer = end(c, 5000, 1, False, now=4000)                    # an abort with nothing added: v2 allows it
    assert answer == (E.NONE, 5000, 2) and r.markers == []
    assert [(x.state, x.producer_epoch, x.start_ms) for x in r.records] == \
        [(PREPARE_ABORT, 2, 4000), (COMPLETE_ABORT, 2, 4000)]
    assert end(c, 5000, 1, False)[1] == (E.NONE, 5000, 2)           # its retry
    assert end(c, 5000, 1, True)[1][0] == E.INVALID_TXN_STATE
    # Empty (after InitProducerId): abort bumps, commit is INVALID_TXN_STATE, an older epoch is fenced
    assert init(c, pid=5000, epoch=2) == (0, 5000, 3)
    assert end(c, 5000, 3, True)[1][0] == E.INVALID_TXN_STATE
    assert end(c, 5000, 2, False)[1][0] == E.PRODUCER_FENCED
    assert end(c, 5000, 3, False)[1] == (E.NONE, 5000, 4)


def test_a_v1_endtxn_keeps_the_epoch_on_the_same_server():
    """Transactions v1 is still served to a client that uses it: EndTxn v4 ends without a bump and answers no
    producer id (its fields are not in v4), AddPartitionsToTxn v3 starts it."""
    c = coordinator()
    init(c, version=4)
    A = AddPartitionsToTxnRequest
    r = c.handle(24, Ctx(2, 3, 2000), A(v3_and_below_transactional_id="tx", v3_and_below_producer_id=5000,
                                        v3_and_below_producer_epoch=0,
                                        v3_and_below_topics=[A.AddPartitionsToTxnTopic(name="t", partitions=[0])]))
    assert r.records[0].client_version == 0
    r, answer = end(c, 5000, 0, True, version=4)
    assert answer == (0, -1, -1) and r.markers == [TxnMarker("tx", "t", 0, 5000, 0, True)]
    c.markers_written(r.markers, 3001)
    assert (c.transactions["tx"].state, c.transactions["tx"].producer_epoch) == (COMPLETE_COMMIT, 0)


def test_epoch_overflow_moves_to_a_new_producer_id_at_epoch_zero():
    """At epoch 32766 (exhausted: Short.MAX_VALUE - 1) a v2 end is prepared under 32767 with the old id - the
    markers carry it - and completes with a new producer id at epoch 0, which EndTxn names; a retry naming
    the old id and 32766 is answered the same; InitProducerId naming them gets the new id without a bump."""
    c = coordinator()
    c.replay(TransactionRecord("tx", 7, 32766, 60000, ONGOING, frozenset({("t", 0)}), 50, 40, client_version=2))
    r, answer = end(c, 7, 32766, True)
    assert answer == (E.NONE, 5000, 0)
    assert [(x.state, x.producer_id, x.producer_epoch) for x in r.records] == [(PREPARE_COMMIT, 7, 32767)]
    assert r.markers == [TxnMarker("tx", "t", 0, 7, 32767, True)]
    done = c.markers_written(r.markers, 3001)
    assert [(x.state, x.producer_id, x.producer_epoch, x.previous_producer_id) for x in done.records] == \
        [(COMPLETE_COMMIT, 5000, 0, 7)]
    assert end(c, 7, 32766, True)[1] == (E.NONE, 5000, 0)          # the retry of the request that overflowed
    assert end(c, 7, 32766, False)[1][0] == E.INVALID_TXN_STATE
    assert init(c, pid=7, epoch=32766) == (E.NONE, 5000, 0)        # KIP-360 retry across the new id
    assert init(c, pid=7, epoch=5) == (E.PRODUCER_FENCED, -1, -1)
    # the new id goes on as any other
    broker_add(c, 5000, 0, [1])
    assert end(c, 5000, 0, False)[1] == (E.NONE, 5000, 1)


def test_a_timeout_under_transaction_version_2_fences_and_bumps_again():
    """Kafka ends its own abort as the server's transaction version ends one: the fencing epoch (+1), then the
    v2 bump (+1); under transaction.version 1 only the fencing epoch."""
    for tv, epoch in ((2, 2), (1, 1)):
        c = coordinator(tv)
        init(c)
        broker_add(c, 5000, 0, [0], now=2000)
        r = c.on_timer(timeout_key("tx"), 62000)
        assert [(x.state, x.producer_epoch) for x in r.records] == [(PREPARE_ABORT, epoch)], tv
        assert r.markers == [TxnMarker("tx", "t", 0, 5000, epoch, False)]
        c.markers_written(r.markers, 62000)
        assert (c.transactions["tx"].state, c.transactions["tx"].producer_epoch) == (COMPLETE_ABORT, epoch)
        # the timed-out producer's next batch is fenced by the broker's add
        assert broker_add(c, 5000, 0, [0])[1] == {("t", 0): E.PRODUCER_FENCED}


def test_the_broker_add_may_name_the_groups_offsets_partition_a_client_may_not():
    """TxnOffsetCommit v5: the broker adds the group's __consumer_offsets partition (an internal topic a
    client's AddPartitionsToTxn v3 cannot name); a partition beyond the topic's count is unknown."""
    c = coordinator()
    init(c)
    assert broker_add(c, 5000, 0, [3], topic="__consumer_offsets")[1] == {("__consumer_offsets", 3): E.NONE}
    assert broker_add(c, 5000, 0, [4], topic="__consumer_offsets")[1] == \
        {("__consumer_offsets", 4): E.UNKNOWN_TOPIC_OR_PARTITION}
    A = AddPartitionsToTxnRequest
    r = c.handle(24, Ctx(2, 3, 2000), A(v3_and_below_transactional_id="tx", v3_and_below_producer_id=5000,
                                        v3_and_below_producer_epoch=0, v3_and_below_topics=[
                                            A.AddPartitionsToTxnTopic(name="__consumer_offsets", partitions=[0])]))
    assert r.responses[0][1].results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == \
        E.UNKNOWN_TOPIC_OR_PARTITION


def test_verification_codes_and_what_each_request_version_reports():
    """The coordinator's verification (Produce v3-11, TxnOffsetCommit v0-4) answers as Kafka's
    handleVerifyPartitionsInTransaction; the broker reports them as the request's version knows them."""
    c = coordinator()
    init(c)
    broker_add(c, 5000, 0, [0])
    assert c.verify("tx", 5000, 0, "t", 0) == E.NONE
    assert c.verify("tx", 5000, 0, "t", 1) == E.TRANSACTION_ABORTABLE
    assert c.verify("tx", 5000, 1, "t", 0) == E.PRODUCER_FENCED
    assert c.verify("tx", 5001, 0, "t", 0) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.verify("other", 5000, 0, "t", 0) == E.INVALID_PRODUCER_ID_MAPPING
    c.replay(TransactionRecord("p", 9, 0, 60000, PREPARE_COMMIT, frozenset({("t", 0)}), 1, 1))
    assert c.verify("p", 9, 0, "t", 0) == E.CONCURRENT_TRANSACTIONS
    # Produce: fenced is INVALID_PRODUCER_EPOCH; not added INVALID_TXN_STATE to v10, TRANSACTION_ABORTABLE from
    # v11; the coordinator's retriable answers NOT_ENOUGH_REPLICAS
    assert produce_txn_error(E.PRODUCER_FENCED, 12) == E.INVALID_PRODUCER_EPOCH
    assert [produce_txn_error(E.TRANSACTION_ABORTABLE, v) for v in (9, 10, 11, 12)] == \
        [E.INVALID_TXN_STATE, E.INVALID_TXN_STATE, E.TRANSACTION_ABORTABLE, E.TRANSACTION_ABORTABLE]
    assert {produce_txn_error(code, 12) for code in (E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS,
                                                     E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE)} == \
        {E.NOT_ENOUGH_REPLICAS}
    assert produce_txn_error(E.INVALID_PRODUCER_ID_MAPPING, 12) == E.INVALID_PRODUCER_ID_MAPPING
    # TxnOffsetCommit: fenced is INVALID_PRODUCER_EPOCH; not added INVALID_TXN_STATE to v3, then TRANSACTION_ABORTABLE
    assert txn_offset_commit_error(E.PRODUCER_FENCED, 5) == E.INVALID_PRODUCER_EPOCH
    assert [txn_offset_commit_error(E.TRANSACTION_ABORTABLE, v) for v in (3, 4)] == \
        [E.INVALID_TXN_STATE, E.TRANSACTION_ABORTABLE]


def test_records_as_kafka_writes_them_per_feature_level():
    """transaction.version 0: TransactionLogValue v0; 1 and 2: v1 with the tagged clientTransactionVersion
    (Kafka's writer leaves previousProducerId and nextProducerId at their defaults, so they are not written);
    an Empty transaction's partitions are null."""
    for tv, version in ((0, 0), (1, 1), (2, 1)):
        c = coordinator(tv)
        init(c)
        r, _ = broker_add(c, 5000, 0, [0])
        [record] = r.records
        key, value = txn_records.encode(record)
        assert value[:2] == version.to_bytes(2, "big"), tv
        decoded = txn_records.TransactionLogValue.decode(value)
        assert decoded.client_transaction_version == (2 if version else 0)
        assert (decoded.previous_producer_id, decoded.next_producer_id) == (-1, -1)
        back = txn_records.decode(key, value)
        # v0 has no field for the client's transaction version: it reads back as 0
        assert back == dataclasses.replace(record, client_version=2 if version else 0), tv
        assert back.value_version == version
    empty = TransactionRecord("tx", 5, 0, 60000, EMPTY, frozenset(), 1, -1, value_version=1)
    assert txn_records.TransactionLogValue.decode(txn_records.encode(empty)[1]).transaction_partitions is None
    # a v1 value written by Kafka with previous/next producer ids set is read with them
    V = txn_records.TransactionLogValue
    raw = bytes(V(producer_id=12, previous_producer_id=11, next_producer_id=10, producer_epoch=2,
                  transaction_timeout_ms=100, transaction_status=PREPARE_COMMIT,
                  transaction_partitions=[V.PartitionsSchema(topic="t", partition_ids=[0])],
                  transaction_last_update_timestamp_ms=5, transaction_start_timestamp_ms=4,
                  client_transaction_version=2).encode(version=1))
    got = txn_records.decode(txn_records.encode(empty)[0], raw)
    assert (got.producer_id, got.previous_producer_id, got.next_producer_id, got.client_version) == (12, 11, 10, 2)


def test_a_prepared_v2_transaction_loaded_gets_its_markers_again():
    c = coordinator()
    c.replay(txn_records.decode(*txn_records.encode(TransactionRecord(
        "tx", 7, 4, 60000, PREPARE_ABORT, frozenset({("t", 1)}), 50, 40, client_version=2, value_version=1))))
    r = c.loaded(100)
    assert r.markers == [TxnMarker("tx", "t", 1, 7, 4, False)]
    done = c.markers_written(r.markers, 101)
    assert [(x.state, x.producer_id, x.producer_epoch) for x in done.records] == [(COMPLETE_ABORT, 7, 4)]


def test_a_restart_between_an_overflowing_prepare_and_its_completion():
    """Kafka does not write nextProducerId, so a transaction prepared at 32767 and loaded completes with its old
    id at 32767 (the client's retry, naming 32766, is answered that); a commit there has no epoch to go to and
    fails (Kafka's transition refuses it), an abort goes through and moves to a new producer id at epoch 0."""
    c = coordinator()
    c.replay(TransactionRecord("tx", 7, 32766, 60000, ONGOING, frozenset({("t", 0)}), 50, 40, client_version=2))
    r, _ = end(c, 7, 32766, True)
    restarted = coordinator()
    for x in r.records:                                  # the log as a kill -9 before the markers leaves it
        restarted.replay(txn_records.decode(*txn_records.encode(x)))
    loaded = restarted.loaded(100)
    assert loaded.markers == [TxnMarker("tx", "t", 0, 7, 32767, True)]
    done = restarted.markers_written(loaded.markers, 101)
    assert [(x.state, x.producer_id, x.producer_epoch) for x in done.records] == [(COMPLETE_COMMIT, 7, 32767)]
    assert end(restarted, 7, 32766, True)[1] == (E.NONE, 7, 32767)
    broker_add(restarted, 7, 32767, [0])
    assert end(restarted, 7, 32767, True)[1][0] == E.UNKNOWN_SERVER_ERROR
    r, answer = end(restarted, 7, 32767, False)
    assert answer == (E.NONE, 5000, 0) and r.markers == [TxnMarker("tx", "t", 0, 7, 32767, False)]


def test_a_verify_only_request_answers_as_kafkas_verification():
    """AddPartitionsToTxn v4+ with verify_only: NONE for a partition in the transaction, TRANSACTION_ABORTABLE
    for one not in it (also once the transaction ended), PRODUCER_FENCED for another epoch; nothing written."""
    c = coordinator()
    init(c)
    broker_add(c, 5000, 0, [0])
    A = AddPartitionsToTxnRequest

    def verify(epoch):
        r = c.handle(24, Ctx(2, 4, 2500), A(transactions=[A.AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=5000, producer_epoch=epoch, verify_only=True,
            topics=[A.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])])]))
        assert r.records == []
        [res] = r.responses[0][1].results_by_transaction
        return {p.partition_index: p.partition_error_code for t in res.topic_results for p in t.results_by_partition}
    assert verify(0) == {0: E.NONE, 1: E.TRANSACTION_ABORTABLE}
    assert verify(1) == {0: E.PRODUCER_FENCED, 1: E.PRODUCER_FENCED}
    r, _ = end(c, 5000, 0, True)
    c.markers_written(r.markers, 3001)
    assert verify(1) == {0: E.TRANSACTION_ABORTABLE, 1: E.TRANSACTION_ABORTABLE}
