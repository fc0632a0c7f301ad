"""Request hooks and the request capture with the real Java kafka-clients 4.3 consumer (one JVM per member,
tests/java/StaticConsumer.java, as tests/integration/test_static_java.py drives it).

- a hook answers the group's second JoinGroup with REBALANCE_IN_PROGRESS: the Java consumer joins again,
  gets its partitions and consumes;
- the capture shows a static Java member's restart: one JoinGroup carrying its group.instance.id, no
  LeaveGroup, and no rebalance.

Java being unavailable fails these tests (tests/support/java.py raises), it never skips them.
"""
from __future__ import annotations

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
