"""Coordinator failover on a 3-broker tenure with confluent-kafka (librdkafka) consumers.

The same scenario as test_failover_java.py (tests/support/failover.py): a group of 4, each committing
synchronously after every record it polls, an idempotent producer writing throughout; the coordinating
broker stops, one member restarts during the outage, the broker comes back and the coordinator moves
back. librdkafka finds the new coordinator well within its session timeout, so it keeps its member id,
generation and partitions (past session.timeout.ms without a coordinator it would give its partitions up
as lost and rejoin). Static and dynamic members both ride through the move; a dynamic member that
restarts during it makes the whole group rebalance, a static one does not.
"""
from __future__ import annotations

import pytest

from tests.support.failover import ConfluentAdapter, run_coordinator_failover

pytestmark = [pytest.mark.timeout(240)]


@pytest.mark.tenure(brokers=3)
@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_confluent_group_through_coordinator_failover(tenure_server, static, record_property):
    st = tenure_server
    kind = "static" if static else "dynamic"
    group, topic = f"fo-confluent-{kind}", f"fo-confluent-{kind}"
    figures = run_coordinator_failover(
        st, lambda name: ConfluentAdapter(name, st.bootstrap, group, topic, static),
        group, topic, partitions=8, n=4, static=static)
    for k, v in figures.items():
        record_property(k, v)
