"""KIP-848 consumer groups (`group.protocol=consumer`) with real clients: confluent-kafka 2.16 here, Java
kafka-clients 4.3 in test_consumer_protocol_java.py.

Static members on 12 partitions form a group; a rolling restart of every member (each closed, which sends
epoch -2, and started again with its instance id) makes no group-epoch bump, revokes nothing from the
others, and gives every member its own partitions back; a duplicate instance gets UNRELEASED_INSTANCE_ID
(111); CreatePartitions makes exactly one epoch bump and the new partitions are assigned; a classic group
and a consumer group run side by side; a killed static member's session expired now (`expire_session`,
its admin route, `tenure fault expire`) fences it with one epoch bump and the others take its partitions
(and the same with raw ConsumerGroupHeartbeat v0 members). The server's heartbeat interval is short (the
client heartbeats when told), so a group settles in well under a second per step.
"""
from __future__ import annotations

import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.expire import SURFACES, expire
from tests.support.groups import wait_for

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 12


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)) as s:
        yield s


def view(server, gid: str):
    return server.group(gid)


class Member:
    """One confluent-kafka consumer with group.protocol=consumer polling on its own thread; its assignment
    is tracked from the (incremental) assign/revoke callbacks."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance: str | None, name: str) -> None:
        self.name, self.instance = name, instance
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "client.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "error_cb": self._error}
        if instance is not None:
            self.conf["group.instance.id"] = instance
        self.topic = topic
        self.assignment: set[int] = set()
        self.revoked: list[set[int]] = []
        self.errors: list = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"cg-{name}")
        self.crash = None

    def _error(self, err) -> None:
        self.errors.append(err)

    def _assign(self, consumer, parts) -> None:
        with self._lock:
            self.assignment |= {p.partition for p in parts}

    def _revoke(self, consumer, parts) -> None:
        with self._lock:
            gone = {p.partition for p in parts}
            self.revoked.append(gone)
            self.assignment -= gone

    def _run(self) -> None:
        from confluent_kafka import Consumer
        try:
            c = Consumer(self.conf)
            c.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
            try:
                while not self._stop.is_set():
                    msg = c.poll(0.05)
                    if msg is not None and msg.error() is not None:
                        self.errors.append(msg.error())
            finally:
                c.close()
        except BaseException as exc:      # reported to the test
            self.crash = exc

    def start(self) -> Member:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name}: close() did not finish"

    def owned(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self.assignment)


def settled(server, gid: str, members: list[Member], partitions: int):
    """The group Stable with exactly these members, every partition owned once on both sides and the
    server's view matching each client's; (epoch, {instance or name: partitions})."""
    def ok():
        for m in members:
            assert m.crash is None, f"{m.name}: {m.crash!r}"
        v = view(server, gid)
        if v is None or v.state != "Stable" or len(v.members) != len(members):
            return None
        mine = {m.instance or m.name: sorted(m.owned()) for m in members}
        if sorted(p for ps in mine.values() for p in ps) != list(range(partitions)):
            return None
        served = {k: (a or {}).get(members[0].topic, []) for k, a in v.assignments.items()}
        if served != mine:
            return None
        return v.generation, mine
    return wait_for(ok, 60, f"group {gid} to settle with {len(members)} members")


def create_topic(server, name: str, n: int) -> None:
    server.call(lambda: server.server.topics.create(name, n))


def test_static_members_form_a_group_and_a_rolling_restart_changes_nothing(server):
    create_topic(server, "t", PARTITIONS)
    members = [Member(server.bootstrap, "g", "t", f"i{n}", f"c{n}").start() for n in range(4)]
    try:
        epoch, before = settled(server, "g", members, PARTITIONS)
        assert all(len(ps) == 3 for ps in before.values()), before
        for m in members:
            m.revoked.clear()
        for n in range(len(members)):
            old = members[n]
            old.stop()                                    # static: epoch -2, keeps its partitions
            v = view(server, "g")
            assert v.generation == epoch and v.member(old.instance).member_epoch == -2
            members[n] = Member(server.bootstrap, "g", "t", old.instance, f"c{n}-r").start()
            again = settled(server, "g", members, PARTITIONS)
            assert again == (epoch, before), (again, before)
        assert [m.revoked for m in members] == [[]] * len(members)   # nobody revoked anything
        assert view(server, "g").rebalance_causes.get("consumer member joined") == 4
    finally:
        for m in members:
            m.stop()


def test_a_duplicate_instance_gets_unreleased_instance_id(server):
    from confluent_kafka import KafkaError
    create_topic(server, "t", PARTITIONS)
    first = Member(server.bootstrap, "g", "t", "dup", "first").start()
    try:
        settled(server, "g", [first], PARTITIONS)
        second = Member(server.bootstrap, "g", "t", "dup", "second").start()
        try:
            # librdkafka makes 111 fatal: error_cb gets _FATAL with error 111's own description
            described = "Broker: The instance ID is still used by another member in the consumer group"
            def refused():
                assert second.crash is None, repr(second.crash)
                return any(e.code() in (KafkaError.UNRELEASED_INSTANCE_ID, KafkaError._FATAL) and described in e.str()
                           for e in second.errors)
            try:
                wait_for(refused, 30, "UNRELEASED_INSTANCE_ID on the duplicate")
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {second.errors!r} {second.crash!r}") from None
            assert second.owned() == frozenset()
            v = view(server, "g")
            assert len(v.members) == 1 and v.member("dup").client_id == "first"
        finally:
            second.stop()
    finally:
        first.stop()


def test_create_partitions_makes_one_epoch_bump_and_assigns_the_new_ones(server):
    from confluent_kafka.admin import AdminClient, NewPartitions
    create_topic(server, "t", 6)
    members = [Member(server.bootstrap, "g", "t", f"i{n}", f"c{n}").start() for n in range(2)]
    try:
        epoch, _ = settled(server, "g", members, 6)
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_partitions([NewPartitions("t", PARTITIONS)])["t"].result(30)
        after, assignment = settled(server, "g", members, PARTITIONS)
        assert after == epoch + 1
        time.sleep(1)                                     # heartbeats go on: no further bump
        assert view(server, "g").generation == epoch + 1
        assert view(server, "g").rebalance_causes.get("consumer metadata changed") == 1
    finally:
        for m in members:
            m.stop()


def test_a_classic_group_and_a_consumer_group_side_by_side(server):
    from confluent_kafka import Consumer
    create_topic(server, "t", 4)
    cg = Member(server.bootstrap, "new", "t", "n0", "n0").start()
    classic = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "old", "group.instance.id": "o0",
                        "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    classic.subscribe(["t"])
    try:
        deadline = time.monotonic() + 30
        while not classic.assignment() and time.monotonic() < deadline:
            classic.poll(0.1)
        assert sorted(p.partition for p in classic.assignment()) == [0, 1, 2, 3]
        settled(server, "new", [cg], 4)
        kinds = {gid: view(server, gid).kind for gid in ("old", "new")}
        assert kinds == {"old": "classic", "new": "consumer"}
    finally:
        classic.close()
        cg.stop()


def test_a_restart_on_the_data_dir_reloads_the_group_and_members_carry_on(tmp_path):
    """The group is all records: after a restart the members (their clients reconnecting) heartbeat on at
    the same group epoch with the same partitions."""
    config = ServerConfig(port=0, consumer_heartbeat_interval_ms=200, data_dir=str(tmp_path))
    with ServerThread(config) as server:
        create_topic(server, "t", PARTITIONS)
        members = [Member(server.bootstrap, "g", "t", f"i{n}", f"c{n}").start() for n in range(3)]
        try:
            epoch, before = settled(server, "g", members, PARTITIONS)
            server.restart()
            v = view(server, "g")
            assert (v.kind, v.generation, v.state) == ("consumer", epoch, "Stable")
            assert {k: a["t"] for k, a in v.assignments.items()} == before
            time.sleep(1)                                  # a few heartbeats from the reconnected clients
            assert settled(server, "g", members, PARTITIONS) == (epoch, before)
            assert all(m.member_epoch == epoch for m in view(server, "g").members)
        finally:
            for m in members:
                m.stop()


# ---------------------------------------------------------------- expire_session on a consumer group
@pytest.fixture
def admin_server():
    with ServerThread(ServerConfig(port=0, admin_port=0, consumer_heartbeat_interval_ms=200,
                                   initial_rebalance_delay_ms=0)) as s:
        yield s


def raw_join(bootstrap: str, group: str, topic: str, instance: str | None):
    """One ConsumerGroupHeartbeat v0 at epoch 0 (the coordinator makes the member id); its answer."""
    from tenure.protocol.consumer_group import ConsumerGroupHeartbeatRequest
    from tests.support.wire import WireClient
    with WireClient.to(bootstrap) as w:
        r = w.call(ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="", member_epoch=0, instance_id=instance, rack_id=None,
            rebalance_timeout_ms=30000, subscribed_topic_names=[topic], server_assignor=None,
            topic_partitions=[]), 0)
    assert r.error_code == 0, r
    return r


@pytest.mark.parametrize("surface", SURFACES)
def test_expire_session_fences_a_consumer_group_member_raw(admin_server, surface):
    """Issue 25: expire_session on a KIP-848 group answered False and the member stayed. Now the member
    (by instance id, or a dynamic one by member id) is fenced - removed with one group epoch bump - through
    each control surface."""
    server = admin_server
    create_topic(server, "t", 4)
    static = raw_join(server.bootstrap, "g", "t", "i0")
    dynamic = raw_join(server.bootstrap, "g", "t", None)
    before = view(server, "g")
    assert before.kind == "consumer" and before.static_members == {"i0": static.member_id}
    assert expire(server, surface, "g", "i0") is True
    after = view(server, "g")
    assert [m.member_id for m in after.members] == [dynamic.member_id] and after.static_members == {}
    assert after.generation == before.generation + 1
    assert expire(server, surface, "g", dynamic.member_id) is True
    assert view(server, "g").members == () and view(server, "g").generation == before.generation + 2
    assert view(server, "g").rebalance_causes.get("consumer member expired") == 2


def test_expire_session_of_an_unknown_consumer_group_member(admin_server):
    """The checks before expiring know consumer groups: an unknown member or instance is False from the
    method, 404 UNKNOWN_MEMBER_ID from the endpoint; nothing changes."""
    from tests.integration.test_admin_guard import call
    server = admin_server
    create_topic(server, "t", 4)
    raw_join(server.bootstrap, "g", "t", "i0")
    before = view(server, "g")
    assert server.expire_session("g", "nobody") is False
    status, body = call(server.admin_port, "POST", "/groups/g/members/nobody/expire",
                        headers={"Content-Type": "application/json"})
    assert (status, body["error"]) == (404, "UNKNOWN_MEMBER_ID"), body
    assert view(server, "g") == before


# a static member in a process of its own, to be SIGKILLed: no leave, its heartbeats just stop
_VICTIM = ("import sys; from confluent_kafka import Consumer; bootstrap, group, topic, instance = sys.argv[1:5]; "
           "c = Consumer({'bootstrap.servers': bootstrap, 'group.id': group, 'group.protocol': 'consumer', "
           "'group.instance.id': instance, 'client.id': instance, 'enable.auto.commit': False}); "
           "c.subscribe([topic])\nwhile True: c.poll(0.05)")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_killed_static_members_session_expired_now_hands_its_partitions_over_in_one_bump(admin_server, surface):
    """A static member's process is killed (no leave: heartbeats just stop); instead of waiting out its
    session (45 s), its session is expired now through one control surface: it is fenced at once - removed,
    one group epoch bump - and the two others own every partition at that epoch, with no further bump and
    nothing revoked from them."""
    import subprocess
    import sys
    server = admin_server
    create_topic(server, "t", PARTITIONS)
    others = [Member(server.bootstrap, "g", "t", f"i{n}", f"c{n}").start() for n in range(2)]
    victim = subprocess.Popen([sys.executable, "-c", _VICTIM, server.bootstrap, "g", "t", "victim"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def three():
            for m in others:
                assert m.crash is None, f"{m.name}: {m.crash!r}"
            assert victim.poll() is None, victim.stderr.read().decode(errors="replace")
            v = view(server, "g")
            if v is None or v.state != "Stable" or len(v.members) != 3:
                return None
            served = {k: (a or {}).get("t", []) for k, a in v.assignments.items()}
            if sorted(p for ps in served.values() for p in ps) != list(range(PARTITIONS)) or not served["victim"]:
                return None
            if any(sorted(m.owned()) != served[m.instance] for m in others):
                return None
            return v.generation, served["victim"]
        epoch, victim_parts = wait_for(three, 60, "three members to settle")
        for m in others:
            m.revoked.clear()
        victim.kill()
        victim.wait(10)
        assert view(server, "g").member("victim") is not None          # its session has 45 s to run
        assert expire(server, surface, "g", "victim") is True
        v = view(server, "g")
        assert (v.generation, v.member("victim"), sorted(v.static_members)) == (epoch + 1, None, ["i0", "i1"])
        after, owned = settled(server, "g", others, PARTITIONS)
        assert after == epoch + 1 and set(victim_parts) <= {p for ps in owned.values() for p in ps}
        time.sleep(1)                                     # five heartbeat intervals: no further bump
        v = view(server, "g")
        assert (v.generation, v.state, len(v.members)) == (epoch + 1, "Stable", 2)
        assert v.rebalance_causes.get("consumer member expired") == 1
        assert [m.revoked for m in others] == [[], []]    # they only gained
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        for m in others:
            m.stop()
