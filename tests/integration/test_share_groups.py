"""Share groups (KIP-932) with confluent-kafka 2.16's ShareConsumer (librdkafka's share consumer): more
consumers than partitions all receive and every record is accepted once (implicit mode); a released record
comes back with a higher delivery count and a rejected one never does (explicit mode); a record released at
every delivery is archived at the delivery limit; a consumer holding records that stops acknowledging loses
them when the locks expire - the clock advanced through the control, never slept - and another consumer gets
them with delivery count 2; a share group and a consumer group read one topic side by side. The share
partition's state is read back through the test control (`share_partition`). The Java KafkaShareConsumer does
the same in test_share_groups_java.py."""
from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from tenure.config import ServerConfig
from tenure.server import ServerThread

pytestmark = pytest.mark.timeout(120)

ACCEPT, RELEASE, REJECT = 1, 2, 3       # confluent_kafka.AcknowledgeType's values (Kafka's acknowledge types)


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, share_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)) as s:
        yield s


def setup(st: ServerThread, topic: str, group: str, partitions: int = 1, reset: str = "earliest") -> None:
    """The topic, and the group's share.auto.offset.reset through IncrementalAlterConfigs on the GROUP resource."""
    admin = AdminClient({"bootstrap.servers": st.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", reset, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)


def produce(st: ServerThread, topic: str, values, partition: int = 0, linger_ms: int = 0) -> None:
    """`linger_ms` > 0: the values go in one batch (a consumer's fetch acquires them together)."""
    p = Producer({"bootstrap.servers": st.bootstrap, "linger.ms": linger_ms})
    for v in values:
        p.produce(topic, value=str(v).encode(), partition=partition)
    assert p.flush(10) == 0


class Sharer:
    """One ShareConsumer polling on its own thread. `decide(message)` gives the acknowledge type of each record
    (explicit mode); None: implicit mode. Every record is kept as (partition, offset, delivery count, value)."""

    def __init__(self, st: ServerThread, group: str, topic: str, name: str,
                 decide: Callable | None = None, stop_after: int | None = None, commit_at_stop: bool = False) -> None:
        """`stop_after`: once it has that many records it polls no more and holds them, its acknowledgements
        sent first if `commit_at_stop` (commit_sync), else never (a consumer that died)."""
        conf = {"bootstrap.servers": st.bootstrap, "group.id": group, "client.id": name}
        if decide is not None:
            conf["share.acknowledgement.mode"] = "explicit"
        self.consumer = ShareConsumer(conf)
        self.consumer.subscribe([topic])
        self.decide, self.stop_after, self.commit_at_stop = decide, stop_after, commit_at_stop
        self.committed = threading.Event()
        self.records: list[tuple[int, int, int, str]] = []
        self.errors: list = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"share-{name}")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.stop_after is not None and len(self.records) >= self.stop_after:
                if self.commit_at_stop and not self.committed.is_set():
                    self.consumer.commit_sync()
                    self.committed.set()
                time.sleep(0.05)          # holds what it has: no poll (and, unless committed, no acknowledgement)
                continue
            for m in self.consumer.poll(0.2):
                if m.error():
                    self.errors.append(m.error())
                    continue
                with self._lock:
                    self.records.append((m.partition(), m.offset(), m.delivery_count(), m.value().decode()))
                if self.decide is not None:
                    self.consumer.acknowledge(m, self.decide(m))
            if self.decide is not None and (self.stop_after is None or len(self.records) < self.stop_after):
                self.consumer.commit_async()

    def got(self) -> list[tuple[int, int, int, str]]:
        with self._lock:
            return list(self.records)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def wait_for(cond, timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def done(st: ServerThread, group: str, topic: str, end: int) -> bool:
    """Every record of the share partition below `end` acknowledged or archived: its start is there."""
    view = st.share_partition(group, topic, 0)
    return view is not None and view["start_offset"] >= end and not view["records"]


def test_more_consumers_than_partitions_all_receive_each_record_accepted_once(server):
    st, topic, group = server, "sq", "sq-g"
    setup(st, topic, group)
    sharers = [Sharer(st, group, topic, f"c{i}") for i in range(4)]
    try:
        wait_for(lambda: (v := st.share_partition(group, topic, 0)) is not None and len(v["fetching"]) == 4,
                 what="four members fetching")
        total = 0
        for _ in range(80):                # in rounds, so every consumer's fetch finds records to acquire
            produce(st, topic, range(total, total + 5))
            total += 5
            time.sleep(0.03)
        wait_for(lambda: sum(len(s.got()) for s in sharers) >= total, what="every record delivered")
        wait_for(lambda: done(st, group, topic, total), what="every record acknowledged")
    finally:
        for s in sharers:
            s.close()
    offsets = [r[1] for s in sharers for r in s.got()]
    assert sorted(offsets) == list(range(total))          # each delivered once, accepted (never redelivered)
    assert all(r[2] == 1 for s in sharers for r in s.got())
    assert all(s.got() for s in sharers), [len(s.got()) for s in sharers]      # every consumer received
    assert not any(s.errors for s in sharers)
    v = st.group(group)
    assert v is None or v.kind == "share"


def test_release_redelivers_with_a_higher_count_and_reject_never_returns(server):
    st, topic, group = server, "rr", "rr-g"
    setup(st, topic, group)
    seen: dict[int, int] = {}

    def decide(m) -> int:
        seen[m.offset()] = seen.get(m.offset(), 0) + 1
        if m.offset() == 0 and m.delivery_count() < 3:
            return RELEASE
        return REJECT if m.offset() == 1 else ACCEPT
    produce(st, topic, ["a", "b", "c"])
    s = Sharer(st, group, topic, "x", decide)
    try:
        wait_for(lambda: done(st, group, topic, 3), what="every record done")
        time.sleep(0.5)                    # nothing comes back after that
    finally:
        s.close()
    got = s.got()
    assert [(o, n) for _, o, n, _ in got if o == 0] == [(0, 1), (0, 2), (0, 3)]
    assert [(o, n) for _, o, n, _ in got if o == 1] == [(1, 1)]
    assert [(o, n) for _, o, n, _ in got if o == 2] == [(2, 1)]


def test_a_record_released_every_time_is_archived_at_the_delivery_limit(server):
    st, topic, group = server, "poison", "poison-g"
    setup(st, topic, group)
    produce(st, topic, ["poison", "fine"])
    s = Sharer(st, group, topic, "x", lambda m: RELEASE if m.offset() == 0 else ACCEPT)
    try:
        wait_for(lambda: done(st, group, topic, 2), what="the poison record archived")
        time.sleep(0.5)
    finally:
        s.close()
    assert [n for _, o, n, _ in s.got() if o == 0] == [1, 2, 3, 4, 5]       # Kafka's default limit: 5
    assert [n for _, o, n, _ in s.got() if o == 1] == [1]


def test_held_records_go_to_another_consumer_when_the_locks_expire(server):
    st, topic, group = server, "lock", "lock-g"
    setup(st, topic, group)
    produce(st, topic, range(5))
    holder = Sharer(st, group, topic, "holder", lambda m: ACCEPT, stop_after=1)
    try:
        wait_for(lambda: holder.got(), what="the holder's records")

        def acquired() -> list[int]:
            return [r["offset"] for r in st.share_partition(group, topic, 0)["records"] if r["state"] == "acquired"]
        # the holder's thread takes a polled batch's records one at a time: wait for the batch's last one
        wait_for(lambda: [r[1] for r in holder.got()] == acquired(), what="the holder's records to be the acquired")
        view = st.share_partition(group, topic, 0)
        held = [r["offset"] for r in view["records"] if r["state"] == "acquired"]
        assert held and held == [r[1] for r in holder.got()] and all(r["delivery_count"] == 1 for r in view["records"]
                                                                     if r["state"] == "acquired")
        other = Sharer(st, group, topic, "other", lambda m: ACCEPT)
        try:
            time.sleep(1.0)
            assert other.got() == []                       # held: nobody else gets them
            st.advance_clock(30_001)                       # share.record.lock.duration.ms (30 s) passes
            wait_for(lambda: len(other.got()) == len(held), what="the expired records redelivered")
            assert [(o, n) for _, o, n, _ in other.got()] == [(o, 2) for o in held]
            wait_for(lambda: done(st, group, topic, 5), what="every record accepted")
        finally:
            other.close()
    finally:
        holder.close()


def test_a_share_group_and_a_consumer_group_read_one_topic_side_by_side(server):
    st, topic = server, "both"
    setup(st, topic, "both-share")
    produce(st, topic, range(20))
    s = Sharer(st, "both-share", topic, "s")
    c = Consumer({"bootstrap.servers": st.bootstrap, "group.id": "both-consumer", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    read = []
    try:
        deadline = time.monotonic() + 30
        while len(read) < 20 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                read.append(m.offset())
        wait_for(lambda: done(st, "both-share", topic, 20), what="the share group done")
    finally:
        c.close()
        s.close()
    assert sorted(read) == list(range(20))
    assert sorted(r[1] for r in s.got()) == list(range(20))
    assert {st.group("both-share").kind, st.group("both-consumer").kind} == {"share", "consumer"}


def test_the_group_survives_a_restart_on_its_data_dir(tmp_path):
    """The group is Kafka's records in __consumer_offsets: a restart replays it (members, epochs, assignment),
    the member heartbeats on and reads what is produced after."""
    cfg = ServerConfig(port=0, data_dir=str(tmp_path), share_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as st:
        setup(st, "rs", "rs-g", reset="latest")
        s = Sharer(st, "rs-g", "rs", "x")
        try:
            wait_for(lambda: (v := st.share_partition("rs-g", "rs", 0)) is not None and v["fetching"],
                     what="the member fetching")
            before = st.group("rs-g")
            st.restart()
            after = st.group("rs-g")
            assert (after.kind, after.state, after.generation) == ("share", "Stable", before.generation)
            assert [(m.member_id, m.member_epoch, m.assignment) for m in after.members] == \
                [(m.member_id, m.member_epoch, m.assignment) for m in before.members]
            wait_for(lambda: st.share_partition("rs-g", "rs", 0) is not None, what="fetching again")
            produce(st, "rs", ["after"])
            wait_for(lambda: any(r[3] == "after" for r in s.got()), what="the record produced after the restart")
            assert st.group("rs-g").generation == before.generation       # the same member, no new epoch
        finally:
            s.close()


@pytest.mark.parametrize("surface", ["http", "cli"])
def test_the_share_controls_through_the_admin_endpoint_and_the_cli(surface):
    """share_partition and expire_share_locks out of process: GET/POST on the admin endpoint and `tenure groups
    share-partition` / `tenure fault expire-share-locks`, on a record a consumer holds."""
    import contextlib
    import io
    import json

    from tenure.tools.cli import main
    from tests.integration.test_admin_guard import call

    def run(*args: str):
        if surface == "http":
            path, method = (f"/groups/{args[1]}/share-partitions/{args[2]}/{args[3]}", "GET") \
                if args[0] == "share-partition" else (f"/groups/{args[1]}/share-locks/expire", "POST")
            status, body = call(st.admin_port, method, path, headers={"Content-Type": "application/json"})
            assert status == 200, (status, body)
            return body
        out, err = io.StringIO(), io.StringIO()
        cmd = ["groups", *args] if args[0] == "share-partition" else ["fault", *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert main([*cmd, "--admin", st.server.admin_address]) == 0, err.getvalue()
        return json.loads(out.getvalue())

    with ServerThread(ServerConfig(port=0, admin_port=0, share_heartbeat_interval_ms=200,
                                   initial_rebalance_delay_ms=0)) as st:
        setup(st, "ctl", "ctl-g")
        produce(st, "ctl", ["x"])
        s = Sharer(st, "ctl-g", "ctl", "h", lambda m: ACCEPT, stop_after=1)
        try:
            wait_for(lambda: s.got(), what="the record held")
            view = run("share-partition", "ctl-g", "ctl", "0")
            assert [(r["offset"], r["state"], r["delivery_count"]) for r in view["records"]] == [(0, "acquired", 1)]
            assert run("expire-share-locks", "ctl-g") == {"group": "ctl-g", "released": 1}
            assert run("share-partition", "ctl-g", "ctl", "0")["records"][0]["state"] == "available"
        finally:
            s.close()
        if surface == "http":
            status, body = call(st.admin_port, "GET", "/groups/nope/share-partitions/ctl/0")
            assert status == 404, (status, body)


def test_share_partition_state_survives_a_restart_and_held_records_come_back(tmp_path):
    """The share partitions' state is the share coordinator's records in __share_group_state: after a restart
    on the data dir every record keeps its state and delivery count, and records acquired at the restart are
    available again (their delivery counted)."""
    cfg = ServerConfig(port=0, data_dir=str(tmp_path), share_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as st:
        setup(st, "ps", "ps-g")
        produce(st, "ps", ["again", "a", "b", "c"], linger_ms=200)      # one batch: one fetch takes all four
        a = Sharer(st, "ps-g", "ps", "a", lambda m: RELEASE if m.offset() == 0 else ACCEPT, stop_after=4,
                   commit_at_stop=True)
        try:
            wait_for(a.committed.is_set, what="the four records acknowledged")
        finally:
            a.close()
        try:
            wait_for(lambda: [(r["state"], r["delivery_count"]) for r in st.share_partition("ps-g", "ps", 0)["records"]]
                     == [("available", 1)] + [("acknowledged", 1)] * 3, what="offset 0 released, 1-3 accepted")
        except AssertionError:
            raise AssertionError((st.share_partition("ps-g", "ps", 0), a.got())) from None
        produce(st, "ps", ["held-1", "held-2"], linger_ms=200)
        holder = Sharer(st, "ps-g", "ps", "h", lambda m: ACCEPT, stop_after=1)
        try:
            wait_for(lambda: holder.got(), what="the holder's records")
            assert [(r[1], r[2]) for r in holder.got()] == [(0, 2), (4, 1), (5, 1)], holder.got()
            before = {r["offset"]: (r["state"], r["delivery_count"]) for r in
                      st.share_partition("ps-g", "ps", 0)["records"]}
            st.restart()
            view = st.share_partition("ps-g", "ps", 0)
            assert view is not None and view["start_offset"] == 0
            after = {r["offset"]: (r["state"], r["delivery_count"]) for r in view["records"]}
            assert after == {o: ("available" if s == "acquired" else s, n) for o, (s, n) in before.items()}
        finally:
            holder.close()
        b = Sharer(st, "ps-g", "ps", "b", lambda m: ACCEPT)
        try:
            wait_for(lambda: done(st, "ps-g", "ps", 6), what="every record accepted after the restart")
        finally:
            b.close()
        assert before == {0: ("acquired", 2), 1: ("acknowledged", 1), 2: ("acknowledged", 1),
                          3: ("acknowledged", 1), 4: ("acquired", 1), 5: ("acquired", 1)}
        assert sorted((o, n) for _, o, n, _ in b.got()) == [(0, 3), (4, 2), (5, 2)]


def test_a_coordinator_move_in_a_three_broker_cluster_loses_no_record_state():
    """Three brokers: the share group's coordinator moves to another broker while two consumers read; the group
    is loaded there from its records, the members heartbeat on, and every record is still accepted exactly
    once."""
    with ServerThread(ServerConfig(port=0, brokers=3, share_heartbeat_interval_ms=200,
                                   initial_rebalance_delay_ms=0)) as st:
        setup(st, "mv", "mv-g")
        sharers = [Sharer(st, "mv-g", "mv", f"c{i}") for i in range(2)]
        try:
            wait_for(lambda: (v := st.share_partition("mv-g", "mv", 0)) is not None and len(v["fetching"]) == 2,
                     what="two members fetching")
            produce(st, "mv", range(0, 50))
            wait_for(lambda: sum(len(s.got()) for s in sharers) >= 50, what="the first 50")
            before = st.group("mv-g")
            start = st.coordinator_of("mv-g")
            st.move_coordinator("mv-g", (start + 1) % 3)
            assert st.coordinator_of("mv-g") == (start + 1) % 3
            produce(st, "mv", range(50, 100))
            wait_for(lambda: done(st, "mv-g", "mv", 100), what="every record accepted")
            after = st.group("mv-g")
            assert {m.member_id for m in after.members} == {m.member_id for m in before.members}
        finally:
            for s in sharers:
                s.close()
    assert sorted(r[1] for s in sharers for r in s.got()) == list(range(100))
    assert all(r[2] == 1 for s in sharers for r in s.got())


def test_fault_rules_on_the_share_apis(server):
    """Fault injection names the new APIs like any other: ShareFetch answered with a top-level error twice and a
    ShareGroupHeartbeat closed once; the consumer retries and every record is accepted once."""
    st = server
    setup(st, "flt", "flt-g")
    produce(st, "flt", range(10))
    fetch_rule = st.faults.fail("ShareFetch", "UNKNOWN_SERVER_ERROR", count=2)
    hb_rule = st.faults.close("ShareGroupHeartbeat", count=1)
    s = Sharer(st, "flt-g", "flt", "x")
    try:
        wait_for(lambda: done(st, "flt-g", "flt", 10), what="every record accepted")
    finally:
        s.close()
    assert st.faults.rules() == [] and (fetch_rule.applied, hb_rule.applied) == (2, 1)
    assert sorted(r[1] for r in s.got()) == list(range(10))


def test_read_committed_share_group_never_gets_aborted_records(server):
    """A share group whose share.isolation.level is read_committed (IncrementalAlterConfigs on the GROUP
    resource): a transactional producer's aborted records are never delivered, its committed ones are."""
    st = server
    setup(st, "rc", "rc-g")
    admin = AdminClient({"bootstrap.servers": st.bootstrap})
    res = ConfigResource(ResourceType.GROUP, "rc-g", incremental_configs=[
        ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)
    p = Producer({"bootstrap.servers": st.bootstrap, "transactional.id": "rc-tx"})
    p.init_transactions(10)
    for commit, values in ((False, ["aborted-1", "aborted-2"]), (True, ["committed-1", "committed-2"])):
        p.begin_transaction()
        for v in values:
            p.produce("rc", value=v.encode(), partition=0)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(10)
    produce(st, "rc", ["plain"])
    s = Sharer(st, "rc-g", "rc", "x")
    try:
        wait_for(lambda: len(s.got()) >= 3, what="the committed records")
        end = st.share_partition("rc-g", "rc", 0)["end_offset"]
        wait_for(lambda: done(st, "rc-g", "rc", end), what="every record done")
        time.sleep(0.3)
    finally:
        s.close()
    assert [r[3] for r in s.got()] == ["committed-1", "committed-2", "plain"]


def test_deleting_a_share_group_deletes_its_share_partitions(tmp_path):
    """DeleteGroups of an empty share group: its records tombstoned in __consumer_offsets and its share
    partitions' state in __share_group_state; a new group of that id starts afresh, after a restart too."""
    cfg = ServerConfig(port=0, data_dir=str(tmp_path), share_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as st:
        setup(st, "del", "del-g")
        produce(st, "del", range(3))
        s = Sharer(st, "del-g", "del", "x")
        try:
            wait_for(lambda: done(st, "del-g", "del", 3), what="every record accepted")
        finally:
            s.close()
        wait_for(lambda: st.group("del-g").state == "Empty", what="the group empty")
        admin = AdminClient({"bootstrap.servers": st.bootstrap})
        admin.delete_consumer_groups(["del-g"])["del-g"].result(10)
        assert st.group("del-g") is None
        wait_for(lambda: st.share_partition("del-g", "del", 0) is None, what="the share partition gone")
        st.restart()
        assert st.group("del-g") is None and st.share_partition("del-g", "del", 0) is None


def test_bad_share_requests_on_the_wire_get_kafkas_errors_and_the_server_serves_on(server):
    """Over a socket: a ShareFetch naming a consumer group (served as Kafka's broker serves it: a share partition
    of that group id, the consumer group untouched), a stale share session epoch, overlapping and not-acquired
    acknowledgements, a ShareAcknowledge opening a session - each answered with its error, nothing changed, and
    the server (and the connection) serve on."""
    from confluent_kafka import Consumer as PlainConsumer

    from tenure.protocol.share_group import ShareAcknowledgeRequest, ShareFetchRequest
    from tests.support.wire import WireClient, metadata_request

    st = server
    setup(st, "w", "w-g")
    produce(st, "w", range(3))
    tid = st.call(lambda: st.server.broker.topics.get("w").topic_id)
    c = PlainConsumer({"bootstrap.servers": st.bootstrap, "group.id": "w-consumer", "group.protocol": "consumer"})
    c.subscribe(["w"])
    c.poll(0.5)
    wait_for(lambda: st.group("w-consumer") is not None, what="the consumer group")
    F, A = ShareFetchRequest.FetchTopic, ShareAcknowledgeRequest.AcknowledgeTopic

    def fetch(group, member, epoch, acks=()):
        P = F.FetchPartition
        return ShareFetchRequest(
            group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
            max_bytes=1 << 20, max_records=100, batch_size=100, share_acquire_mode=0, is_renew_ack=False,
            topics=[F(topic_id=tid, partitions=[P(partition_index=0, acknowledgement_batches=[
                P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t]) for f, last, t in acks])])],
            forgotten_topics_data=[])

    def ack(member, epoch, acks):
        P = A.AcknowledgePartition
        return ShareAcknowledgeRequest(group_id="w-g", member_id=member, share_session_epoch=epoch, is_renew_ack=False,
                                       topics=[A(topic_id=tid, partitions=[P(partition_index=0, acknowledgement_batches=[
                                           P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
                                           for f, last, t in acks])])])
    try:
        with WireClient.to(st.bootstrap) as w:
            # a consumer group's id: Kafka's broker does not ask the group's kind - a share partition of that id,
            # from share.auto.offset.reset (latest here: nothing yet), the consumer group left as it was
            r = w.call(fetch("w-consumer", "m", 0), 2)
            assert r.error_code == 0 and all(not p.acquired_records for t in r.responses for p in t.partitions)
            assert st.group("w-consumer").kind == "consumer"
            assert st.share_partition("w-consumer", "w", 0)["start_offset"] == 3
            assert w.call(fetch("w-consumer", "m", -1), 2).error_code == 0     # its session closed
            r = w.call(fetch("w-g", "m", 0), 2)
            assert r.error_code == 0 and [(a.first_offset, a.last_offset, a.delivery_count)
                                          for a in r.responses[0].partitions[0].acquired_records] == [(0, 2, 1)]
            assert w.call(fetch("w-g", "m", 7), 2).error_code == 123             # INVALID_SHARE_SESSION_EPOCH
            assert w.call(fetch("w-g", "other", 3), 2).error_code == 122         # SHARE_SESSION_NOT_FOUND
            assert w.call(ack("m", 0, [(0, 0, ACCEPT)]), 2).error_code == 123     # an ack cannot open a session
            p = w.call(ack("m", 1, [(0, 1, ACCEPT), (1, 2, ACCEPT)]), 2).responses[0].partitions[0]
            assert p.error_code == 42                                             # overlapping batches
            p = w.call(ack("m", 2, [(0, 9, ACCEPT)]), 2).responses[0].partitions[0]
            assert p.error_code == 121                                            # 3-9 were never acquired
            assert [r["state"] for r in st.share_partition("w-g", "w", 0)["records"]] == ["acquired"] * 3
            p = w.call(ack("m", 3, [(0, 2, ACCEPT)]), 2).responses[0].partitions[0]
            assert p.error_code == 0 and done(st, "w-g", "w", 3)
            assert w.call(metadata_request("w"), 12).topics[0].error_code == 0   # the connection serves on
    finally:
        c.close()


def test_every_group_control_view_and_metric_serves_a_share_group():
    """The controls, views and metrics every group kind goes through, on a share group with a live member:
    GET /groups and /groups/G, `tenure groups list|describe`, GET /metrics (Prometheus), expire_session (its
    member removed), force_rebalance (refused: classic groups only, as for a consumer group), coordinator_of."""
    import contextlib
    import io
    import json

    from tenure.tools.cli import main
    from tests.integration.test_admin_guard import call

    with ServerThread(ServerConfig(port=0, admin_port=0, share_heartbeat_interval_ms=200,
                                   initial_rebalance_delay_ms=0)) as st:
        setup(st, "sv", "sv-g")
        produce(st, "sv", ["x"])
        s = Sharer(st, "sv-g", "sv", "m", lambda m: ACCEPT)
        try:
            wait_for(lambda: s.got(), what="a record delivered")
            status, groups = call(st.admin_port, "GET", "/groups")
            assert status == 200 and [(g["group_id"], g["kind"]) for g in groups if g["group_id"] == "sv-g"] \
                == [("sv-g", "share")]
            status, view = call(st.admin_port, "GET", "/groups/sv-g")
            assert status == 200 and view["kind"] == "share" and len(view["members"]) == 1
            member = view["members"][0]["member_id"]
            status, metrics = call(st.admin_port, "GET", "/metrics")
            assert status == 200 and 'group="sv-g"' in metrics, metrics[:500]
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert main(["groups", "list", "--admin", st.server.admin_address]) == 0
                assert main(["groups", "describe", "sv-g", "--admin", st.server.admin_address]) == 0
            text = out.getvalue()
            assert any(line.split()[:2] == ["sv-g", "share"] for line in text.splitlines()), text
            assert json.loads(text[text.index("{"):])["kind"] == "share"
            assert st.coordinator_of("sv-g") == 0
            from tenure.protocol.errors import AdminError, ErrorCode
            with pytest.raises(AdminError, match="is a share group: only classic groups rebalance") as refused:
                st.force_rebalance("sv-g")
            assert refused.value.code == ErrorCode.INVALID_REQUEST
            assert st.expire_session("sv-g", member) is True              # its session expired now: removed
            assert member not in {m.member_id for m in st.group("sv-g").members}
        finally:
            s.close()


def test_a_groups_own_session_timeout_and_heartbeat_interval_rule_its_members(server):
    """The GROUP resource's share.heartbeat.interval.ms and share.session.timeout.ms (IncrementalAlterConfigs)
    are what the coordinator uses for that group's members, over the server's (200 ms, 45 s here), as Kafka's
    GroupMetadataManager does: librdkafka heartbeats at the interval the answers give, and advancing the clock
    past the server's session timeout removes only the member of the group that kept the server's."""
    st = server
    admin = AdminClient({"bootstrap.servers": st.bootstrap})
    setup(st, "own", "own-g")
    res = ConfigResource(ResourceType.GROUP, "own-g", incremental_configs=[
        ConfigEntry("share.heartbeat.interval.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)
    own, other = Sharer(st, "own-g", "own", "own"), Sharer(st, "srv-g", "own", "srv")
    try:
        wait_for(lambda: all(st.group(g) is not None and st.group(g).members for g in ("own-g", "srv-g")),
                 what="both groups with their member")
        answered = {g: {x.response.heartbeat_interval_ms for x in st.requests(api="ShareGroupHeartbeat", group=g)
                        if x.response is not None and x.response.error_code == 0}
                    for g in ("own-g", "srv-g")}
        assert answered == {"own-g": {1000}, "srv-g": {200}}
        assert [m.session_timeout_ms for m in st.group("own-g").members] == [50000]
        assert [m.session_timeout_ms for m in st.group("srv-g").members] == [45000]
        # the pace of each member's heartbeats: the median gap between the arrivals of its next ones (a gap
        # measured on the server's clock, so a slow machine stretches single gaps, not the median)
        mark = st.capture.last_seq

        def arrivals(g: str) -> list[float]:
            return [x.received for x in st.requests(api="ShareGroupHeartbeat", group=g, since=mark)]
        wait_for(lambda: len(arrivals("own-g")) >= 4 and len(arrivals("srv-g")) >= 4, timeout=30,
                 what="four more heartbeats of each member")
        seen = {g: arrivals(g) for g in ("own-g", "srv-g")}
        gaps = {g: statistics.median(b - a for a, b in itertools.pairwise(t)) for g, t in seen.items()}
        assert gaps["own-g"] >= 0.8 and gaps["srv-g"] <= 0.5, gaps
        before = {g: st.rebalances(g) for g in ("own-g", "srv-g")}
        st.advance_clock(46_000)                          # past the server's 45 s, within the group's own 50 s
        wait_for(lambda: st.rebalances("srv-g") > before["srv-g"], what="the server-timeout member removed")
        assert st.rebalances("own-g") == before["own-g"]
    finally:
        own.close()
        other.close()


def test_the_share_coordinator_moves_with_its_partitions_leader_and_keeps_every_records_state():
    """Three brokers, __share_group_state in Kafka's 50 partitions: FindCoordinator v6 with a share partition's
    key (type 2, asked as a broker asks it) names the leader of the key's partition; that broker is stopped (a
    kill: its leaderships move), the share coordinator's shard loads on the new leader from its records, and
    FindCoordinator names the new leader. The state - a released record's delivery count, three accepted ones -
    is what it was, and a confluent-kafka ShareConsumer then gets only the released record, its delivery
    counted (2)."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    from tenure.protocol.internal_topics import SHARE_STATE_TOPIC, partition_for, share_coordinator_key
    from tests.support.wire import WireClient

    with ServerThread(ServerConfig(port=0, brokers=3, share_heartbeat_interval_ms=200,
                                   initial_rebalance_delay_ms=0)) as st:
        admin = AdminClient({"bootstrap.servers": st.bootstrap})
        admin.create_topics([NewTopic("sc", 1, 3)])["sc"].result(10)       # on every broker: it outlives a kill
        setup(st, "sc-other", "sc-g")                                       # the group's configs
        produce(st, "sc", ["again", "a", "b", "c"], linger_ms=200)
        a = Sharer(st, "sc-g", "sc", "a", lambda m: RELEASE if m.offset() == 0 else ACCEPT, stop_after=4,
                   commit_at_stop=True)
        try:
            wait_for(a.committed.is_set, what="the four records acknowledged")
        finally:
            a.close()
        view = lambda: [(r["state"], r["delivery_count"]) for r in st.share_partition("sc-g", "sc", 0)["records"]]  # noqa: E731
        wait_for(lambda: view() == [("available", 1)] + [("acknowledged", 1)] * 3, what="0 released, 1-3 accepted")
        handle = st.server.parts.share_state
        tid = st.call(lambda: st.server.topics.get("sc").topic_id)
        state = ("sc-g", tid, 0)
        key = share_coordinator_key(*state)
        part = partition_for(key, 50)
        assert st.call(lambda: len(st.server.topics.get(SHARE_STATE_TOPIC).partitions)) == 50

        def coordinator(via: int):
            addr = st.bootstrap.split(",")[via]
            w = WireClient.to(addr)
            try:
                r = w.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6)
            finally:
                w.close()
            c = r.coordinators[0]
            return c.key, c.error_code, c.node_id
        _, code, leader = coordinator(0)
        assert code == 0 and leader == st.call(lambda: st.server.cluster.leader_of(SHARE_STATE_TOPIC, part))
        saved = st.call(lambda: handle.runtime.read(state))
        assert saved == (0, ((0, 0, 0, 1), (1, 3, 2, 1)))       # offset 0 available (1 delivery), 1-3 acknowledged
        old_shard = st.call(lambda: handle.runtime.shards[part])
        st.stop_broker(leader)
        up = next(b for b in range(3) if b != leader)
        _, code, moved_to = coordinator(up)
        assert code == 0 and moved_to not in (leader, -1)
        assert st.call(lambda: handle.runtime.shards[part]) is not old_shard     # loaded again, by replay
        assert st.call(lambda: handle.runtime.read(state)) == saved
        b = Sharer(st, "sc-g", "sc", "b", lambda m: ACCEPT)
        try:
            try:
                wait_for(lambda: done(st, "sc-g", "sc", 4), what="the released record accepted after the move")
            except AssertionError:
                raise AssertionError((st.share_partition("sc-g", "sc", 0), b.got(), b.errors, leader,
                                      st.call(lambda: st.server.cluster.leader_of("sc", 0)),
                                      st.coordinator_of("sc-g"))) from None
        finally:
            b.close()
        assert [(o, n) for _, o, n, _ in b.got()] == [(0, 2)]
        # written on the new leader as Kafka's share partition writes it: the accepted record (ACKNOWLEDGED, 2,
        # delivery count 2) with the start offset it had then (the start moves once the write is done: the next
        # write carries 4); records 1-3 keep their ACKNOWLEDGED state in the coordinator until then
        assert st.call(lambda: handle.runtime.read(state)) == (0, ((0, 0, 2, 2), (1, 3, 2, 1)))
        st.start_broker(leader)
