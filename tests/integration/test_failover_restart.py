"""A 3-broker tenure with a data dir stopped as a whole and started again (`ServerThread.restart()`).

Three static confluent-kafka groups, coordinated by different brokers, commit; one broker stops and
starts again before the restart (so some groups have committed on a coordinator they moved to); then
the whole cluster restarts. Every group is back as it was - Stable, same generation, same instance ->
member id map and assignment, same offsets - and every broker answers FindCoordinator for every group
with the broker that now serves it. The static members then restart against it and get their partitions
back with no rebalance.
"""
from __future__ import annotations

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from tests.support.failover import committed_by_admin
from tests.support.groups import GroupMember, commit_offsets, wait_for
from tests.support.wire import WireClient

pytestmark = [pytest.mark.timeout(180)]
PARTITIONS = 4


def snapshot(st, group: str):
    v = st.group(group)
    return (v.state, v.generation, dict(v.static_members),
            {m.group_instance_id: m.assignment for m in v.members},
            {(o.topic, o.partition): o.offset for o in v.offsets})


def find_coordinator_everywhere(st, group: str) -> set[tuple[int, str, int]]:
    """(node id, host, port) each live broker answers for the group (FindCoordinator v3)."""
    answers = set()
    for b in st.brokers():
        if not b["up"]:
            continue
        with WireClient(b["host"], b["port"]) as c:
            r = c.call(FindCoordinatorRequest(key=group, key_type=0), 3)
        assert r.error_code == 0, (b, r)
        answers.add((r.node_id, r.host, r.port))
    return answers


def members_of(st, groups, topic):
    return {g: [GroupMember("confluent", st.bootstrap, g, topic, f"{g}-i{j}", session_timeout_ms=10000,
                            heartbeat_interval_ms=500).start() for j in range(2)] for g in groups}


@pytest.mark.tenure(brokers=3, data_dir=True)
def test_whole_cluster_restart_brings_back_groups_static_maps_and_offsets(tenure_server):
    st = tenure_server
    topic = "restart-cluster"
    st.create_topics({topic: PARTITIONS})
    # one group per broker
    groups, seen, i = [], set(), 0
    while len(groups) < 3:
        g = f"rc-{i}"
        if st.coordinator_of(g) not in seen:
            seen.add(st.coordinator_of(g))
            groups.append(g)
        i += 1
    members = members_of(st, groups, topic)
    try:
        for g, ms in members.items():
            for m in ms:
                m.wait_assigned(60)
            st.wait_for_group(g, members=2, timeout=60)
            for j, m in enumerate(ms):
                commit_offsets(m, {p: 10 * (j + 1) + p for p in m.assignment})
        # a broker goes down and comes back: the groups it coordinated moved, and commit there
        down = st.coordinator_of(groups[0])
        st.stop_broker(down)
        st.start_broker(down)
        for ms in members.values():
            for m in ms:
                commit_offsets(m, {p: 100 + p for p in m.assignment})
    finally:
        for ms in members.values():
            for m in ms:
                m.stop()                 # static: close() sends no LeaveGroup, the groups stay Stable
    before = {g: snapshot(st, g) for g in groups}
    for g, (state, _gen, static, _assignment, offsets) in before.items():
        assert state == "Stable" and len(static) == 2, before[g]
        assert offsets == {(topic, p): 100 + p for p in range(PARTITIONS)}, offsets

    st.restart()

    for g in groups:
        assert snapshot(st, g) == before[g], g
        coordinator = st.coordinator_of(g)
        b = next(b for b in st.brokers() if b["id"] == coordinator)
        assert find_coordinator_everywhere(st, g) == {(coordinator, b["host"], b["port"])}, g
        assert committed_by_admin(st.bootstrap, g, topic, PARTITIONS) == {p: 100 + p for p in range(PARTITIONS)}

    # the static members come back to the partitions they had, at the same generation
    with st.no_rebalance(*groups):
        members = members_of(st, groups, topic)
        try:
            for g, ms in members.items():
                want = before[g][3]
                for m in ms:
                    got = m.wait_assigned(60)
                    assert sorted(got) == want[m.instance_id][topic], (g, m.instance_id, got, want)
                wait_for(lambda g=g: st.group(g).generation == before[g][1], 5, "generation")
        finally:
            for ms in members.values():
                for m in ms:
                    m.stop()
