"""Large requests with real clients: a describe of thousands of group ids is decoded on a worker thread, answered
in chunks of 250 ids with a loop turn between them and encoded on a worker thread (docs/limits.md, "Large
requests"), and the clients get the same answers as for a small request; meanwhile other clients are served.

- kafka-python's KafkaAdminClient: one DescribeGroups of 6,000 ids (3 groups that exist, repeats);
- Java kafka-clients 4.3 Admin (tests/java/AdminOps.java describe-many): describeConsumerGroups of 6,000 ids -
  one ConsumerGroupDescribe, then one DescribeGroups for the ids that are no consumer groups;
- a confluent-kafka producer is answered while a DescribeGroups of 60,000 ids is in the server (before its answer);
- two confluent-kafka KIP-848 consumers subscribing the same 3,000 names (one shared subscription server-side).
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient

from tests.support.java import run_java

pytestmark = pytest.mark.timeout(180)

EXISTING = ["big-a", "big-b", "big-c"]


def commit(server, group: str) -> None:
    """A classic group with a committed offset and no members (state Empty), through kafka-python's consumer."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c.commit({TopicPartition("big-t", 0): OffsetAndMetadata(1, "", -1)})
    finally:
        c.close()


@pytest.mark.tenure(topics={"big-t": 1})
def test_kafka_python_describes_six_thousand_groups_in_one_request(tenure_server):
    for g in EXISTING:
        commit(tenure_server, g)
    ids = [f"none-{i:05d}" for i in range(6000)] + EXISTING + ["none-00007", EXISTING[0]]
    admin = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap, request_timeout_ms=60000)
    try:
        got = admin.describe_groups(ids, group_coordinator_id=0)
    finally:
        admin.close()
    assert len(got) == 6003
    for g in EXISTING:
        assert got[g]["error"] is None and got[g]["group_state"] == "Empty" and got[g]["members"] == []
    dead = {g: d for g, d in got.items() if g not in EXISTING}
    assert all(d["error"] is not None and "GroupIdNotFound" in d["error"] for d in dead.values()), \
        next(iter(dead.values()))
    # one request, answered as one: the capture keeps one DescribeGroups naming all of them
    [ex] = tenure_server.requests(api="DescribeGroups")
    assert len(ex.request.groups) == len(ids) and len(ex.response.groups) == 6003


@pytest.mark.java
@pytest.mark.tenure(topics={"big-t": 1})
def test_java_admin_describes_six_thousand_groups(tenure_server):
    for g in EXISTING:
        commit(tenure_server, g)
    [out] = run_java("AdminOps", tenure_server.bootstrap, "describe-many", "none-", 6000, *EXISTING, timeout=150)
    assert out["asked"] == 6003
    assert out["states"] == {g: "Empty" for g in EXISTING}
    assert out["errors"] == {"GroupIdNotFoundException": 6000}
    [cgd] = tenure_server.requests(api="ConsumerGroupDescribe")
    assert len(cgd.request.group_ids) == 6003 and len(cgd.response.groups) == 6003
    [dg] = tenure_server.requests(api="DescribeGroups")         # the ones that are no consumer groups, classic
    assert len(dg.request.groups) == 6003


@pytest.mark.tenure(topics={"canary": 1})
def test_a_producer_is_answered_while_a_describe_of_sixty_thousand_ids_is_served(tenure_server):
    """The producer's request reaches the server once the describe is in it (a hook on the describe signals it),
    and its answer leaves before the describe's (the capture's read time plus duration: when each answer was
    written)."""
    ids = [f"none-{i:05d}" for i in range(60000)]
    p = Producer({"bootstrap.servers": tenure_server.bootstrap, "linger.ms": 0})
    assert p.list_topics(timeout=15) is not None            # connected and warm before the describe starts
    admin = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap, request_timeout_ms=120000)
    in_server = threading.Event()

    def seen(call):
        if len(call.request.groups) == len(ids):
            in_server.set()
        return None
    described: dict = {}
    t = threading.Thread(target=lambda: described.update(admin.describe_groups(ids, group_coordinator_id=0)))
    with tenure_server.on_request("DescribeGroups", seen):
        t.start()
        try:
            assert in_server.wait(60)
            delivered = []
            p.produce("canary", b"x", on_delivery=lambda err, msg: delivered.append(err))
            assert p.flush(60) == 0 and delivered == [None]
        finally:
            t.join(150)
            admin.close()
    assert len(described) == 60000 and all(d["error"] for d in described.values())
    [describe] = tenure_server.requests(api="DescribeGroups")
    [produce] = tenure_server.requests(api="Produce")

    def answered_at(e) -> float:          # when its answer was written: read, plus its duration (set once written)
        return e.received + e.duration_ms / 1000.0
    # read after the describe, answered before the describe's answer was written (the capture's sequence number
    # is taken when a handler returns, before a heavy answer is encoded off the loop: not the answer's order)
    assert describe.received < produce.received and answered_at(produce) < answered_at(describe), (produce, describe)


def test_confluent_kip848_members_subscribing_three_thousand_names_share_them_and_split_the_one_that_exists():
    """Two static confluent-kafka consumers (group.protocol=consumer) subscribe to the same 3,000 names, one of them a
    topic of 4 partitions: each joins with its whole list (the capture shows it), the group takes the one topic
    that exists, two partitions each, and a ConsumerGroupDescribe shows both subscriptions whole."""
    from tenure.config import ServerConfig
    from tenure.protocol.consumer_group import ConsumerGroupDescribeRequest
    from tenure.server import ServerThread
    from tests.integration.test_consumer_protocol import Member, settled
    from tests.support.wire import WireClient

    names = ["wide-t"] + [f"wide-none-{i:04d}" for i in range(2999)]

    class Wide(Member):
        def _run(self) -> None:
            from confluent_kafka import Consumer
            try:
                c = Consumer(self.conf)
                c.subscribe(names, on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
                try:
                    while not self._stop.is_set():
                        c.poll(0.05)
                finally:
                    c.close()
            except BaseException as exc:
                self.crash = exc

    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=200)) as s:
        s.call(lambda: s.server.topics.create("wide-t", 4))
        members = [Wide(s.bootstrap, "wide-g", "wide-t", f"wi{i}", f"w{i}").start() for i in range(2)]
        try:
            _, owned = settled(s, "wide-g", members, 4)
            assert sorted(len(ps) for ps in owned.values()) == [2, 2]
            joins = [e for e in s.requests(api="ConsumerGroupHeartbeat")
                     if e.request.subscribed_topic_names is not None]
            assert joins and all(sorted(e.request.subscribed_topic_names) == sorted(names) for e in joins)
            with WireClient.to(s.bootstrap) as c:
                got = c.call(ConsumerGroupDescribeRequest(group_ids=["wide-g"], include_authorized_operations=False), 0)
            [g] = got.groups
            assert [sorted(m.subscribed_topic_names) for m in g.members] == [sorted(names)] * 2
        finally:
            for m in members:
                m.stop()


@pytest.mark.parametrize("big", ["OffsetFetch", "ListOffsets"])
@pytest.mark.tenure(topics={"canary": 1, "wide-t": 10000})
def test_a_producer_is_answered_between_the_turns_of_a_huge_offset_fetch_or_list_offsets(tenure_server, big):
    """kafka-python's admin fetches a group's offsets for 90,000 partitions (one OffsetFetch v8), or its consumer
    asks the end offsets of a topic's 10,000 partitions (one ListOffsets): answered 1,000 partitions per loop turn.
    The hook on the big request holds the loop until a confluent-kafka producer has sent a Produce, so that Produce
    is waiting when the big request's handling starts: it is handled between two turns, while the big request's
    handler still runs (its answer not made yet: the big request's `on_response` has not run) - in one pass it
    would be handled only after the handler returned - and is answered before the big answer."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    wide = [TopicPartition("wide-t", i) for i in range(10000)]
    p = Producer({"bootstrap.servers": tenure_server.bootstrap, "linger.ms": 0})
    assert p.list_topics(timeout=15) is not None            # connected and warm before the big request starts
    delivered: list = []
    for i in (0, 9999):                                     # two partitions with records: end offsets 1
        p.produce("wide-t", b"r", partition=i, on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(30) == 0 and delivered == [None, None]
    admin = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap, request_timeout_ms=120000)
    consumer = KafkaConsumer(bootstrap_servers=tenure_server.bootstrap, request_timeout_ms=120000)
    admin.alter_group_offsets("wide-g", {wide[7]: OffsetAndMetadata(1, "m", -1)})
    in_server, produced, big_answered = threading.Event(), threading.Event(), threading.Event()
    produce_seen: list[bool] = []                            # at each Produce: was the big answer made already?

    def answered(response):
        big_answered.set()
        return response

    def hold(call):                                          # runs on the server's loop: holds it meanwhile
        call.on_response(answered)
        in_server.set()
        assert produced.wait(60)
        time.sleep(0.5)                                      # the Produce's bytes reach the server's socket
        return None

    def seen(call):
        produce_seen.append(big_answered.is_set())
        return None
    got: dict = {}
    if big == "OffsetFetch":
        asked = wide + [TopicPartition("none-t", i) for i in range(80000)]
        work = lambda: got.update(admin.list_group_offsets({"wide-g": asked})["wide-g"])  # noqa: E731
    else:
        work = lambda: got.update(consumer.end_offsets(wide))  # noqa: E731
    t = threading.Thread(target=work)
    try:
        with tenure_server.on_request(big, hold), tenure_server.on_request("Produce", seen, topic="canary"):
            t.start()
            assert in_server.wait(60)
            delivered.clear()
            p.produce("canary", b"x", on_delivery=lambda err, msg: delivered.append(err))
            p.poll(0)
            produced.set()
            assert p.flush(60) == 0 and delivered == [None]
            t.join(150)
    finally:
        admin.close()
        consumer.close()
    if big == "OffsetFetch":
        assert len(got) == 90000 and got[wide[7]].offset == 1 and got[wide[7]].metadata == "m"
        assert {m.offset for tp, m in got.items() if tp != wide[7]} == {-1}
    else:
        assert len(got) == 10000 and got[wide[0]] == got[wide[9999]] == 1 and set(got.values()) == {0, 1}
    assert produce_seen == [False] and big_answered.is_set()   # handled while the big handler was running
    request = [e for e in tenure_server.requests(api=big) if e.outcome == "answered"][-1]
    produce = tenure_server.requests(api="Produce")[-1]
    assert produce.seq < request.seq, (produce, request)
