"""Regular-expression subscriptions with Java kafka-clients 4.3 (`group.protocol=consumer`):
`subscribe(SubscriptionPattern)` sends the RE2/J expression for the coordinator to resolve (the KIP-848 way);
two members share the matching topics, a new matching topic is assigned with exactly one group-epoch bump once
the coordinator resolves again (the test moves its clock past Kafka's 10 s minimum with `advance_clock`); a
member gives a deleted one up with one bump. `subscribe(java.util.regex.Pattern)` on the same protocol is resolved by
the client itself, which sends topic names: the server sees names, never an expression."""
# ruff: noqa: F811 - the tests take the java_members fixture imported from test_static_java
from __future__ import annotations

import time

import pytest

from tenure.config import ServerConfig
from tenure.coordinator.consumer.regex import REFRESH_MIN_INTERVAL_MS
from tenure.server import ServerThread
from tests.integration.test_static_java import dump_all, java_members  # noqa: F401 - java_members: fixture

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]

CONSUMER = {"group_protocol": "consumer"}


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)) as s:
        yield s


def owned(member) -> set[tuple[str, int]]:
    """The member's (topic, partition)s from its callbacks (the consumer protocol's are incremental)."""
    have: set[tuple[str, int]] = set()
    for e in member.callbacks():
        tps = {(tp["topic"], tp["partition"]) for tp in e["topic_partitions"]}
        have = have | tps if e["type"] == "assigned" else have - tps
    return have


def parts(**topics: int) -> set[tuple[str, int]]:
    return {(t, p) for t, n in topics.items() for p in range(n)}


def settled(st, gid: str, members, expected: set[tuple[str, int]], timeout: float = 90) -> int:
    """The group Stable with these members together holding `expected` once each, each client's the server's;
    the group epoch."""
    deadline = time.monotonic() + timeout
    v = None
    while time.monotonic() < deadline:
        v = st.group(gid)
        if v is not None and v.state == "Stable" and len(v.members) == len(members):
            mine = [owned(m) for m in members]
            served = {frozenset((t, p) for t, ps in (mm.assignment or {}).items() for p in ps) for mm in v.members}
            if sorted(tp for ps in mine for tp in ps) == sorted(expected) and served == {frozenset(x) for x in mine}:
                return v.generation
        time.sleep(0.2)
    raise AssertionError(f"group {gid} not settled on {sorted(expected)}: {v}\n{dump_all(members)}")


def test_java_subscription_pattern_follows_created_and_deleted_topics(server, java_members):
    topics = server.server.topics
    for name in ("orders-eu", "orders-us", "payments"):
        server.call(topics.create, name, 2)
    members = [java_members(f"j{n}", server.bootstrap, "jg", "re2:orders-.*", f"i{n}", **CONSUMER)
               for n in range(2)]
    epoch = settled(server, "jg", members, parts(**{"orders-eu": 2, "orders-us": 2}))
    v = server.group("jg")
    assert server.call(lambda: {m.subscribed_topic_regex for m in server.server.runtime.group("jg").members.values()
                                }) == {"orders-.*"}, v
    server.call(topics.create, "orders-asia", 2)
    server.call(topics.create, "payments-asia", 2)
    server.advance_clock(REFRESH_MIN_INTERVAL_MS + 1)
    after = settled(server, "jg", members, parts(**{"orders-eu": 2, "orders-us": 2, "orders-asia": 2}))
    assert after == epoch + 1
    time.sleep(1)
    assert server.group("jg").generation == epoch + 1
    assert not [e for m in members for e in m.events if e["type"] == "error"], dump_all(members)


def test_java_subscription_pattern_member_gives_a_deleted_topic_up(server, java_members):
    """A deleted matching topic is revoked with one bump. (One member: with two, the hand-over of a partition
    between them right after a deletion sometimes left a Java member without the partition the coordinator
    had given it - see docs/consumer-groups.md, client notes.)"""
    topics = server.server.topics
    for name in ("orders-eu", "orders-us"):
        server.call(topics.create, name, 2)
    members = [java_members("j0", server.bootstrap, "jd", "re2:orders-.*", "i0", **CONSUMER)]
    epoch = settled(server, "jd", members, parts(**{"orders-eu": 2, "orders-us": 2}))
    server.call(topics.delete, "orders-us")
    assert settled(server, "jd", members, parts(**{"orders-eu": 2})) == epoch + 1
    revoked = [e for e in members[0].callbacks() if e["type"] == "revoked"]
    assert [tp["topic"] for e in revoked for tp in e["topic_partitions"]] == ["orders-us", "orders-us"]


def test_java_pattern_is_resolved_by_the_client_and_sent_as_names(server, java_members):
    for name in ("orders-eu", "payments"):
        server.call(server.server.topics.create, name, 2)
    (m,) = [java_members("jp", server.bootstrap, "jp", "pattern:orders-.*", "i0", **CONSUMER)]
    settled(server, "jp", [m], parts(**{"orders-eu": 2}))
    member = server.call(lambda: next(iter(server.server.runtime.group("jp").members.values())))
    assert (member.subscribed_topic_regex, member.subscribed_topic_names) == (None, ("orders-eu",))
    assert server.call(lambda: server.server.runtime.group("jp").regexes) == {}
