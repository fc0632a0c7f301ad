"""A fenced consumer-protocol member rejoins under its own member id (issue 28 item 3), with real clients.

One ConsumerGroupHeartbeat of a stable group's member is answered FENCED_MEMBER_EPOCH (110, an injected
fault): the client gives its partitions up (onPartitionsLost) and sends epoch 0 with the member id it keeps for
its lifetime. Kafka's coordinator takes that as a rejoin since KAFKA-19233 (before it, 110 again and again
until the session ran out): the member gets its epoch and partitions back, with no group-epoch bump and
nothing taken from the other member. Java kafka-clients 4.3 and confluent-kafka 2.16, dynamic members (a static
member's epoch 0 is a new instance taking its instance id over, refused with UNRELEASED_INSTANCE_ID (111) while
the instance's member is live, as on Kafka: tests/coordinator/test_consumer_static.py)."""
# ruff: noqa: F811 - the tests take the java_members fixture imported from test_static_java
from __future__ import annotations

import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.integration.test_consumer_protocol import Member
from tests.integration.test_consumer_protocol_java import CONSUMER, owned
from tests.integration.test_static_java import dump_all, java_members  # noqa: F401 - java_members: fixture
from tests.support.groups import wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)) as s:
        s.call(s.server.topics.create, "t", 6)
        yield s


def settled(server, gid: str, clients: dict, partitions: int = 6) -> tuple[int, dict[str, list[int]]]:
    """The group Stable with these members (by client id: a function giving the client's partitions), every
    partition held once, each client's the server's; (group epoch, {client id: partitions})."""
    def ok():
        v = server.group(gid)
        if v is None or v.state != "Stable" or len(v.members) != len(clients):
            return None
        mine = {c: sorted(f()) for c, f in clients.items()}
        served = {m.client_id: (m.assignment or {}).get("t", []) for m in v.members}
        if served != mine or sorted(p for ps in mine.values() for p in ps) != list(range(partitions)):
            return None
        return v.generation, mine
    return wait_for(ok, 60, f"group {gid} to settle")


def fence_once(server) -> None:
    """The next ConsumerGroupHeartbeat (of whichever member sends one first) is answered 110."""
    server.faults.fail("ConsumerGroupHeartbeat", "FENCED_MEMBER_EPOCH", count=1)


def wait_used(server) -> None:
    deadline = time.monotonic() + 20
    while server.faults.rules() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.faults.rules() == []


def test_confluent_member_fenced_rejoins_under_its_member_id(server):
    members = [Member(server.bootstrap, "rj", "t", None, f"c{n}").start() for n in range(2)]
    try:
        clients = {m.name: m.owned for m in members}
        epoch, before = settled(server, "rj", clients)
        ids = {m.client_id: m.member_id for m in server.group("rj").members}
        marks = [len(m.revoked) for m in members]
        fence_once(server)
        wait_used(server)
        time.sleep(1)
        assert settled(server, "rj", clients) == (epoch, before)
        after = server.group("rj")
        assert {m.client_id: m.member_id for m in after.members} == ids
        assert after.generation == epoch and after.rebalances == 2             # the two joins, nothing more
        lost = {m.name: m.revoked[mark:] for m, mark in zip(members, marks, strict=True) if m.revoked[mark:]}
        assert len(lost) == 1 and [[set(before[n])] for n in lost] == list(lost.values()), lost
    finally:
        for m in members:
            m.stop()


@pytest.mark.java
def test_java_member_fenced_rejoins_under_its_member_id(server, java_members):
    members = [java_members(f"j{n}", server.bootstrap, "jrj", "t", None, **CONSUMER) for n in range(2)]
    clients = {m.name: (lambda m=m: owned(m)) for m in members}
    epoch, before = settled(server, "jrj", clients)
    ids = {m.client_id: m.member_id for m in server.group("jrj").members}
    marks = [m.mark() for m in members]
    fence_once(server)
    wait_used(server)
    time.sleep(1)
    assert settled(server, "jrj", clients) == (epoch, before)
    after = server.group("jrj")
    assert {m.client_id: m.member_id for m in after.members} == ids and after.generation == epoch
    lost = [m for m, mark in zip(members, marks, strict=True)
            if [e for e in m.callbacks(mark) if e["type"] == "lost" and e["partitions"]]]
    assert len(lost) == 1, dump_all(members)
