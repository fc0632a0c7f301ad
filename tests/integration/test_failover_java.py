"""Coordinator failover on a 3-broker tenure with the real Java kafka-clients 4.3 classic consumer.

A group of 4 (tests/java/StaticConsumer.java with commit.each.poll=true: commitSync after every batch)
on 8 partitions while an idempotent producer keeps writing: the broker coordinating the group stops, one
member restarts while it is down, the broker comes back and the coordinator moves back to it
(tests/support/failover.py has the scenario and every check).

What a coordinator move does to a group is the same for static and dynamic members, as on Kafka: the new
coordinator loads the group from `__consumer_offsets` (members, generation, assignment) and every member
just finds it and carries on - no callback, same generation, same partitions, no commit lost. The
contrast is a member that restarts during the outage: a static one comes back to its partitions with no
rebalance, a dynamic one leaves and joins as a new member, and the whole group rebalances.
"""
from __future__ import annotations

import pytest

from tests.integration.test_static_java import JavaMember
from tests.support.failover import JavaAdapter, run_coordinator_failover

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]


@pytest.fixture
def java_members():
    started: list[JavaMember] = []

    def start(*args, **kwargs) -> JavaMember:
        started.append(JavaMember(*args, **kwargs))
        return started[-1]
    yield start
    for m in started:
        m.terminate()


@pytest.mark.tenure(brokers=3)
@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_java_group_through_coordinator_failover(tenure_server, java_members, static, record_property):
    st = tenure_server
    kind = "static" if static else "dynamic"
    group, topic = f"fo-java-{kind}", f"fo-java-{kind}"
    figures = run_coordinator_failover(
        st, lambda name: JavaAdapter(java_members, name, st.bootstrap, group, topic, static),
        group, topic, partitions=8, n=4, static=static)
    for k, v in figures.items():
        record_property(k, v)
