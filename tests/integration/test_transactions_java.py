"""Exactly-once consume-transform-produce with Java kafka-clients 4.3 where it can go wrong: a static member
fenced by a second copy of itself cannot commit its offsets in its transaction (KIP-447), and a server
SIGKILLed before or after a transaction's commit comes back with the transaction aborted or committed, as
Kafka's coordinator would leave it (tests/java/TxnFencedMember.java, TxnTransform.java)."""
from __future__ import annotations

import contextlib

import pytest

from tests.integration.test_transactions import consume_all
from tests.support.clients import create_topic
from tests.support.groupwire import fetch_all
from tests.support.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]

FENCED_INSTANCE_ID = "org.apache.kafka.common.errors.FencedInstanceIdException"


def seed(bs: str, topic: str, first: int, last: int, partitions: int = 2) -> None:
    """Values v<first>..v<last-1> (keys k<i>) into `topic`, record i into partition i % partitions."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bs})
    for i in range(first, last):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions)
    assert p.flush(10) == 0


def transformed(n: int) -> list[bytes]:
    """What TxnTransform writes for the seeded v0..v<n-1>: their values upper-cased, sorted."""
    return sorted(f"V{i}".encode() for i in range(n))


def committed(bs: str, group: str) -> dict[tuple[str, int], int]:
    with WireClient.to(bs) as w:
        return fetch_all(w, [group])[group]


def test_java_fenced_static_member_cannot_commit_offsets_in_its_transaction(tenure_server):
    """Two copies of a consume-transform-produce application with one group.instance.id: the second one's
    join fences the first (FENCED_INSTANCE_ID, 82, on the first one's TxnOffsetCommit, which Java raises
    from sendOffsetsToTransaction as FencedInstanceIdException, an abortable error). The first one's
    transaction is aborted: none of its output is seen and its offsets are not committed; the second one's
    output and offsets are."""
    from tests.support.java import run_java
    bs = tenure_server.bootstrap
    create_topic(bs, "fz-in", 2)
    create_topic(bs, "fz-out", 2)
    seed(bs, "fz-in", 0, 6)
    fenced, done = run_java("TxnFencedMember", bs, "fz-in", "fz-out", "fz-group", "fz-static", 6, timeout=150)
    assert fenced["type"] == "fenced", fenced
    assert (fenced["send_offsets"], fenced["abort"]) == (FENCED_INSTANCE_ID, "ok"), fenced
    # after an abortable error the transaction can only be aborted: Java refuses the commit itself
    assert fenced["commit"] == f"org.apache.kafka.common.KafkaException caused by {FENCED_INSTANCE_ID}", fenced
    # no rebalance: B took A's place in A's generation, so only the identity check can refuse A
    assert fenced["a_member"] == fenced["a_joined_member"] != fenced["b_member"], fenced
    assert fenced["a_generation"] == fenced["b_generation"], fenced
    assert done == {"type": "done", "b_offsets": {"fz-in-0": 3, "fz-in-1": 3}}
    assert committed(bs, "fz-group") == {("fz-in", 0): 3, ("fz-in", 1): 3}
    out = consume_all(bs, "fz-out", 2, "read_committed", 6, wait=1.0)
    assert sorted(out) == sorted(f"B:v{i}".encode() for i in range(6))
    # A's records did reach the log, in its aborted transaction
    everything = consume_all(bs, "fz-out", 2, "read_uncommitted", 12, wait=0.5)
    assert sorted(everything) == sorted([f"A:v{i}".encode() for i in range(6)] + out)
    assert tenure_server.group("fz-group").static_members == {"fz-static": fenced["b_member"]}


# ------------------------------------------------------------------------------------------------ kill -9
class HeldTransaction:
    """A TxnTransform JVM in `hold` mode: it consumes, sends its output and its offsets in one transaction,
    prints {"type":"sent"} and keeps the transaction open until told to commit or abort (or killed)."""

    def __init__(self, tmp_path, *args) -> None:
        import queue
        import subprocess
        import threading

        from tests.support.java import _tool, compile_java
        self._err = open(tmp_path / "held-java.stderr", "w+")
        self.proc = subprocess.Popen([_tool("java"), "-cp", compile_java(), "TxnTransform", *map(str, args)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, text=True,
                                     bufsize=1)
        self._lines: queue.Queue = queue.Queue()

        def read() -> None:
            for line in self.proc.stdout:
                self._lines.put(line.strip())
            self._lines.put(None)
        threading.Thread(target=read, name="held-java", daemon=True).start()

    def next_event(self, timeout: float = 90) -> dict:
        import json
        import queue
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"no output from the Java program in {timeout}s; stderr:\n{self.stderr()}") from None
            if line is None:
                raise AssertionError(f"the Java program exited {self.proc.wait(10)}; stderr:\n{self.stderr()}")
            if line.startswith("{"):
                return json.loads(line)

    def tell(self, word: str) -> None:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()[-4000:]

    def close(self) -> None:
        self.kill()
        self._err.close()


def kill_mid_transaction(srv, tmp_path, args: list[str], count: int) -> None:
    """TxnTransform `args` holds a transaction open with `count` records' output and their offsets sent;
    then the server is SIGKILLed, and the application with it."""
    held = HeldTransaction(tmp_path, srv.bootstrap, *args, "hold", count)
    try:
        sent = held.next_event()
        assert (sent["type"], sent["consumed"]) == ("sent", count), sent
        srv.kill()
    finally:
        held.close()


def transaction_state(bs: str, tid: str):
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        return admin.describe_transactions([tid])[tid]
    finally:
        admin.close()


@contextlib.contextmanager
def server_process(tmp_path, prefix: str, transaction_version: int = 2):
    """`tenure serve` on a data dir in its own process (to be SIGKILLed), with topics <prefix>-in and
    <prefix>-out of 2 partitions, finalizing `transaction_version` (2: Java runs transactions v2)."""
    from tests.support.procs import TenureProcess
    with TenureProcess(tmp_path / "data", fsync="batch",
                       extra=("--transaction-version", str(transaction_version))) as srv:
        srv.start()
        for topic in ("in", "out"):
            create_topic(srv.bootstrap, f"{prefix}-{topic}", 2)
        yield srv


def advance_clock(srv, ms: int) -> list[str]:
    """POST /clock/advance to the server process's admin endpoint: the timers that fired."""
    import json
    import urllib.request
    req = urllib.request.Request(srv.admin_url + "/clock/advance", data=json.dumps({"ms": ms}).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())["fired"]


# Java 4.3 runs transactions v2 against a server finalizing transaction.version 2 (tenure's default), v1 against 1
TRANSACTION_VERSIONS = pytest.mark.parametrize("tv", [2, 1], ids=["transaction.version=2", "transaction.version=1"])


@TRANSACTION_VERSIONS
def test_java_sigkill_before_and_after_commit(tmp_path, tv):
    """A consume-transform-produce loop (static consumer, sendOffsetsToTransaction) and a server SIGKILLed
    (b) after commitTransaction returned: its output and offsets are all there after the restart; (a) with
    a transaction open, its output and offsets sent: after the restart the transaction is still open, none
    of it is seen by read_committed consumers and the group's committed offsets are the old ones; the
    application restarted with the same transactional id fences it (InitProducerId aborts it), resumes from
    the old offsets and commits: every record is in the output exactly once. Once more with nobody coming
    back: the transaction's timeout aborts it after the restart, its offsets with it. Under transactions v2 the
    commit bumped the epoch, and the open transaction found after the restart is the v2 one it was."""
    from tests.integration.test_transactions import stable_fetch
    from tests.support.java import run_java
    UNSTABLE_OFFSET_COMMIT = 88
    args = ["ktx-in", "ktx-out", "ktx-group", "ktx-static", "ktx-txn"]
    with server_process(tmp_path, "ktx", tv) as srv:
        bs = srv.bootstrap
        # (b) committed, then killed
        seed(bs, "ktx-in", 0, 6)
        [done] = run_java("TxnTransform", bs, *args, "commit", 6, timeout=120)
        assert (done["type"], done["consumed"]) == ("done", 6), done
        srv.kill()
        srv.start()
        bs = srv.bootstrap
        first = transformed(6)
        # InitProducerId gave epoch 0; a v2 commit bumped it
        assert transaction_state(bs, "ktx-txn").producer_epoch == (1 if tv == 2 else 0)
        assert committed(bs, "ktx-group") == {("ktx-in", 0): 3, ("ktx-in", 1): 3}
        assert sorted(consume_all(bs, "ktx-out", 2, "read_committed", 6, wait=0.5)) == first

        # (a) open, with its output and offsets sent, then killed (the application with it)
        seed(bs, "ktx-in", 6, 10)
        kill_mid_transaction(srv, tmp_path, args, 4)
        # in the dead server's log: the open transaction, a v2 one (its partitions added by Produce and
        # TxnOffsetCommit) or a v1 one, in TransactionLogValue v1 (transaction.version 1 and up)
        record = last_record(srv.data_dir, "ktx-txn")
        assert (record.state, record.client_version, record.value_version) == (1, 2 if tv == 2 else 0, 1), record
        srv.start()
        bs = srv.bootstrap
        state = transaction_state(bs, "ktx-txn")
        assert state.state.value == "Ongoing", state
        assert state.producer_epoch == (2 if tv == 2 else 1), state        # the new application's InitProducerId
        assert {tp.topic for tp in state.topic_partitions} == {"ktx-out", "__consumer_offsets"}, state
        assert sorted(consume_all(bs, "ktx-out", 2, "read_committed", 6, wait=1.0)) == first
        assert len(consume_all(bs, "ktx-out", 2, "read_uncommitted", 10, wait=0.5)) == 10   # it is in the log
        assert committed(bs, "ktx-group") == {("ktx-in", 0): 3, ("ktx-in", 1): 3}
        with WireClient.to(bs) as w:
            assert stable_fetch(w, "ktx-group", "ktx-in", [0, 1]) == {0: (UNSTABLE_OFFSET_COMMIT, -1),
                                                                     1: (UNSTABLE_OFFSET_COMMIT, -1)}
        # the application comes back: its InitProducerId aborts the open transaction, it resumes from 3/3
        [again] = run_java("TxnTransform", bs, *args, "commit", 4, timeout=120)
        assert (again["type"], again["consumed"]) == ("done", 4), again
        assert transaction_state(bs, "ktx-txn").state.value == "CompleteCommit"
        assert committed(bs, "ktx-group") == {("ktx-in", 0): 5, ("ktx-in", 1): 5}
        out = consume_all(bs, "ktx-out", 2, "read_committed", 10, wait=1.0)
        assert sorted(out) == transformed(10)

        # (a) again, and nobody comes back: the transaction's timeout (Java's default 60 s, on the
        # coordinator's clock, moved past it) aborts it, and its offsets are dropped with it
        seed(bs, "ktx-in", 10, 12)
        kill_mid_transaction(srv, tmp_path, args, 2)
        srv.start()
        bs = srv.bootstrap
        assert transaction_state(bs, "ktx-txn").state.value == "Ongoing"
        assert "txn_timeout/ktx-txn" in advance_clock(srv, 61_000)
        assert transaction_state(bs, "ktx-txn").state.value == "CompleteAbort"
        with WireClient.to(bs) as w:
            assert stable_fetch(w, "ktx-group", "ktx-in", [0, 1]) == {0: (0, 5), 1: (0, 5)}
        assert sorted(consume_all(bs, "ktx-out", 2, "read_committed", 10, wait=1.0)) == sorted(out)


def last_record(data_dir, tid: str):
    """The last __transaction_state record of `tid` in a stopped server's data dir, decoded."""
    from kafka.record.default_records import DefaultRecordBatch

    from tenure.protocol import txn_records
    from tenure.protocol.internal_topics import TRANSACTION_TOPIC
    from tenure.storage.segments import LogConfig, SegmentLog
    log = SegmentLog(data_dir / f"{TRANSACTION_TOPIC}-0", LogConfig())
    try:
        states = [txn_records.decode(r.key, r.value) for _, raw in log.batches(0) for r in DefaultRecordBatch(raw)]
    finally:
        log.close()
    return [s for s in states if s.transactional_id == tid][-1]


def prepare_commit_offline(data_dir, tid: str) -> int:
    """Append what EndTxn(commit) writes first - the transactional id's PrepareCommit record - to the dead
    server's __transaction_state log with the project's codec and its one coordinator writer: the server as
    if SIGKILLed between that record and the commit markers (a window a client cannot aim at). A v2
    transaction is prepared under the next epoch, as EndTxn v5 prepares it. The epoch it is prepared under."""
    import dataclasses
    from types import SimpleNamespace

    from kafka.record.default_records import DefaultRecordBatch

    from tenure.coordinator.writer import CoordinatorWriter
    from tenure.protocol import txn_records
    from tenure.protocol.internal_topics import TRANSACTION_TOPIC
    from tenure.storage.segments import LogConfig, SegmentLog
    log = SegmentLog(data_dir / f"{TRANSACTION_TOPIC}-0", LogConfig())
    try:
        states = [txn_records.decode(r.key, r.value) for _, raw in log.batches(0) for r in DefaultRecordBatch(raw)]
        [last] = [s for s in states if s.transactional_id == tid][-1:]
        assert last.state == txn_records.ONGOING, last
        writer = CoordinatorWriter(SimpleNamespace(name=TRANSACTION_TOPIC, partitions=[log]),
                                   lambda: last.last_update_ms + 1, codec=txn_records)
        epoch = last.producer_epoch + 1 if last.client_version >= 2 else last.producer_epoch
        writer.write([dataclasses.replace(last, state=txn_records.PREPARE_COMMIT, producer_epoch=epoch)])
    finally:
        log.close()
    return epoch


@TRANSACTION_VERSIONS
def test_java_transaction_completes_across_a_sigkill(tmp_path, tv):
    """The transaction is decided, not lost: (c) the server is SIGKILLed while a live producer's
    transaction is open with its output and offsets sent; the producer commits once the server is back (on
    its port), and everything of it is committed; (p) the server dies right after writing PrepareCommit
    (appended by the project's codec to the dead server's log): at start-up it writes the markers - into
    the output partitions and the group's __consumer_offsets partition - and completes the commit, as
    Kafka's coordinator completes a prepared transaction it loads."""
    args = ["ptx-in", "ptx-out", "ptx-group", "ptx-static", "ptx-txn"]
    with server_process(tmp_path, "ptx", tv) as srv:
        bs = srv.bootstrap
        # (c) the producer outlives the server's crash and commits after its restart
        seed(bs, "ptx-in", 0, 4)
        held = HeldTransaction(tmp_path, bs, *args, "hold", 4)
        try:
            assert held.next_event()["type"] == "sent"
            srv.kill()
            srv.start(port=srv.port)
            held.tell("commit")
            done = held.next_event()
            assert (done["type"], done["mode"], done["consumed"]) == ("done", "commit", 4), done
        finally:
            held.close()
        assert committed(bs, "ptx-group") == {("ptx-in", 0): 2, ("ptx-in", 1): 2}
        assert sorted(consume_all(bs, "ptx-out", 2, "read_committed", 4, wait=1.0)) == transformed(4)
        # the commit after the restart ended the recovered transaction as its version ends one
        assert transaction_state(bs, "ptx-txn").producer_epoch == (1 if tv == 2 else 0)
        # (p) a PrepareCommit in the log, no marker written: the restart completes the commit
        seed(bs, "ptx-in", 4, 8)
        kill_mid_transaction(srv, tmp_path, args, 4)
        epoch = prepare_commit_offline(srv.data_dir, "ptx-txn")
        srv.start()
        bs = srv.bootstrap
        state = transaction_state(bs, "ptx-txn")
        assert (state.state.value, state.producer_epoch) == ("CompleteCommit", epoch)
        assert committed(bs, "ptx-group") == {("ptx-in", 0): 4, ("ptx-in", 1): 4}
        assert sorted(consume_all(bs, "ptx-out", 2, "read_committed", 8, wait=1.0)) == transformed(8)
