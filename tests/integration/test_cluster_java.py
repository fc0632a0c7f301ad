"""Java kafka-clients 4.3: a static group of 4 on a 3-broker cluster survives stopping the broker that
coordinates it - every member finds the new coordinator, the generation does not change, nobody sees a
callback, everyone keeps its partitions and goes on consuming, and no acknowledged commit is lost.
(The full failover matrix - confluent-kafka, dynamic members, moving back, whole-cluster restart - is
tests/integration/test_failover*.py.)"""
from __future__ import annotations

import pytest

from tenure.server import ServerThread
from tests.integration.test_static_java import (  # noqa: F401 - java_members: the fixture
    STATIC_SESSION_MS,
    admin,
    create_topic,
    dump_all,
    group_view,
    java_members,
    wait_stable,
)

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]


def test_a_static_java_group_survives_stopping_its_coordinators_broker(java_members):  # noqa: F811 - the fixture
    topic, gid, parts = "jfail", "jfail-g", 8
    with ServerThread(brokers=3) as st:
        create_topic(st, topic, parts)
        bs = st.bootstrap
        admin(bs, "produce", topic, str(parts), "5", "first")
        names = [f"s{i}" for i in range(4)]
        ms = {n: java_members(n, bs, gid, topic, instance=n, session_timeout_ms=STATIC_SESSION_MS,
                              heartbeat_interval_ms=1000) for n in names}
        gen0, assignment0 = wait_stable(st, gid, list(ms.values()), timeout=90, partitions=parts)
        for n, m in ms.items():
            for p in assignment0[n]:
                m.wait_record(p, 4)
            assert sorted((o["partition"], o["offset"]) for o in m.commit()["offsets"]) == \
                [(p, 5) for p in assignment0[n]]
        quiet = {n: m.mark() for n, m in ms.items()}
        home = st.coordinator_of(gid)

        with st.no_rebalance(gid):
            st.stop_broker(home)                 # returns once the coordinator is loaded on another broker
            assert st.coordinator_of(gid) != home
            admin(bs, "produce", topic, str(parts), "5", "second")
            for n, m in ms.items():
                for p in assignment0[n]:
                    m.wait_record(p, 9, timeout=60)
                committed = m.commit(timeout=60)           # through the new coordinator
                assert sorted((o["partition"], o["offset"]) for o in committed["offsets"]) == \
                    [(p, 10) for p in assignment0[n]], (n, committed, dump_all(ms.values()))
        for n, m in ms.items():
            assert m.callbacks(quiet[n]) == [], (n, m.callbacks(quiet[n]))
            s = m.status()
            assert (s["generation"], s["partitions"]) == (gen0, assignment0[n]), (n, s)
        v = group_view(st, gid)
        assert (v["state"], v["generation"], sorted(v["static"])) == ("Stable", gen0, names), v
        assert v["offsets"] == {(topic, p): 10 for p in range(parts)}
        for m in ms.values():
            assert m.close() == 0
