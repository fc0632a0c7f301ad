"""Online migration with Java kafka-clients 4.3: a static classic group of 4 (`group.protocol=classic`) rolled
member by member to `group.protocol=consumer` and back, while a producer writes and every member consumes and
commits after each poll.

Kafka's rules for static members with the same subscription (GroupMetadataManager): the first consumer-protocol
member converts the classic group (group epoch = the classic generation) and takes over its instance's member
at once, with its partitions and no epoch bump; each following one does the same; rolling back, a consumer
member closes (epoch -2) and its classic successor replaces it at once, and the last replacement converts the
group back to a Stable classic group at the same generation, again with no rebalance. So the whole roll costs
no rebalance: the test counts the server's epoch bumps and rebalances (none) and every client's revocations
(none), and checks that nothing is lost - every produced record consumed, the committed offsets at the end of
every partition."""
# ruff: noqa: F811 - the tests take the java_members fixture imported from test_static_java
from __future__ import annotations

import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.integration.test_consumer_protocol_java import owned
from tests.integration.test_static_java import dump_all, java_members  # noqa: F401 - java_members: fixture

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]

PARTITIONS = 8
CLASSIC = {"session_timeout_ms": 10000, "commit_each_poll": "true"}
CONSUMER = {"group_protocol": "consumer", "commit_each_poll": "true"}


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)) as s:
        yield s


class Producer:
    """Writes keyed records to every partition at a bounded rate until stopped (at most `limit`); keeps the
    (partition, offset) of every acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, limit: int = 4000, rate: float = 200.0) -> None:
        from confluent_kafka import Producer as CProducer
        self.p = CProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.limit, self.rate = topic, limit, rate
        self.acked: set[tuple[int, int]] = set()
        self.failed: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="migration-producer")
        self._thread.start()

    def _done(self, err, msg) -> None:
        if err is not None:
            self.failed.append(err)
        else:
            self.acked.add((msg.partition(), msg.offset()))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set() and n < self.limit:
            self.p.produce(self.topic, key=f"k{n}".encode(), value=f"v{n}".encode(), partition=n % PARTITIONS,
                           on_delivery=self._done)
            n += 1
            self.p.poll(0)
            time.sleep(1 / self.rate)
        self.p.flush(30)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.p = None                     # its client threads go with it (no reconnect logs after the server)


def settled(st: ServerThread, gid: str, members, kind: str, timeout: float = 60):
    """The group of `kind` Stable with these members, every partition held once, each client's the server's."""
    deadline = time.monotonic() + timeout
    v = None
    while time.monotonic() < deadline:
        v = st.group(gid)
        if v is not None and v.kind == kind and v.state == "Stable" and len(v.members) == len(members):
            mine = {m.instance: owned(m) for m in members}
            served = {k: (a or {}).get("t", []) for k, a in v.assignments.items()}
            if mine == served and sorted(p for ps in mine.values() for p in ps) == list(range(PARTITIONS)):
                return v.generation, mine
        time.sleep(0.2)
    raise AssertionError(f"group {gid} not settled as {kind}: {v}\n{dump_all(members)}")


def unmoved(member, mine: list[int], since: int = 0) -> bool:
    """The member was only ever given its own partitions, and gave them up (if at all) only when it closed:
    every callback is an assignment within `mine`, but for a last revocation of them at close."""
    cbs = [e for e in member.callbacks(since) if e["partitions"]]        # an empty callback moves nothing
    if cbs and cbs[-1]["type"] in ("revoked", "lost") and member.proc.poll() is not None:
        cbs = cbs[:-1]
    return all(e["type"] == "assigned" and set(e["partitions"]) <= set(mine) for e in cbs)


def test_java_static_group_rolls_to_the_consumer_protocol_and_back_without_a_rebalance(server, java_members):
    server.call(server.server.topics.create, "t", PARTITIONS)
    members = [java_members(f"c{n}", server.bootstrap, "g", "t", f"i{n}", **CLASSIC) for n in range(4)]
    gen, before = settled(server, "g", members, "classic")
    everyone = list(members)
    marks = {m.name: m.mark() for m in members}          # the roll starts here
    producer = Producer(server.bootstrap, "t")
    try:
        rebalances = server.rebalances("g")
        causes = dict(server.group("g").rebalance_causes)
        # upgrade, one member at a time: close the classic JVM (a static member sends no LeaveGroup), start a
        # consumer-protocol one with the same instance id
        for n in range(4):
            assert members[n].close() == 0
            members[n] = java_members(f"k{n}", server.bootstrap, "g", "t", f"i{n}", **CONSUMER)
            everyone.append(members[n])
            assert settled(server, "g", members, "consumer") == (gen, before), n
        # and back: close the consumer-protocol JVM (a static leave, epoch -2), start a classic one
        for n in range(4):
            assert members[n].close() == 0
            members[n] = java_members(f"r{n}", server.bootstrap, "g", "t", f"i{n}", **CLASSIC)
            everyone.append(members[n])
            kind = "classic" if n == 3 else "consumer"
            assert settled(server, "g", members, kind) == (gen, before), n
        # Kafka's rules: no rebalance anywhere in the roll, no partition ever moved
        assert server.rebalances("g") == rebalances and server.group("g").rebalance_causes == causes
        assert server.group("g").generation == gen
        for m in everyone:
            assert unmoved(m, before[m.instance], marks.get(m.name, 0)), m.dump()
    finally:
        producer.stop()
    assert not producer.failed and len(producer.acked) > 100, (len(producer.acked), producer.failed[:3])
    # nothing lost: every produced record consumed by some member, the commits at the end of every partition
    deadline = time.monotonic() + 60
    ends = {p: max(o for q, o in producer.acked if q == p) + 1 for p in range(PARTITIONS)}
    while time.monotonic() < deadline:
        consumed = {(e["partition"], e["offset"]) for m in everyone for e in m.records()}
        v = server.group("g")
        if producer.acked <= consumed and all(v.offset("t", p) == ends[p] for p in range(PARTITIONS)):
            break
        time.sleep(0.5)
    missing = producer.acked - consumed
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}\n{dump_all(members)}"
    errors = [(m.name, e) for m in everyone for e in m.events if e["type"] == "commit_error"]
    assert errors == []                     # every commit of every member accepted, classic or consumer protocol
    assert {p: v.offset("t", p) for p in range(PARTITIONS)} == ends


def settled_dynamic(st: ServerThread, gid: str, members, kind: str, timeout: float = 60) -> int:
    """As `settled`, for members without instance ids (matched by their partitions)."""
    deadline = time.monotonic() + timeout
    v = None
    while time.monotonic() < deadline:
        v = st.group(gid)
        if v is not None and v.kind == kind and v.state == "Stable" and len(v.members) == len(members):
            mine = sorted(owned(m) for m in members)
            served = sorted((a or {}).get("t", []) for a in v.assignments.values())
            if mine == served and sorted(p for ps in mine for p in ps) == list(range(PARTITIONS)):
                return v.generation
        time.sleep(0.2)
    raise AssertionError(f"group {gid} not settled as {kind}: {v}\n{dump_all(members)}")


def test_java_cooperative_classic_members_inside_a_consumer_group_give_up_only_what_moves(server, java_members):
    """Classic Java members with the cooperative-sticky assignor inside a consumer group: they report what they
    own in their subscription, so when a consumer-protocol member joins they are told to rejoin (Heartbeat:
    REBALANCE_IN_PROGRESS), revoke only the partitions that move (never all), and rejoin for the rest; the last
    consumer-protocol member leaving downgrades the group to a classic one, which rebalances once."""
    server.call(server.server.topics.create, "t", PARTITIONS)
    coop = {"partition_assignment_strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
            "session_timeout_ms": 10000}
    first = java_members("k0", server.bootstrap, "g", "t", None, **CONSUMER)
    settled_dynamic(server, "g", [first], "consumer")
    classic = [java_members(f"c{n}", server.bootstrap, "g", "t", None, **coop) for n in range(2)]
    members = [first, *classic]
    settled_dynamic(server, "g", members, "consumer")
    marks = [m.mark() for m in classic]
    held = [set(owned(m)) for m in classic]
    second = java_members("k1", server.bootstrap, "g", "t", None, **CONSUMER)
    members.append(second)
    settled_dynamic(server, "g", members, "consumer")
    gave: list[set[int]] = []
    for m, mark, had in zip(classic, marks, held, strict=True):
        revoked = [set(e["partitions"]) for e in m.callbacks(mark) if e["type"] in ("revoked", "lost")]
        assert all(r < had for r in revoked if r), m.dump()          # never everything it had
        assert set(owned(m)) & had, m.dump()                          # sticky: it kept some of its own
        gave += [r for r in revoked if r]
    assert gave, "8 partitions over 3 members then 4: a classic member holding 3 must have given one up"
    # the consumer-protocol members leave (a dynamic member's close() is a leave, -1): the last one downgrades
    assert first.close() == 0
    settled_dynamic(server, "g", [*classic, second], "consumer")
    causes = dict(server.group("g").rebalance_causes)
    assert second.close() == 0
    settled_dynamic(server, "g", classic, "classic")
    after = server.group("g").rebalance_causes
    new = {c: n - causes.get(c, 0) for c, n in after.items() if n != causes.get(c, 0)}
    # the downgrade starts one classic rebalance; no consumer group epoch moved for the leave; the classic
    # cooperative protocol may follow with its own second rebalance (a member that revoked rejoins)
    assert new.get("downgraded_to_classic") == 1 and not [c for c in new if c.startswith("consumer")], new
