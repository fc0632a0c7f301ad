"""Regular-expression subscriptions with Java kafka-clients 4.3 (`group.protocol=consumer`):
`subscribe(SubscriptionPattern)` sends the RE2/J expression for the coordinator to resolve (the KIP-848 way);
two members share the matching topics, a new matching topic is assigned with exactly one group-epoch bump once
the coordinator resolves again (the test moves its clock past Kafka's 10 s minimum with `advance_clock`); a
member gives a deleted one up with one bump. `subscribe(java.util.regex.Pattern)` on the same protocol is resolved by
the client itself, which sends topic names: the server sees names, never an expression."""
# ruff: noqa: F811 - the tests take the java_members fixture imported from test_static_java
from __future__ import annotations

import base64
import time
import uuid

import pytest

from tenure.config import ServerConfig
from tenure.coordinator.consumer.regex import REFRESH_MIN_INTERVAL_MS
from tenure.server import ServerThread
from tests.integration.test_static_java import dump_all, java_members  # noqa: F401 - java_members: fixture
from tests.support.java import run_java
from tests.support.wire import WireClient

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
    """A deleted matching topic is revoked with one bump. (One member: with two, a member that is then given a
    partition of a topic it never held can stay without it for good - Java 4.3's own metadata cache breaks on
    Kafka's answer for the deleted topic's id; see the test below and docs/consumer-groups.md, client notes.)"""
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


def _java_id(topic_id: uuid.UUID) -> str:
    """Kafka's string form of a topic id (Uuid.toString: URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def test_metadata_by_a_deleted_topic_id_answers_as_kafka_and_java_4_3_cannot_take_that_answer(server):
    """Why a Java `SubscriptionPattern` member sometimes never takes a partition after a matching topic is deleted.

    Such a member asks Metadata by the ids of its assignment's topics; asked right after a deletion (its fetch of
    the deleted topic fails first), the answer names the deleted id with UNKNOWN_TOPIC_ID (100) and a null name -
    tenure's answer, and Kafka's (KafkaApis answers an unknown topic id so). kafka-clients 4.3's Metadata.update
    puts that null name in its id -> name map and throws a NullPointerException (MetadataSnapshot's
    Collectors.toMap); its NetworkClient then never clears the request it thinks is still in flight, so the
    consumer sends no Metadata request again. A member then given a partition of a topic it has never held cannot
    learn that topic's name: it heartbeats in a loop (acknowledging the part it can resolve, Java's
    AbstractMembershipManager.maybeReconcile) and never takes the partition. This pins tenure's side (Kafka's
    answer, through Java's own request, parser and cache) and the client's failure on it; the same answer without
    the deleted id updates the cache."""
    topics = server.server.topics
    for name in ("orders-eu", "orders-us"):
        server.call(topics.create, name, 2)
    eu, us = (server.call(lambda n=n: topics.get(n).topic_id) for n in ("orders-eu", "orders-us"))
    server.call(topics.delete, "orders-us")
    with WireClient.to(server.bootstrap) as w:             # the wire answer, as any client reads it
        from kafka.protocol.metadata import MetadataRequest as M
        r = w.call(M(topics=[M.MetadataRequestTopic(topic_id=t, name=None) for t in (eu, us)],
                     allow_auto_topic_creation=False), 12)
        assert sorted((str(t.topic_id), t.name, t.error_code) for t in r.topics) == sorted(
            [(str(eu), "orders-eu", 0), (str(us), None, 100)])
    lines = run_java("MetadataByTopicId", server.bootstrap, _java_id(eu), _java_id(us))
    answered = sorted((x["topic_id"], x["name"], x["error"]) for x in lines if x["type"] == "topic")
    assert answered == sorted([(_java_id(eu), "orders-eu", "NONE"), (_java_id(us), None, "UNKNOWN_TOPIC_ID")])
    assert [x for x in lines if x["type"] == "update"] == [
        {"type": "update", "outcome": "java.lang.NullPointerException", "at": "org.apache.kafka.clients.MetadataSnapshot.<init>"}]
    lines = run_java("MetadataByTopicId", server.bootstrap, _java_id(eu))
    assert [x for x in lines if x["type"] == "update"] == [{"type": "update", "outcome": "ok", "names": ["orders-eu"]}]
