"""Regular-expression subscriptions resolved on the server (KIP-848 `SubscribedTopicRegex`) with real clients:
confluent-kafka 2.16 subscribing to `^orders-.*` with group.protocol=consumer here, Java kafka-clients 4.3's
`subscribe(SubscriptionPattern)` in test_consumer_regex_java.py.

Two members share the matching topics; a new matching topic is assigned with exactly one group-epoch bump
once the coordinator resolves the expression again (never within 10 s of its last resolution: the test moves
the coordinator's clock past that with `advance_clock`), a topic that does not match changes nothing, and a
deleted matching topic is revoked with one bump; an invalid expression is INVALID_REGULAR_EXPRESSION (128)
with Kafka's message, and the server serves on."""
from __future__ import annotations

import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.coordinator.consumer.regex import REFRESH_MIN_INTERVAL_MS
from tenure.server import ServerThread
from tests.support.groups import wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)) as s:
        yield s


class RegexMember:
    """A confluent-kafka consumer (group.protocol=consumer) subscribed to a pattern, polling on its own thread;
    its (topic, partition)s from the incremental assign/revoke callbacks."""

    def __init__(self, bootstrap: str, group: str, pattern: str, name: str) -> None:
        self.name = name
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "topic.metadata.refresh.interval.ms": 500, "error_cb": self.errors_append}
        self.pattern = pattern
        self.owned: set[tuple[str, int]] = set()
        self.errors: list = []
        self.callbacks = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"re-{name}")
        self.crash: BaseException | None = None

    def errors_append(self, err) -> None:
        self.errors.append(err)

    def _assign(self, consumer, parts) -> None:
        with self._lock:
            self.owned |= {(p.topic, p.partition) for p in parts}
            self.callbacks += 1

    def _revoke(self, consumer, parts) -> None:
        with self._lock:
            self.owned -= {(p.topic, p.partition) for p in parts}
            self.callbacks += 1

    def _run(self) -> None:
        from confluent_kafka import Consumer
        try:
            c = Consumer(self.conf)
            c.subscribe([self.pattern], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
            try:
                while not self._stop.is_set():
                    msg = c.poll(0.05)
                    if msg is not None and msg.error() is not None:
                        self.errors.append(msg.error())
            finally:
                c.close()
        except BaseException as exc:      # reported to the test
            self.crash = exc

    def start(self) -> RegexMember:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name}: close() did not finish"

    def mine(self) -> frozenset[tuple[str, int]]:
        with self._lock:
            return frozenset(self.owned)


def settled(server, gid: str, members: list[RegexMember], expected: set[tuple[str, int]]):
    """The group Stable, the members together owning exactly `expected` once each, as the server says; its
    epoch."""
    def ok():
        for m in members:
            assert m.crash is None, f"{m.name}: {m.crash!r}"
        v = server.group(gid)
        if v is None or v.state != "Stable" or len(v.members) != len(members):
            return None
        mine = [m.mine() for m in members]
        if sorted(tp for ps in mine for tp in ps) != sorted(expected):
            return None
        served = {frozenset((t, p) for t, ps in (mm.assignment or {}).items() for p in ps) for mm in v.members}
        return v.generation if served == set(mine) else None
    return wait_for(ok, 60, f"group {gid} to hold {sorted(expected)}")


def parts(*topics: tuple[str, int]) -> set[tuple[str, int]]:
    return {(t, p) for t, n in topics for p in range(n)}


def test_confluent_regex_subscription_follows_created_and_deleted_topics(server):
    topics = server.server.topics
    for name in ("orders-eu", "orders-us", "payments"):
        server.call(topics.create, name, 2)
    members = [RegexMember(server.bootstrap, "rg", "^orders-.*", f"c{n}").start() for n in range(2)]
    try:
        epoch = settled(server, "rg", members, parts(("orders-eu", 2), ("orders-us", 2)))
        v = server.group("rg")
        assert {m.member_id for m in v.members} and all(
            mm.assignment is not None for mm in v.members)
        # a new matching topic: assigned once the coordinator resolves again (10 s after its last resolution)
        server.call(topics.create, "orders-asia", 2)
        server.call(topics.create, "payments-asia", 2)           # does not match
        server.advance_clock(REFRESH_MIN_INTERVAL_MS + 1)
        after = settled(server, "rg", members, parts(("orders-eu", 2), ("orders-us", 2), ("orders-asia", 2)))
        assert after == epoch + 1
        time.sleep(1)                                           # five heartbeat intervals: no further bump
        assert server.group("rg").generation == epoch + 1
        assert server.group("rg").rebalance_causes.get("consumer regex resolution changed") == 1
        # a deleted matching topic is revoked with one bump (the metadata hash: it is gone)
        server.call(topics.delete, "orders-us")
        gone = settled(server, "rg", members, parts(("orders-eu", 2), ("orders-asia", 2)))
        assert gone == epoch + 2
        for m in members:
            assert m.crash is None and not [e for e in m.errors if e.fatal()], m.errors
    finally:
        for m in members:
            m.stop()


def test_an_invalid_regex_gets_kafkas_error_and_the_server_serves_on(server):
    """A raw ConsumerGroupHeartbeat v1 with an expression RE2/J refuses: 128 and Kafka's message; nothing of
    the group is created and a valid one joins next."""
    from tenure.protocol.consumer_group import ConsumerGroupHeartbeatRequest
    from tests.support.wire import WireClient
    server.call(server.server.topics.create, "orders-eu", 1)

    def join(regex: str):
        with WireClient.to(server.bootstrap) as w:
            return w.call(ConsumerGroupHeartbeatRequest(
                group_id="bad", member_id="m-1", member_epoch=0, instance_id=None, rack_id=None,
                rebalance_timeout_ms=30000, subscribed_topic_names=[], subscribed_topic_regex=regex,
                server_assignor=None, topic_partitions=[]), 1)
    r = join("orders-(")
    assert (r.error_code, r.error_message) == (
        128, "SubscribedTopicRegex `orders-(` is not a valid regular expression: missing closing ).")
    assert server.group("bad") is None
    r = join("orders-.*")
    assert r.error_code == 0 and r.member_epoch == 1
    assert [len(t.partitions) for t in r.assignment.topic_partitions] == [1]


def test_metadata_by_topic_id_with_an_empty_name_as_java_asks_it(server):
    """Java's consumer learns the names of the topics an expression was resolved to with Metadata v12 by topic
    id, its name left at its default "" (not null): answered by the id. Before this, tenure took "" for a name,
    answered INVALID_TOPIC_EXCEPTION (17), and a Java `SubscriptionPattern` member never got its partitions."""
    from kafka.protocol.metadata import MetadataRequest

    from tests.support.wire import WireClient
    topic = server.call(server.server.topics.create, "orders-eu", 2)
    T = MetadataRequest.MetadataRequestTopic
    with WireClient.to(server.bootstrap) as w:
        r = w.call(MetadataRequest(topics=[T(name="", topic_id=topic.topic_id)], allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False), 12)
        (t,) = r.topics
        assert (t.error_code, t.name, t.topic_id, len(t.partitions)) == (0, "orders-eu", topic.topic_id, 2)
        # a name that is "" with no id is still an invalid topic name
        r = w.call(MetadataRequest(topics=[T(name="", topic_id=None)], allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False), 12)
        assert r.topics[0].error_code == 17


def test_a_moved_coordinator_loads_the_resolutions_and_carries_on():
    """Three brokers: the group's coordinator moves to another broker; the new one loads the group - the
    regular expression's resolution (record type 16) with it - and the members carry on in the same epoch;
    a new matching topic is then assigned with one bump."""
    with ServerThread(brokers=3, consumer_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0) as st:
        for name in ("orders-eu", "orders-us"):
            st.call(st.server.topics.create, name, 2)
        members = [RegexMember(st.bootstrap, "mg", "^orders-.*", f"c{n}").start() for n in range(2)]
        try:
            epoch = settled(st, "mg", members, parts(("orders-eu", 2), ("orders-us", 2)))
            before = st.call(lambda: st.server.runtime.group("mg").regexes)
            assert [r.topics for r in before.values()] == [{"orders-eu", "orders-us"}], before
            to = (st.coordinator_of("mg") + 1) % 3
            st.move_coordinator("mg", to)
            assert st.coordinator_of("mg") == to
            assert st.call(lambda: st.server.runtime.group("mg").regexes) == before
            time.sleep(1)                                       # heartbeats to the new coordinator
            assert settled(st, "mg", members, parts(("orders-eu", 2), ("orders-us", 2))) == epoch
            st.call(st.server.topics.create, "orders-asia", 2)
            st.advance_clock(REFRESH_MIN_INTERVAL_MS + 1)
            assert settled(st, "mg", members, parts(("orders-eu", 2), ("orders-us", 2), ("orders-asia", 2))) \
                == epoch + 1
        finally:
            for m in members:
                m.stop()


def test_confluent_mixes_names_and_expressions_like_librdkafkas_0033(server):
    """librdkafka's 0033 subscribes to expressions and a literal name together: it sends the name and its
    expressions joined into one, and the member subscribes to both (Kafka refuses neither); subscribing again
    to the name alone drops the expression (its resolution tombstoned)."""
    from confluent_kafka import Consumer
    for name in ("rga-1", "rgb-1", "lit", "other"):
        server.call(server.server.topics.create, name, 1)
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "mix", "group.protocol": "consumer",
                  "enable.auto.commit": False})
    try:
        c.subscribe(["^rga-.*", "lit", "^rgb-.*"])
        wait_for(lambda: (c.poll(0.05), {tp.topic for tp in c.assignment()} == {"rga-1", "rgb-1", "lit"})[1], 30,
                 "the three topics")
        member = server.call(lambda: next(iter(server.server.runtime.group("mix").members.values())))
        assert member.subscribed_topic_names == ("lit",)
        assert member.subscribed_topic_regex == "(^rga-.*)|(^rgb-.*)"
        c.subscribe(["lit"])
        wait_for(lambda: (c.poll(0.05), {tp.topic for tp in c.assignment()} == {"lit"})[1], 30, "lit alone")
        wait_for(lambda: server.call(lambda: server.server.runtime.group("mix").regexes) == {}, 10,
                 "the resolution tombstoned")
        assert {m.member_id for m in server.group("mix").members} == {member.member_id}
    finally:
        c.close()
