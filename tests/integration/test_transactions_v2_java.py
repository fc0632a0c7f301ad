"""Transactions v2 (KIP-890) with Java kafka-clients 4.3: a consume-transform-produce loop with a static consumer
(tests/java/TxnRounds.java) against tenure finalizing `transaction.version` 2 runs transactions v2 - shown by the
versions on the wire (EndTxn v5, TxnOffsetCommit v5, Produce v12, no AddPartitionsToTxn or AddOffsetsToTxn) and
by the epoch bump at every commit (each transaction's markers carry the next epoch, which its successor's
batches use) -, and v1 against tenure finalizing 1; exactly-once output in both."""
from __future__ import annotations

import pytest

from tests.integration.test_transactions import consume_all
from tests.integration.test_transactions_java import committed, seed, transaction_state, transformed
from tests.integration.test_transactions_v2 import versions, versions_on_the_wire
from tests.support.clients import create_topic

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]


def transactional_batches(srv, topic: str) -> list[list[tuple[bool, int, int]]]:
    """Each partition's transactional batches in offset order: (control, producer id, epoch)."""
    from tenure.storage import parse_batches
    out = []
    for log in srv.call(lambda: list(srv.server.topics.get(topic).partitions)):
        batches = parse_batches(srv.call(lambda log=log: log.read(0, 1 << 22)))
        out.append([(b.is_control, b.producer_id, b.producer_epoch) for b in batches if b.is_transactional])
    return out


@pytest.mark.parametrize("tv", [
    pytest.param(2, marks=pytest.mark.tenure(transaction_version=2), id="transaction.version=2"),
    pytest.param(1, marks=pytest.mark.tenure(transaction_version=1), id="transaction.version=1"),
])
def test_java_consume_transform_produce_runs_the_transaction_version_tenure_finalizes(tenure_server, tv):
    from tests.support.java import run_java
    bs = tenure_server.bootstrap
    create_topic(bs, "v2-in", 2)
    create_topic(bs, "v2-out", 2)
    seed(bs, "v2-in", 0, 6)
    with versions_on_the_wire(tenure_server) as seen:
        lines = run_java("TxnRounds", bs, "v2-in", "v2-out", "v2-group", "v2-static", "v2-txn", 3, 2, timeout=150)
    assert lines[-1] == {"type": "done", "rounds": 3, "consumed": 6}, lines
    if tv == 2:
        # v2: EndTxn v5 and TxnOffsetCommit v5 once per transaction; partitions join by Produce v12 and the
        # offsets partition by TxnOffsetCommit: the client never sends AddPartitionsToTxn or AddOffsetsToTxn
        assert (seen[("EndTxn", 5)], seen[("TxnOffsetCommit", 5)]) == (3, 3), seen
        assert versions(seen, "EndTxn") == versions(seen, "TxnOffsetCommit") == {5}, seen
        assert versions(seen, "AddPartitionsToTxn") == versions(seen, "AddOffsetsToTxn") == set(), seen
        assert min(versions(seen, "Produce")) >= 12, seen
    else:
        # v1: the client adds partitions and offsets itself, ends with EndTxn v4 and commits offsets with v4
        assert versions(seen, "EndTxn") == versions(seen, "TxnOffsetCommit") == {4}, seen
        assert seen[("AddOffsetsToTxn", 4)] == 3, seen
        assert versions(seen, "AddPartitionsToTxn") == {3}, seen       # a client's is v3 at most (v4+: brokers')
        assert versions(seen, "Produce") == {11}, seen                   # v12+ is for v2 transactions only
    # the epochs: every transaction's data batches, then its marker. v2: the marker carries the next epoch (the
    # commit bumped it), which the next transaction's batches use; v1: one epoch throughout
    pid = tenure_server.call(lambda: tenure_server.server.txn_runtime.shards[0].transactions["v2-txn"].producer_id)
    epochs = set()
    for batches in transactional_batches(tenure_server, "v2-out") + transactional_batches(tenure_server,
                                                                                            "__consumer_offsets"):
        assert {b[1] for b in batches} <= {pid}, batches
        for (control, _, epoch), (next_control, _, next_epoch) in zip(batches, batches[1:]):
            if not control and next_control:             # a transaction's last batch here, then its marker
                assert next_epoch == (epoch + 1 if tv == 2 else epoch), batches
        epochs |= {(control, epoch) for control, _, epoch in batches}
    if tv == 2:
        assert epochs == {(False, 0), (False, 1), (False, 2), (True, 1), (True, 2), (True, 3)}, epochs
    else:
        assert epochs == {(False, 0), (True, 0)}, epochs
    state = transaction_state(bs, "v2-txn")
    assert (state.state.value, state.producer_id, state.producer_epoch) == ("CompleteCommit", pid, 3 if tv == 2 else 0)
    # exactly once: every input record once in the output, the group's offsets at the end of the input
    assert sorted(consume_all(bs, "v2-out", 2, "read_committed", 6, wait=1.0)) == transformed(6)
    assert committed(bs, "v2-group") == {("v2-in", 0): 3, ("v2-in", 1): 3}


@pytest.mark.parametrize("tv", [
    pytest.param(2, marks=pytest.mark.tenure(transaction_version=2), id="transaction.version=2"),
    pytest.param(1, marks=pytest.mark.tenure(transaction_version=1), id="transaction.version=1"),
])
def test_java_transaction_timed_out_by_the_coordinator(tenure_server, tmp_path, tv):
    """A Java transaction held open past its timeout (the coordinators' clock moved on): the coordinator aborts
    it, fencing the producer (v2: the fencing epoch bumped once more), and the producer's commit fails with
    ProducerFencedException; its output and offsets never count, the next run of the application does."""
    from tests.integration.test_transactions_java import HeldTransaction
    bs = tenure_server.bootstrap
    create_topic(bs, "to-in", 2)
    create_topic(bs, "to-out", 2)
    seed(bs, "to-in", 0, 4)
    args = ["to-in", "to-out", "to-group", "to-static", "to-txn"]
    held = HeldTransaction(tmp_path, bs, *args, "hold", 4)
    try:
        assert held.next_event()["type"] == "sent"
        assert "txn_timeout/to-txn" in tenure_server.advance_clock(61_000)
        held.tell("commit")
        failed = held.next_event()
    finally:
        held.close()
    assert (failed["type"], failed["exception"]) == ("error", "org.apache.kafka.common.errors.ProducerFencedException"), \
        failed
    state = transaction_state(bs, "to-txn")
    assert (state.state.value, state.producer_epoch) == ("CompleteAbort", 2 if tv == 2 else 1)
    assert consume_all(bs, "to-out", 2, "read_committed", 0, wait=0.5) == []
    assert committed(bs, "to-group") == {}
    from tests.support.java import run_java
    [done] = run_java("TxnTransform", bs, *args, "commit", 4, timeout=120)
    assert (done["type"], done["consumed"]) == ("done", 4), done
    assert sorted(consume_all(bs, "to-out", 2, "read_committed", 4, wait=0.5)) == transformed(4)
