"""Fault injection and inspection from tests, against real clients: the examples docs/testing.md shows.

Each test uses the pytest plugin's `tenure_server` fixture (tenure/control/pytest_plugin.py) and one control of
the server object - no sleeps waiting for timeouts: an injected error, a closed connection, added
latency, a session expired now, the coordinator's clock moved ahead, a restart on the data dir.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tenure.protocol.errors import ErrorCode
from tests.support.groups import GroupMember, wait_for
from tests.support.wire import WireClient

pytestmark = pytest.mark.timeout(120)


def create_topic(server, name: str, partitions: int) -> None:
    server.call(lambda: server.server.topics.create(name, partitions))


def static_member(server, group: str, topic: str, instance: str, client: str = "confluent", **kw) -> GroupMember:
    kw.setdefault("rebalance_timeout_ms", max(20000, kw.get("session_timeout_ms", 0) + 10000))
    return GroupMember(client, server.bootstrap, group, topic, instance, **kw).start()


def test_inspection_answers_who_holds_what_in_one_line(tenure_server):
    create_topic(tenure_server, "insp-t", 4)
    a = static_member(tenure_server, "insp-g", "insp-t", "a")
    b = static_member(tenure_server, "insp-g", "insp-t", "b")
    try:
        wait_for(lambda: a.assignment and b.assignment and len(a.assignment | b.assignment) == 4, 30, "two members")
        g = tenure_server.group("insp-g")
        assert (g.state, g.protocol_type, g.kind) == ("Stable", "consumer", "classic")
        assert set(g.static_members) == {"a", "b"}
        assert g.assignments == {"a": {"insp-t": sorted(a.assignment)}, "b": {"insp-t": sorted(b.assignment)}}
        assert g.member("a").is_static and g.member(g.static_members["b"]).group_instance_id == "b"
        assert g.rebalances == tenure_server.rebalances("insp-g") >= 1
        assert set(g.rebalance_causes) <= {"member_joined", "leader_rejoined"}
        assert tenure_server.group("no-such-group") is None
    finally:
        a.stop(), b.stop()


def test_no_rebalance_passes_for_a_static_restart_and_fails_for_a_dynamic_one(tenure_server):
    create_topic(tenure_server, "nr-t", 4)
    a = static_member(tenure_server, "nr-g", "nr-t", "a")
    b = static_member(tenure_server, "nr-g", "nr-t", "b")
    dyn = [GroupMember("confluent", tenure_server.bootstrap, "nr-dyn", "nr-t", name=f"d{i}").start()
           for i in range(2)]
    try:
        wait_for(lambda: a.assignment and b.assignment and all(d.assignment for d in dyn), 30, "both groups")
        wait_for(lambda: tenure_server.group("nr-g").state == "Stable"
                 and tenure_server.group("nr-dyn").state == "Stable", 30, "stable groups")
        before = a.assignment
        with tenure_server.no_rebalance("nr-g"):            # a static member restarts: nothing happens
            a.stop()
            a = static_member(tenure_server, "nr-g", "nr-t", "a")
            assert a.wait_assigned(30) == before
        with pytest.raises(AssertionError, match="rebalance"):
            with tenure_server.no_rebalance("nr-dyn"):      # a dynamic one leaves: a rebalance
                dyn[0].stop()
                wait_for(lambda: tenure_server.group("nr-dyn").generation > 1
                         and tenure_server.group("nr-dyn").state == "Stable", 30, "the dynamic rebalance")
    finally:
        for m in (a, b, *dyn):
            if not m.closed.is_set():
                m.stop()


def test_fail_the_next_joins_with_a_retriable_error(tenure_server):
    """The next 3 JoinGroups answer COORDINATOR_NOT_AVAILABLE: librdkafka re-discovers the coordinator
    and retries; the group forms anyway and the server counts what it injected."""
    create_topic(tenure_server, "fj-t", 2)
    rule = tenure_server.faults.fail("JoinGroup", "COORDINATOR_NOT_AVAILABLE", count=3)
    m = static_member(tenure_server, "fj-g", "fj-t", "a")
    try:
        assert m.wait_assigned(60) == frozenset({0, 1})
        assert tenure_server.faults.rules() == []                 # used up
        assert tenure_server.metrics.faults[("JoinGroup", "fail")] == 3
        assert tenure_server.metrics.requests[("JoinGroup", "COORDINATOR_NOT_AVAILABLE")] == 3
        assert rule.id >= 1
        assert tenure_server.group("fj-g").generation == 1           # the failed joins changed nothing
    finally:
        m.stop()


def test_a_fenced_error_injected_into_a_commit_is_fatal_for_librdkafka(tenure_server):
    """FENCED_INSTANCE_ID on an OffsetCommit: librdkafka raises it as a fatal error, as a real broker's."""
    create_topic(tenure_server, "ff-t", 1)
    p = Producer({"bootstrap.servers": tenure_server.bootstrap})
    p.produce("ff-t", b"x")
    p.flush(10)
    c = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "ff-g", "group.instance.id": "a",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["ff-t"])
        msg = wait_for(lambda: (lambda m: m if m is not None and not m.error() else None)(c.poll(0.2)), 30,
                       "a message")
        tenure_server.faults.fail("OffsetCommit", ErrorCode.FENCED_INSTANCE_ID)
        with pytest.raises(KafkaException) as err:
            c.commit(message=msg, asynchronous=False)
        assert err.value.args[0].code() == KafkaError.FENCED_INSTANCE_ID
        assert tenure_server.group("ff-g").offset("ff-t", 0) is None     # nothing was committed
    finally:
        c.close()


def test_close_the_connection_instead_of_answering_a_commit(tenure_server):
    """The server drops the connection on the next OffsetCommit, unanswered and unstored: librdkafka
    reconnects and retries it by itself, so the application's commit still succeeds - once."""
    create_topic(tenure_server, "cc-t", 1)
    c = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "cc-g", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("cc-t", 0)])
        tenure_server.faults.close("OffsetCommit")
        c.commit(offsets=[TopicPartition("cc-t", 0, 5)], asynchronous=False)
        assert tenure_server.metrics.faults[("OffsetCommit", "close")] == 1
        assert tenure_server.metrics.closed_connections["injected_fault"] == 1
        wait_for(lambda: tenure_server.metrics.requests[("OffsetCommit", "NONE")] == 1, 10,
                 "the retry, answered, to be counted")
        assert tenure_server.group("cc-g").offset("cc-t", 0) == 5
    finally:
        c.close()


def test_close_the_connection_of_a_kafka_python_commit(tenure_server):
    """kafka-python's commitSync also survives a dropped connection: it marks the coordinator dead,
    finds it again and resends; the application's call returns normally and the offset is stored."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata
    create_topic(tenure_server, "ck-t", 1)
    c = KafkaConsumer(bootstrap_servers=tenure_server.bootstrap, group_id="ck-g", enable_auto_commit=False)
    try:
        c.assign([KTP("ck-t", 0)])
        c.commit({KTP("ck-t", 0): OffsetAndMetadata(3, "", -1)})       # connects the coordinator
        tenure_server.faults.close("OffsetCommit")
        c.commit({KTP("ck-t", 0): OffsetAndMetadata(9, "", -1)})
        assert tenure_server.metrics.faults[("OffsetCommit", "close")] == 1
        assert tenure_server.group("ck-g").offset("ck-t", 0) == 9
        wait_for(lambda: tenure_server.metrics.requests[("OffsetCommit", "NONE")] == 2, 10, "two answered commits")
    finally:
        c.close()


def test_delay_adds_latency_to_one_api_only(tenure_server):
    """Every Heartbeat waits 400 ms; a Metadata on the same server is not delayed."""
    tenure_server.faults.delay("Heartbeat", 400)
    from kafka.protocol.consumer.group import HeartbeatRequest
    from kafka.protocol.metadata import MetadataRequest
    with WireClient.to(tenure_server.bootstrap) as w:
        t0 = time.monotonic()
        r = w.call(HeartbeatRequest(group_id="nobody", generation_id=1, member_id="m", group_instance_id=None), 4)
        slow = time.monotonic() - t0
        assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID      # answered normally, just late
        t0 = time.monotonic()
        w.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
        fast = time.monotonic() - t0
    assert slow >= 0.4 and fast < slow
    assert tenure_server.faults.clear("Heartbeat") == 1 and tenure_server.faults.rules() == []


def test_delayed_heartbeats_longer_than_the_session_expire_a_static_member(tenure_server):
    """A slow coordinator: librdkafka's heartbeats take longer than the session timeout, so the server
    expires the static member and the group rebalances - a real client under an injected latency."""
    create_topic(tenure_server, "dh-t", 2)
    m = static_member(tenure_server, "dh-g", "dh-t", "a", session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        m.wait_assigned(30)
        tenure_server.faults.delay("Heartbeat", 7000, count=1)
        wait_for(lambda: tenure_server.group("dh-g").rebalance_causes.get("session_expired"), 30,
                 "the session to expire behind a delayed heartbeat")
    finally:
        tenure_server.faults.clear()
        m.stop()


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_expire_a_static_members_session_now(tenure_server, client):
    """expire_session: the member is removed at once (one rebalance, cause session_expired); the live
    client learns it on its next heartbeat and joins again."""
    create_topic(tenure_server, f"ex-{client}", 2)
    m = static_member(tenure_server, "ex-g", f"ex-{client}", "a", client=client, session_timeout_ms=30000)
    try:
        m.wait_assigned(30)
        wait_for(lambda: tenure_server.group("ex-g").state == "Stable", 30, "stable")
        old_id = tenure_server.group("ex-g").static_members["a"]
        assert tenure_server.expire_session("ex-g", "a") is True
        assert tenure_server.group("ex-g").rebalance_causes["session_expired"] == 1
        assert "a" not in tenure_server.group("ex-g").static_members or \
            tenure_server.group("ex-g").static_members["a"] != old_id
        wait_for(lambda: "a" in tenure_server.group("ex-g").static_members
                 and tenure_server.group("ex-g").state == "Stable", 30, "the member to rejoin")
        assert tenure_server.group("ex-g").static_members["a"] != old_id
        assert tenure_server.expire_session("ex-g", "nobody") is False
    finally:
        m.stop()


def a_dies_beside_b(server, group: str, topic: str, partitions: int, a_session_ms: int, b_session_ms: int):
    """Static members "a" and "b" share `topic`; then a's process dies (librdkafka sends no LeaveGroup
    for a static member). Returns (b, a's member id); the caller stops b."""
    create_topic(server, topic, partitions)
    a = static_member(server, group, topic, "a", session_timeout_ms=a_session_ms)
    b = static_member(server, group, topic, "b", session_timeout_ms=b_session_ms)
    try:
        wait_for(lambda: a.assignment and b.assignment and len(a.assignment | b.assignment) == partitions, 30,
                 "two members")
        a_id = server.group(group).static_members["a"]
    except BaseException:
        b.stop()
        raise
    finally:
        a.stop()
    return b, a_id


def test_advance_the_clock_past_a_killed_members_session_timeout(tenure_server):
    """A static member whose process died (no LeaveGroup) holds its partitions for session.timeout.ms
    (here 60 s); moving the coordinator's clock 61 s ahead hands them over now."""
    b, a_id = a_dies_beside_b(tenure_server, "ac-g", "ac-t", 4, 60000, 60000)
    try:
        time.sleep(0.5)
        assert set(tenure_server.group("ac-g").static_members) == {"a", "b"}    # still waiting for "a"
        t0 = time.monotonic()
        fired = tenure_server.advance_clock(61000)
        assert f"heartbeat/ac-g/{a_id}" in fired       # timers are named as the docs show them
        wait_for(lambda: b.assignment == frozenset(range(4)), 30, "b to take over every partition")
        assert time.monotonic() - t0 < 30
        g = tenure_server.group("ac-g")
        assert set(g.static_members) == {"b"} and g.rebalance_causes["session_expired"] == 1
    finally:
        b.stop()


@pytest.mark.tenure(static_registration_timeout_ms=90000)
def test_the_registration_timeout_counts_from_the_members_last_heartbeat(tenure_server):
    """With a 60 s session and a 90 s registration timeout a silent static member is offline once its
    session is over and removed 90 s after its last heartbeat (not 60 + 90 s). (b's session, 120 s,
    outlasts the 91 s the clock moves.)"""
    b, a_id = a_dies_beside_b(tenure_server, "rt-g", "rt-t", 2, 60000, 120000)
    try:
        fired = tenure_server.advance_clock(61000)
        assert fired == [f"heartbeat/rt-g/{a_id}"]
        assert set(tenure_server.group("rt-g").static_members) == {"a", "b"}      # offline, kept
        fired = tenure_server.advance_clock(30000)     # 91 s after a's last heartbeat
        assert "registration/rt-g" in fired
        wait_for(lambda: b.assignment == frozenset(range(2)), 30, "b to take over every partition")
        g = tenure_server.group("rt-g")
        assert set(g.static_members) == {"b"} and g.rebalance_causes["registration_expired"] == 1
    finally:
        b.stop()


@pytest.mark.tenure(data_dir=True)
def test_restart_the_server_on_its_data_dir(tenure_server):
    """restart(): connections drop, the state comes back from the log, the static member carries on
    in the same generation and its committed offset is still there."""
    create_topic(tenure_server, "rs-t", 2)
    m = static_member(tenure_server, "rs-g", "rs-t", "a")
    try:
        m.wait_assigned(30)
        m.call(lambda c: c.commit(offsets=[TopicPartition("rs-t", 0, 7)], asynchronous=False))
        wait_for(lambda: tenure_server.group("rs-g").offset("rs-t", 0) == 7, 30, "the commit")
        gen, port = tenure_server.group("rs-g").generation, tenure_server.port
        with tenure_server.no_rebalance("rs-g"):
            tenure_server.restart()
            assert tenure_server.port == port
            g = tenure_server.group("rs-g")
            assert (g.state, g.generation, g.offset("rs-t", 0)) == ("Stable", gen, 7)
            m.call(lambda c: c.commit(offsets=[TopicPartition("rs-t", 1, 3)], asynchronous=False), timeout=60)
            assert tenure_server.group("rs-g").offset("rs-t", 1) == 3
    finally:
        m.stop()


def test_force_a_static_rebalance(tenure_server):
    create_topic(tenure_server, "fr-t", 2)
    m = static_member(tenure_server, "fr-g", "fr-t", "a")
    try:
        m.wait_assigned(30)
        wait_for(lambda: tenure_server.group("fr-g").state == "Stable", 30, "stable")
        gen = tenure_server.group("fr-g").generation
        tenure_server.force_rebalance("fr-g")
        wait_for(lambda: tenure_server.group("fr-g").generation == gen + 1
                 and tenure_server.group("fr-g").state == "Stable", 30, "the forced rebalance")
        assert tenure_server.group("fr-g").rebalance_causes["forced"] == 1
    finally:
        m.stop()


def test_fault_rules_validate_their_input(tenure_server):
    with pytest.raises(ValueError, match="unknown API"):
        tenure_server.faults.fail("NoSuchApi", 15)
    with pytest.raises(ValueError, match="unknown Kafka error"):
        tenure_server.faults.fail("JoinGroup", "NO_SUCH_ERROR")
    with pytest.raises(ValueError, match="no whole-request error"):
        tenure_server.faults.fail("Metadata", 15)
    with pytest.raises(ValueError, match="count"):
        tenure_server.faults.close("Fetch", count=0)
    # every API of the table accepts close and delay; names and keys both work
    assert tenure_server.faults.close(11).api == tenure_server.faults.close("join_group").api == 11
    assert tenure_server.faults.fail("*", "NOT_COORDINATOR").api is None
    assert tenure_server.faults.fail("Heartbeat", "unknown_member_id").error == 25
    assert tenure_server.faults.fail("Heartbeat", "THROTTLING_QUOTA_EXCEEDED").error == 89   # kafka-python's names
    assert [r.action for r in tenure_server.faults.rules()] == ["close", "close", "fail", "fail", "fail"]
    assert tenure_server.faults.clear("JoinGroup") == 2 and tenure_server.faults.clear() == 3


def test_server_keeps_serving_others_while_one_connection_is_closed_by_a_fault(tenure_server):
    tenure_server.faults.close("*", count=1)
    from kafka.protocol.metadata import ApiVersionsRequest
    with WireClient.to(tenure_server.bootstrap) as w:
        with pytest.raises((ConnectionError, OSError, EOFError)):
            w.call(ApiVersionsRequest(), 0)
    with WireClient.to(tenure_server.bootstrap) as w:
        assert w.call(ApiVersionsRequest(), 0).error_code == 0
