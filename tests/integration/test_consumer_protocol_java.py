"""KIP-848 consumer groups with Java kafka-clients 4.3 (`group.protocol=consumer`): static members on 12
partitions form a group; a rolling restart of every member (close() sends epoch -2 for a static member,
then a new JVM with the same group.instance.id) makes no group-epoch bump, calls no revocation on the
others, and gives each member its partitions back; a duplicate instance id fails with
UnreleasedInstanceIdException (111); offsets committed with OffsetCommit v9 (the member epoch) come back;
a SIGKILLed static member's session expired now (`expire_session`, its admin route, `tenure fault expire`)
fences it with one epoch bump and the others take its partitions."""
# ruff: noqa: F811 - the tests take the java_members fixture imported from test_static_java
from __future__ import annotations

import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.integration.test_static_java import dump_all, java_members  # noqa: F401 - java_members: fixture
from tests.support.expire import SURFACES, expire

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]

PARTITIONS = 12
CONSUMER = {"group_protocol": "consumer"}


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)) as s:
        yield s


def owned(member) -> list[int]:
    """The member's partitions from its callbacks (the consumer protocol's are incremental)."""
    have: set[int] = set()
    for e in member.callbacks():
        if e["type"] == "assigned":
            have |= set(e["partitions"])
        else:
            have -= set(e["partitions"])
    return sorted(have)


def settled(st, gid: str, members, timeout: float = 90):
    return settled_n(st, gid, members, PARTITIONS, timeout)


def settled_n(st, gid: str, members, partitions: int, timeout: float = 90):
    """The group Stable with these members, every partition held once, each client's the server's."""
    deadline = time.monotonic() + timeout
    v = None
    while time.monotonic() < deadline:
        v = st.group(gid)
        if v is not None and v.state == "Stable" and len(v.members) == len(members):
            mine = {m.instance: owned(m) for m in members}
            served = {k: (a or {}).get("t", []) for k, a in v.assignments.items()}
            if mine == served and sorted(p for ps in mine.values() for p in ps) == list(range(partitions)):
                return v.generation, mine
        time.sleep(0.2)
    raise AssertionError(f"group {gid} not settled: {v}\n{dump_all(members)}")


def test_java_static_members_rolling_restart_and_duplicate(server, java_members):
    server.call(server.server.topics.create, "t", PARTITIONS)
    members = [java_members(f"j{n}", server.bootstrap, "g", "t", f"i{n}", **CONSUMER) for n in range(3)]
    epoch, before = settled(server, "g", members)
    assert all(len(ps) == 4 for ps in before.values()), before
    marks = [m.mark() for m in members]
    for n in range(len(members)):
        old = members[n]
        assert old.close() == 0
        assert server.group("g").member(old.instance).member_epoch == -2 and server.group("g").generation == epoch
        members[n] = java_members(f"j{n}r", server.bootstrap, "g", "t", old.instance, **CONSUMER)
        marks[n] = 0
        assert settled(server, "g", members) == (epoch, before)
    for m, mark in zip(members, marks, strict=True):
        assert [e for e in m.callbacks(mark) if e["type"] in ("revoked", "lost") and e["partitions"]] == [], m.dump()
    # a duplicate of a live instance is refused: UnreleasedInstanceIdException, nothing changes
    dup = java_members("dup", server.bootstrap, "g", "t", "i0", **CONSUMER)
    e = dup.wait_type("error", 60)
    assert e["root_exception"] == "org.apache.kafka.common.errors.UnreleasedInstanceIdException", e
    assert settled(server, "g", members) == (epoch, before)
    # OffsetCommit v9 carries the member epoch
    done = members[0].commit()
    assert done["type"] == "committed", done


def test_java_admin_describes_and_lists_and_create_partitions_bumps_once(server, java_members):
    """The Admin client describes a consumer group with ConsumerGroupDescribe (69) and lists it as a
    CONSUMER group; CreatePartitions makes exactly one epoch bump and the members get the new partitions."""
    from tests.integration.test_static_java import admin
    server.call(server.server.topics.create, "t", 6)
    members = [java_members(f"j{n}", server.bootstrap, "g", "t", f"i{n}", **CONSUMER) for n in range(2)]
    epoch, before = settled_n(server, "g", members, 6)
    (d,) = admin(server.bootstrap, "describe", "g")
    assert (d["state"], d["assignor"], d["simple"]) == ("Stable", "uniform", False)
    assert {m["instance_id"]: m["partitions"] for m in d["members"]} == before
    (listed,) = admin(server.bootstrap, "list-groups")
    assert {g["group"]: (g["type"], g["state"]) for g in listed["groups"]}["g"] == ("Consumer", "Stable")
    (done,) = admin(server.bootstrap, "create-partitions", "t", "10")
    assert done["type"] == "partitions_created", done
    after, assignment = settled_n(server, "g", members, 10)
    assert after == epoch + 1 and all(len(ps) == 5 for ps in assignment.values()), assignment
    time.sleep(1)
    assert server.group("g").generation == epoch + 1


@pytest.fixture
def admin_server():
    with ServerThread(ServerConfig(port=0, admin_port=0, consumer_heartbeat_interval_ms=300,
                                   initial_rebalance_delay_ms=0)) as s:
        yield s


@pytest.mark.parametrize("surface", SURFACES)
def test_java_killed_static_members_session_expired_now_hands_its_partitions_over_in_one_bump(
        admin_server, java_members, surface):
    """A static member's JVM is SIGKILLed (no leave: its heartbeats just stop); instead of waiting out its
    session (45 s), its session is expired now through one control surface: it is fenced at once - removed,
    one group epoch bump - and the two others own every partition at that epoch, with no further bump and
    nothing revoked from them."""
    server = admin_server
    server.call(server.server.topics.create, "t", PARTITIONS)
    others = [java_members(f"j{n}", server.bootstrap, "g", "t", f"i{n}", **CONSUMER) for n in range(2)]
    victim = java_members("jv", server.bootstrap, "g", "t", "victim", **CONSUMER)
    epoch, before = settled(server, "g", [*others, victim])
    marks = [m.mark() for m in others]
    victim.kill()
    assert server.group("g").member("victim") is not None          # its session has 45 s to run
    assert expire(server, surface, "g", "victim") is True
    v = server.group("g")
    assert (v.generation, v.member("victim"), sorted(v.static_members)) == (epoch + 1, None, ["i0", "i1"])
    after, owned = settled(server, "g", others)
    assert after == epoch + 1 and set(before["victim"]) <= {p for ps in owned.values() for p in ps}
    time.sleep(1)                                     # three heartbeat intervals: no further bump
    v = server.group("g")
    assert (v.generation, v.state, len(v.members)) == (epoch + 1, "Stable", 2)
    assert v.rebalance_causes.get("consumer member expired") == 1
    for m, mark in zip(others, marks, strict=True):
        assert [e for e in m.callbacks(mark) if e["type"] in ("revoked", "lost") and e["partitions"]] == [], m.dump()
