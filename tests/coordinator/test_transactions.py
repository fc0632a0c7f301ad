"""The transaction coordinator as a state machine: exact records and markers per input, replay of the
records reproduces the state, and what loading a log in each state leads to."""
from __future__ import annotations

import itertools

from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest

from tenure.coordinator import TimerOp
from tenure.coordinator.transactions import TransactionCoordinator, timeout_key
from tenure.protocol import txn_records
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


def coordinator() -> TransactionCoordinator:
    """A coordinator of a server whose `transaction.version` is 1 (these tests are the v1 path's; the v2 path's
    are in test_transactions_v2.py)."""
    ids = itertools.count(5000)
    return TransactionCoordinator(lambda: next(ids), {"t": 2}.get, transaction_version=1)


def init(c, tid="tx", now=1000, timeout=60000, pid=-1, epoch=-1, version=4):
    return c.handle(22, Ctx(1, version, now), InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=timeout, producer_id=pid, producer_epoch=epoch))


def add(c, pid, epoch, parts, tid="tx", now=2000):
    A = AddPartitionsToTxnRequest
    return c.handle(24, Ctx(2, 3, now), A(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                                          v3_and_below_producer_epoch=epoch,
                                          v3_and_below_topics=[A.AddPartitionsToTxnTopic(name="t", partitions=parts)]))


def end(c, pid, epoch, commit, tid="tx", now=3000):
    return c.handle(26, Ctx(3, 3, now), EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                      committed=commit))


def replayed(records) -> dict:
    """The state a fresh coordinator reaches from the records, through the codec (as loading does)."""
    fresh = coordinator()
    for r in records:
        fresh.replay(txn_records.decode(*txn_records.encode(r)))
    return fresh.transactions


def test_commit_writes_prepare_markers_then_complete_and_replay_agrees():
    c = coordinator()
    log = []
    r = init(c)
    log += r.records
    assert r.records == [TransactionRecord("tx", 5000, 0, 60000, EMPTY, frozenset(), 1000, -1)]
    r = add(c, 5000, 0, [1, 0])
    log += r.records
    assert r.records == [TransactionRecord("tx", 5000, 0, 60000, ONGOING, frozenset({("t", 0), ("t", 1)}), 2000, 2000)]
    assert r.timers == [TimerOp(timeout_key("tx"), 62000)]
    r = add(c, 5000, 0, [0])            # already in the transaction: nothing to write
    assert r.records == [] and r.responses[0][1].results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == 0
    r = end(c, 5000, 0, True)
    log += r.records
    assert [x.state for x in r.records] == [PREPARE_COMMIT]
    assert r.markers == [TxnMarker("tx", "t", 0, 5000, 0, True), TxnMarker("tx", "t", 1, 5000, 0, True)]
    assert TimerOp(timeout_key("tx"), None) in r.timers
    done = c.markers_written(r.markers, 3001)
    log += done.records
    assert [(x.state, x.partitions) for x in done.records] == [(COMPLETE_COMMIT, frozenset())]
    assert end(c, 5000, 0, True).responses[0][1].error_code == 0         # a retry of the commit
    assert end(c, 5000, 0, False).responses[0][1].error_code == 48       # INVALID_TXN_STATE
    assert replayed(log) == c.transactions


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction():
    c = coordinator()
    init(c)
    add(c, 5000, 0, [0])
    r = init(c)                         # the same transactional id again
    # as Kafka: the open transaction is fenced and aborted, the new producer told to retry (51) ...
    assert (r.responses[0][1].error_code, r.responses[0][1].producer_epoch) == (51, -1)
    assert [(x.state, x.producer_epoch) for x in r.records] == [(PREPARE_ABORT, 1)]
    assert r.markers == [TxnMarker("tx", "t", 0, 5000, 1, False)]
    c.markers_written(r.markers, 1001)
    assert c.transactions["tx"].state == COMPLETE_ABORT
    # ... and its retry, the abort complete, bumps the epoch once more
    r = init(c)
    assert (r.responses[0][1].error_code, r.responses[0][1].producer_id, r.responses[0][1].producer_epoch) == \
        (0, 5000, 2)
    assert add(c, 5000, 0, [1]).responses[0][1].results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == 90     # PRODUCER_FENCED (AddPartitionsToTxn knows it from v2)

def test_timeout_aborts_with_an_epoch_bump_and_the_producer_may_bump_past_it():
    c = coordinator()
    init(c, timeout=5000)
    add(c, 5000, 0, [0], now=2000)
    assert c.on_timer(timeout_key("tx"), 6999).records == []     # not yet: re-armed
    r = c.on_timer(timeout_key("tx"), 7000)
    assert [(x.state, x.producer_epoch) for x in r.records] == [(PREPARE_ABORT, 1)]
    c.markers_written(r.markers, 7000)
    # KIP-360: the producer that timed out asks for a bump from the epoch it had
    r = init(c, pid=5000, epoch=0, now=8000)
    assert (r.responses[0][1].error_code, r.responses[0][1].producer_epoch) == (0, 1)
    # an epoch that is neither the current nor the one before is fenced (90 from v4, 47 before)
    assert init(c, pid=5000, epoch=7, now=8000).responses[0][1].error_code == 90
    assert init(c, pid=5000, epoch=7, now=8000, version=3).responses[0][1].error_code == 47


def test_loading_completes_prepared_transactions_and_times_open_ones():
    c = coordinator()
    c.replay(TransactionRecord("prepared", 7, 3, 60000, PREPARE_COMMIT, frozenset({("t", 1)}), 50, 40))
    c.replay(TransactionRecord("open", 8, 0, 60000, ONGOING, frozenset({("t", 0)}), 50, 40))
    c.replay(TransactionRecord("done", 9, 0, 60000, COMPLETE_ABORT, frozenset(), 50, 40))
    r = c.loaded(100)
    assert r.markers == [TxnMarker("prepared", "t", 1, 7, 3, True)]
    assert r.timers == [TimerOp(timeout_key("open"), 60040)]
    assert c.markers_written(r.markers, 100).records[0].state == COMPLETE_COMMIT
    assert c.max_producer_id() == 9


def test_unknown_partitions_refuse_the_whole_add():
    c = coordinator()
    init(c)
    r = add(c, 5000, 0, [0, 2])
    codes = {p.partition_index: p.partition_error_code
             for p in r.responses[0][1].results_by_topic_v3_and_below[0].results_by_partition}
    assert codes == {0: 55, 2: 3} and r.records == []


def test_list_transactions_filters():
    from kafka.protocol.admin import ListTransactionsRequest
    c = coordinator()
    init(c, tid="a")
    add(c, 5000, 0, [0], tid="a", now=2000)
    init(c, tid="b")

    def listed(version=1, now=10000, **kw):
        body = ListTransactionsRequest(**{"state_filters": [], "producer_id_filters": [], "duration_filter": -1, **kw})
        r = c.handle(66, Ctx(9, version, now), body).responses[0][1]
        return r.unknown_state_filters, [(t.transactional_id, t.transaction_state) for t in r.transaction_states]

    assert listed() == ([], [("a", "Ongoing"), ("b", "Empty")])
    assert listed(state_filters=["Ongoing", "Bogus"]) == (["Bogus"], [("a", "Ongoing")])
    assert listed(producer_id_filters=[5001]) == ([], [("b", "Empty")])
    assert listed(duration_filter=9000, state_filters=["Ongoing"]) == ([], [])      # running 8 s only
    assert listed(duration_filter=7000, state_filters=["Ongoing"]) == ([], [("a", "Ongoing")])


def test_list_transactions_v2_filters_by_a_whole_match_of_the_transactional_id_pattern():
    """KIP-1152 (TransactionStateManagerTest's cases): the pattern must match the whole id (RE2/J `matches()`),
    null or empty is no filter, it combines with the other filters, v1 has no pattern; a pattern RE2/J refuses
    answers INVALID_REGULAR_EXPRESSION (128) and lists nothing. The duration filter is strict ("running longer
    than"): a transaction exactly that old is left out."""
    from kafka.protocol.admin import ListTransactionsRequest
    c = coordinator()
    for i, tid in enumerate(["my-special-0", "t1", "your-special-1"]):
        init(c, tid=tid, now=1000)
        add(c, 5000 + i, 0, [0], tid=tid, now=2000 + 1000 * i)

    def listed(version=2, now=10000, **kw):
        body = ListTransactionsRequest(**{"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                          "transactional_id_pattern": None, **kw})
        r = c.handle(66, Ctx(9, version, now), body).responses[0][1]
        return r.error_code, [t.transactional_id for t in r.transaction_states]

    everything = (0, ["my-special-0", "t1", "your-special-1"])
    assert listed() == everything and listed(transactional_id_pattern="") == everything
    assert listed(transactional_id_pattern=".*special-.*") == (0, ["my-special-0", "your-special-1"])
    assert listed(transactional_id_pattern="special") == (0, [])            # a whole match, not a search
    assert listed(transactional_id_pattern="nothing") == (0, [])
    assert listed(transactional_id_pattern="t\\d") == (0, ["t1"])
    assert listed(transactional_id_pattern=".*special-.*", producer_id_filters=[5002]) == (0, ["your-special-1"])
    assert listed(transactional_id_pattern=".*special-.*", duration_filter=7000) == (0, ["my-special-0"])
    assert listed(transactional_id_pattern="(ab(cd") == (128, [])
    assert listed(transactional_id_pattern="\\C") == (128, [])              # RE2/J refuses what C++ RE2 takes
    assert listed(version=1, transactional_id_pattern="(ab(cd") == everything  # v1 carries no pattern
    assert listed(duration_filter=7999) == (0, ["my-special-0"])            # running 8 s
    assert listed(duration_filter=8000) == (0, [])                          # not longer than 8000 ms


def test_group_coordinator_holds_transactional_offsets_until_the_marker():
    from kafka.protocol.producer import TxnOffsetCommitRequest as R

    from tenure.coordinator import GroupShard, RequestContext
    from tenure.protocol.records import OffsetCommitRecord, TransactionalOffsetCommit, TransactionEnd
    g = GroupShard()
    T = R.TxnOffsetCommitRequestTopic

    def commit(pid, offset):
        body = R(transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=0, generation_id=-1,
                 member_id="", group_instance_id=None, topics=[T(name="t", partitions=[
                     T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                       committed_leader_epoch=-1, committed_metadata="")])])
        return g.handle(28, RequestContext(1, 3, "c", "h", 100), body)

    r = commit(7, 42)
    assert r.records == [TransactionalOffsetCommit(7, 0, OffsetCommitRecord("g", "t", 0, 42, -1, "", 100))]
    assert g.committed_offsets("g") == {} and g.has_pending_offsets("g", "t", 0)
    commit(8, 50)
    g.replay(TransactionEnd(8, 0, commit=False))         # producer 8 aborts: its offset is dropped
    assert g.committed_offsets("g") == {} and g.has_pending_offsets("g")
    g.replay(TransactionEnd(7, 0, commit=True))          # producer 7 commits: its offset counts
    assert g.committed_offsets("g")[("t", 0)].offset == 42 and not g.has_pending_offsets("g")
    commit(9, 60)
    g.unload(200)
    assert g.pending_offsets == {}


def test_a_transactional_commit_is_not_refused_during_completing_rebalance():
    """Kafka refuses an OffsetCommit in CompletingRebalance (27) but not a TxnOffsetCommit of the member."""
    from kafka.protocol.consumer.group import OffsetCommitRequest as O
    from kafka.protocol.producer import TxnOffsetCommitRequest as R

    from tenure.coordinator import GroupShard, RequestContext
    from tests.support.groupwire import join_request
    g = GroupShard()
    join, version = join_request("g", "", None, "t", session_ms=10000)
    g.handle(11, RequestContext(1, version, "c", "h", 100), join)        # a new member: id handed out (KIP-394)
    mid = next(iter(g.groups["g"].pending_members))
    join, version = join_request("g", mid, None, "t", session_ms=10000)
    r = g.handle(11, RequestContext(2, version, "c", "h", 100), join)
    for op in r.timers:                  # the initial delay (0 here) ends the join phase
        if op.deadline_ms is not None and op.key.kind == "join":
            g.on_timer(op.key, op.deadline_ms)
    assert g.groups["g"].state == "CompletingRebalance"
    gen = g.groups["g"].generation
    T = R.TxnOffsetCommitRequestTopic
    txn = R(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0, generation_id=gen, member_id=mid,
            group_instance_id=None, topics=[T(name="t", partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=3, committed_leader_epoch=-1, committed_metadata="")])])
    r = g.handle(28, RequestContext(3, 3, "c", "h", 100), txn).responses[0][1]
    assert r.topics[0].partitions[0].error_code == 0
    OT = O.OffsetCommitRequestTopic
    plain = O(group_id="g", generation_id_or_member_epoch=gen, member_id=mid, group_instance_id=None, topics=[
        OT(name="t", partitions=[OT.OffsetCommitRequestPartition(partition_index=0, committed_offset=3,
                                                                committed_leader_epoch=-1, committed_metadata="")])])
    r = g.handle(8, RequestContext(4, 8, "c", "h", 100), plain).responses[0][1]
    assert r.topics[0].partitions[0].error_code == 27                  # REBALANCE_IN_PROGRESS


def test_a_fencing_abort_at_the_last_epoch_keeps_the_producer_id_through_a_restart():
    """A new producer fences one whose epoch cannot be bumped twice more (32766): as Kafka, the open
    transaction is aborted under the SAME producer id - the one its batches carry - at the last epoch
    (32767), the new producer is told to retry (CONCURRENT_TRANSACTIONS, 51), and its retry after the abort
    gets a new producer id. A server killed between the PrepareAbort and its markers loads the record and
    writes the same markers: the fenced producer's transaction ends in its partitions."""
    c = coordinator()
    c.replay(TransactionRecord("tx", 7, 32766, 60000, ONGOING, frozenset({("t", 0)}), 50, 40))
    r = init(c, now=100)
    assert r.responses[0][1].error_code == 51
    assert [(x.state, x.producer_id, x.producer_epoch) for x in r.records] == [(PREPARE_ABORT, 7, 32767)]
    assert r.markers == [TxnMarker("tx", "t", 0, 7, 32767, False)]
    fresh = coordinator()                       # the restart: the log read back through the codec
    fresh.replay(TransactionRecord("tx", 7, 32766, 60000, ONGOING, frozenset({("t", 0)}), 50, 40))
    for record in r.records:
        fresh.replay(txn_records.decode(*txn_records.encode(record)))
    assert fresh.loaded(200).markers == r.markers
    assert init(c, now=101).responses[0][1].error_code == 51          # still aborting: retry
    c.markers_written(r.markers, 102)
    r = init(c, now=103)
    assert (r.responses[0][1].error_code, r.responses[0][1].producer_id, r.responses[0][1].producer_epoch) == \
        (0, 5000, 0)
    # a transaction open AT the last epoch (a KIP-360 retry can be answered 32767) is aborted under it
    c = coordinator()
    c.replay(TransactionRecord("tx", 7, 32767, 60000, ONGOING, frozenset({("t", 0)}), 50, 40))
    r = init(c, now=100)
    assert r.responses[0][1].error_code == 51
    assert r.markers == [TxnMarker("tx", "t", 0, 7, 32767, False)]


def test_a_timeout_at_epoch_32766_fences_with_the_last_epoch():
    """Kafka's timeout abort bumps the epoch whenever it can (to 32767 from 32766): the timed-out producer
    is fenced there too; only a transaction already at 32767 is aborted under its own epoch."""
    for epoch, bumped in ((32766, 32767), (32767, 32767)):
        c = coordinator()
        c.replay(TransactionRecord("tx", 7, epoch, 5000, ONGOING, frozenset({("t", 0)}), 50, 40))
        r = c.on_timer(timeout_key("tx"), 5040)
        assert [(x.state, x.producer_id, x.producer_epoch) for x in r.records] == [(PREPARE_ABORT, 7, bumped)]
        assert r.markers == [TxnMarker("tx", "t", 0, 7, bumped, False)]
