"""Request hooks and the request capture with the real Java kafka-clients 4.3 consumer (one JVM per member,
tests/java/StaticConsumer.java, as tests/integration/test_static_java.py drives it).

- a hook answers the group's second JoinGroup with REBALANCE_IN_PROGRESS: the Java consumer joins again,
  gets its partitions and consumes;
- the capture shows a static Java member's restart: one JoinGroup carrying its group.instance.id, no
  LeaveGroup, and no rebalance.

Java being unavailable fails these tests (tests/support/java.py raises), it never skips them.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from tenure.protocol.errors import ErrorCode
from tests.integration.test_static_java import java_members  # noqa: F401 - the fixture

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]


def produce(server, topic: str, value: bytes, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    p.produce(topic, value, partition=partition)
    assert p.flush(20) == 0


@pytest.mark.tenure(topics={"jhk-t": 2})
def test_a_hook_answers_the_second_join_with_rebalance_in_progress_and_java_recovers(tenure_server,
                                                                                   java_members):  # noqa: F811
    produce(tenure_server, "jhk-t", b"one", partition=1)
    joins = []

    def second_join_rebalances(call):
        joins.append((call.version, call.request.member_id))
        if len(joins) == 2:
            return call.error("REBALANCE_IN_PROGRESS")
        return None

    with tenure_server.on_request("JoinGroup", second_join_rebalances, group="jhk-g") as hook:
        m = java_members("jhk", tenure_server.bootstrap, "jhk-g", "jhk-t", session_timeout_ms=10000)
        assigned = m.wait_type("assigned", 60)
        assert sorted(assigned["partitions"]) == [0, 1], m.dump()
        assert m.wait_record(1, 0, 30)["value"] == "one"
    assert hook.answered == 1 and hook.calls == len(joins) == 3, joins
    got = tenure_server.requests(api="JoinGroup", group="jhk-g", client_id="jhk")
    assert [e.error for e in got] == [ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.REBALANCE_IN_PROGRESS, 0]
    assert joins[0][1] == "" and joins[1][1] == joins[2][1] == assigned["member_id"]
    assert [e.version for e in got] == [v for v, _ in joins]
    assert tenure_server.group("jhk-g").generation == assigned["generation"]
    assert m.close() == 0


@pytest.mark.tenure(topics={"jcap-t": 2})
def test_capture_shows_a_static_java_restart_sent_joingroup_with_its_instance_id_and_no_leavegroup(
        tenure_server, java_members):  # noqa: F811
    m = java_members("jcap-1", tenure_server.bootstrap, "jcap-g", "jcap-t", instance="jcap-1",
                     session_timeout_ms=10000)
    first = m.wait_type("assigned", 60)
    tenure_server.wait_for_group("jcap-g", members=1)
    mark = tenure_server.capture.last_seq
    with tenure_server.no_rebalance("jcap-g"):
        assert m.close() == 0
        m = java_members("jcap-1", tenure_server.bootstrap, "jcap-g", "jcap-t", instance="jcap-1",
                         session_timeout_ms=10000)
        again = m.wait_type("assigned", 60)
    assert sorted(again["partitions"]) == sorted(first["partitions"]) == [0, 1]
    assert again["generation"] == first["generation"]
    restart = tenure_server.requests(group="jcap-g", since=mark)
    assert tenure_server.requests(api="LeaveGroup", group="jcap-g") == []
    joins = [e for e in restart if e.api == "JoinGroup"]
    assert len(joins) == 1 and joins[0].group_instance_id == "jcap-1" and joins[0].error == 0
    assert joins[0].response.member_id == again["member_id"] != first["member_id"]
    assert m.close() == 0


@pytest.mark.tenure(brokers=2, topics={"jnp-t": 4})
def test_a_static_java_member_partitioned_from_its_coordinator_longer_than_its_session_is_fenced_once(
        tenure_server, java_members):  # noqa: F811
    """Two static Java members; one is cut off from the group's coordinator (it still reaches the other
    broker) while the coordinator's clock passes its 6 s session: one rebalance (session_expired), the
    other member takes its partitions, the cut-off one hears nothing meanwhile; healed, its held heartbeat
    is answered UNKNOWN_MEMBER_ID and it joins again with its instance id."""
    conf = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}
    a = java_members("jnp-a", tenure_server.bootstrap, "jnp-g", "jnp-t", instance="jnp-a", **conf)
    b = java_members("jnp-b", tenure_server.bootstrap, "jnp-g", "jnp-t", instance="jnp-b", **conf)
    tenure_server.wait_for_group("jnp-g", members=2, timeout=60)
    a.wait_type("assigned", 60), b.wait_type("assigned", 60)
    coordinator = tenure_server.coordinator_of("jnp-g")
    before = tenure_server.rebalances("jnp-g")
    a_mark, b_mark, mark = a.mark(), b.mark(), tenure_server.capture.last_seq
    with tenure_server.network.partition(client_id="jnp-a", broker=coordinator):
        for _ in range(5):                          # 7.5 s of coordinator time, b heartbeating in between
            tenure_server.advance_clock(1500)
            time.sleep(0.6)
        took = b.wait_for(lambda e: e["type"] == "assigned" and sorted(e["partitions"]) == [0, 1, 2, 3], 30,
                          since=b_mark, what="b holding every partition")
        g = tenure_server.group("jnp-g")
        assert set(g.static_members) == {"jnp-b"} and g.rebalance_causes.get("session_expired") == 1
        assert tenure_server.rebalances("jnp-g") == before + 1
        assert a.callbacks(a_mark) == [] and tenure_server.requests(client_id="jnp-a", broker=coordinator,
                                                                    since=mark) == []
    back = a.wait_type("assigned", 60, since=a_mark)
    assert back["generation"] > took["generation"]
    beats = [e for e in tenure_server.requests(client_id="jnp-a", broker=coordinator, since=mark)
             if e.api == "Heartbeat"]
    assert beats and beats[0].error == ErrorCode.UNKNOWN_MEMBER_ID
    joins = tenure_server.requests(api="JoinGroup", client_id="jnp-a", since=mark)
    assert joins and all(j.group_instance_id == "jnp-a" for j in joins)
    assert a.close() == 0 and b.close() == 0
