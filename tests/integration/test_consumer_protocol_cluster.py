"""KIP-1101 with a cluster (confluent-kafka 2.16 and Java kafka-clients 4.3, `group.protocol=consumer`): a
consumer group on three brokers over three racks. Stopping a broker moves leaders and shrinks ISRs but not
replicas or racks: the coordinator computes the topic hashes again (the stop evicted them) and the group
epoch does not move; starting it again neither. A leader moved to a broker that was not a replica adds a
replica on another rack: the topic's hash changes and the group epoch goes up exactly once."""
from __future__ import annotations

import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.integration.test_consumer_protocol import Member, settled, view
from tests.integration.test_static_java import java_members  # noqa: F401 - a fixture
from tests.support.groups import wait_for

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6
RACKS = ("ra", "rb", "rc")


def computed(server, gid: str) -> int:
    """How many topic hashes the group's coordinator shard has computed."""
    return server.call(lambda: server.server.runtime.shard_for(gid).topic_hashes.computed)


def wait_recomputed(server, gid: str, since: int, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while computed(server, gid) <= since:
        assert time.monotonic() < end, "the coordinator did not compute the topic hash again"
        time.sleep(0.05)


def steady(server, gid: str, members, epoch: int, owned: dict, seconds: float = 1.5) -> None:
    """For `seconds` (several heartbeats): the group epoch stays and every member keeps its partitions."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert view(server, gid).generation == epoch
        assert {m.instance: sorted(m.owned()) for m in members} == owned
        time.sleep(0.1)


def test_broker_stop_and_start_bump_nothing_a_replica_on_a_new_rack_bumps_once():
    cfg = ServerConfig(port=0, admin_port=0, brokers=3, racks=RACKS, replication_factor=2,
                       consumer_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as s:
        s.create_topics({"t": PARTITIONS})
        gid = "g"
        members = [Member(s.bootstrap, gid, "t", f"i{n}", f"c{n}").start() for n in range(2)]
        try:
            epoch, owned = settled(s, gid, members, PARTITIONS)
            for m in members:
                m.revoked.clear()
            coordinator = s.coordinator_of(gid)
            leaders = [s.leader_of("t", p) for p in range(PARTITIONS)]
            victim = next(b for b in leaders if b != coordinator)

            before = computed(s, gid)
            s.stop_broker(victim)
            assert all(s.leader_of("t", p) != victim for p in range(PARTITIONS))
            wait_recomputed(s, gid, before)
            steady(s, gid, members, epoch, owned)

            before = computed(s, gid)
            s.start_broker(victim)
            wait_recomputed(s, gid, before)
            steady(s, gid, members, epoch, owned)
            assert [m.revoked for m in members] == [[], []]

            replicas = s.call(lambda: s.server.cluster.state("t", 0).replicas)
            newcomer = next(b for b in range(3) if b not in replicas)     # its rack is new to partition 0
            s.move_leader("t", 0, newcomer)
            wait_for(lambda: view(s, gid).generation > epoch, 30, "the group epoch to move")
            again, owned_after = settled(s, gid, members, PARTITIONS)
            assert again == epoch + 1
            assert view(s, gid).rebalance_causes.get("consumer metadata changed") == 1
            steady(s, gid, members, epoch + 1, owned_after)
        finally:
            for m in members:
                m.stop()


@pytest.mark.java
@pytest.mark.timeout(240)
def test_java_broker_stop_bumps_nothing_a_replica_on_a_new_rack_bumps_once(java_members):  # noqa: F811 - the fixture
    from tests.integration.test_consumer_protocol_java import CONSUMER, settled_n
    cfg = ServerConfig(port=0, admin_port=0, brokers=3, racks=RACKS, replication_factor=2,
                       consumer_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as s:
        s.create_topics({"t": PARTITIONS})
        gid = "g"
        members = [java_members(f"j{n}", s.bootstrap, gid, "t", f"i{n}", **CONSUMER) for n in range(2)]
        epoch, before = settled_n(s, gid, members, PARTITIONS)
        marks = [m.mark() for m in members]
        coordinator = s.coordinator_of(gid)
        victim = next(b for b in (s.leader_of("t", p) for p in range(PARTITIONS)) if b != coordinator)

        start = computed(s, gid)
        s.stop_broker(victim)
        wait_recomputed(s, gid, start)
        time.sleep(1.5)                                            # several heartbeats
        assert settled_n(s, gid, members, PARTITIONS) == (epoch, before)
        start = computed(s, gid)
        s.start_broker(victim)
        wait_recomputed(s, gid, start)
        time.sleep(1.5)
        assert settled_n(s, gid, members, PARTITIONS) == (epoch, before)
        for m, mark in zip(members, marks):
            assert [e for e in m.callbacks(mark) if e["type"] in ("revoked", "lost") and e["partitions"]] == [], \
                m.dump()

        replicas = s.call(lambda: s.server.cluster.state("t", 0).replicas)
        s.move_leader("t", 0, next(b for b in range(3) if b not in replicas))
        wait_for(lambda: s.group(gid).generation > epoch, 30, "the group epoch to move")
        assert settled_n(s, gid, members, PARTITIONS)[0] == epoch + 1
        time.sleep(1.5)
        assert settled_n(s, gid, members, PARTITIONS)[0] == epoch + 1          # one bump, not more
