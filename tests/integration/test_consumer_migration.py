"""Online migration with confluent-kafka 2.16 (librdkafka): a static classic group of 4 (`group.protocol=classic`)
rolled member by member to `group.protocol=consumer` and back while a producer writes and every member consumes
and commits each record it handles (Java kafka-clients 4.3: test_consumer_migration_java.py, where Kafka's
rules are spelled out: for static members with the same subscription the roll costs no rebalance).

Counted here: the server's rebalances and group epoch (unchanged through the whole roll), every client's
revocations (none but a closing member's own), and nothing lost (every produced record consumed, the
committed offsets at the end of every partition)."""
from __future__ import annotations

import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.integration.test_consumer_migration_java import PARTITIONS, Producer

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)) as s:
        yield s


class Member:
    """One confluent-kafka consumer of either protocol polling on its own thread, committing every record it
    handles (synchronously); its assignment tracked from its callbacks."""

    def __init__(self, bootstrap: str, protocol: str, instance: str | None, name: str) -> None:
        self.name, self.instance, self.protocol = name, instance, protocol
        self.conf = {"bootstrap.servers": bootstrap, "group.id": "g", "group.protocol": protocol,
                     "client.id": name, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "error_cb": self._error}
        if instance is not None:
            self.conf["group.instance.id"] = instance
        if protocol == "classic":
            self.conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        self.assignment: set[int] = set()
        self.callbacks: list[tuple[str, frozenset[int]]] = []
        self.records: set[tuple[int, int]] = set()
        self.errors: list = []
        self.commit_errors: list = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.crash: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"mig-{name}")
        self._thread.start()

    def _error(self, err) -> None:
        self.errors.append(err)

    def _assign(self, consumer, parts) -> None:
        with self._lock:
            got = frozenset(p.partition for p in parts)
            self.callbacks.append(("assigned", got))
            self.assignment |= got

    def _revoke(self, consumer, parts) -> None:
        with self._lock:
            gone = frozenset(p.partition for p in parts)
            self.callbacks.append(("revoked", gone))
            self.assignment -= gone

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaException
        try:
            c = Consumer(self.conf)
            c.subscribe(["t"], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
            try:
                while not self._stop.is_set():
                    msg = c.poll(0.05)
                    if msg is None or msg.error():
                        continue
                    with self._lock:
                        self.records.add((msg.partition(), msg.offset()))
                    try:
                        c.commit(message=msg, asynchronous=False)
                    except KafkaException as exc:
                        self.commit_errors.append(exc.args[0])
            finally:
                c.close()
        except BaseException as exc:          # surfaced by the test
            self.crash = exc

    def owned(self) -> list[int]:
        with self._lock:
            return sorted(self.assignment)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name} did not close"


def settled(st: ServerThread, members: list[Member], kind: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    v = None
    while time.monotonic() < deadline:
        v = st.group("g")
        if v is not None and v.kind == kind and v.state == "Stable" and len(v.members) == len(members):
            mine = {m.instance: m.owned() for m in members}
            served = {k: (a or {}).get("t", []) for k, a in v.assignments.items()}
            if mine == served and sorted(p for ps in mine.values() for p in ps) == list(range(PARTITIONS)):
                return v.generation, mine
        time.sleep(0.2)
    raise AssertionError(f"group not settled as {kind}: {v}; clients: {[(m.name, m.owned(), m.errors) for m in members]}")


def test_confluent_static_group_rolls_to_the_consumer_protocol_and_back_without_a_rebalance(server):
    server.call(server.server.topics.create, "t", PARTITIONS)
    members = [Member(server.bootstrap, "classic", f"i{n}", f"c{n}") for n in range(4)]
    everyone = list(members)
    producer = None
    try:
        gen, before = settled(server, members, "classic")
        marks = {m.name: len(m.callbacks) for m in members}
        producer = Producer(server.bootstrap, "t")
        rebalances, causes = server.rebalances("g"), dict(server.group("g").rebalance_causes)
        for step, (old, new) in enumerate([("classic", "consumer"), ("consumer", "classic")]):
            for n in range(4):
                members[n].close()
                members[n] = Member(server.bootstrap, new, f"i{n}", f"{new[:3]}{n}")
                everyone.append(members[n])
                kind = "consumer" if step == 0 or n < 3 else "classic"
                assert settled(server, members, kind) == (gen, before), (old, new, n)
        # Kafka's rules: no rebalance in the roll; nobody gave up partitions but its own, when it closed
        assert (server.rebalances("g"), server.group("g").rebalance_causes) == (rebalances, causes)
        for m in everyone:
            moved = [(t, ps) for t, ps in m.callbacks[marks.get(m.name, 0):] if ps]
            if m in members:
                assert all(t == "assigned" and ps <= set(before[m.instance]) for t, ps in moved), (m.name, moved)
            else:
                assert all(ps <= set(before[m.instance]) for t, ps in moved), (m.name, moved)
                assert [t for t, ps in moved][-1:] in ([], ["revoked"]), (m.name, moved)
    finally:
        if producer is not None:
            producer.stop()
        acked = set() if producer is None else producer.acked
        deadline = time.monotonic() + 60
        ends = {p: max((o for q, o in acked if q == p), default=-1) + 1 for p in range(PARTITIONS)}
        while acked and time.monotonic() < deadline:
            consumed = set().union(*(m.records for m in everyone))
            v = server.group("g")
            if acked <= consumed and all(v.offset("t", p) == ends[p] for p in range(PARTITIONS)):
                break
            time.sleep(0.5)
        for m in members:
            m.close()
    assert not producer.failed and len(acked) > 100
    assert acked <= set().union(*(m.records for m in everyone))            # nothing lost
    assert {p: server.group("g").offset("t", p) for p in range(PARTITIONS)} == ends
    assert [(m.name, m.commit_errors) for m in everyone if m.commit_errors] == []
    assert [m.name for m in everyone if m.crash is not None] == []


def test_a_migrated_group_is_replayed_on_restart(tmp_path):
    """A consumer group serving classic members (mid-roll), restarted on its data dir: replayed from Kafka's
    records - the classic members' metadata (session timeout, protocols) included -, the same group epoch
    and assignment, and its clients carry on without a rebalance."""
    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path), consumer_heartbeat_interval_ms=300,
                                   initial_rebalance_delay_ms=0)) as server:
        server.call(server.server.topics.create, "t", PARTITIONS)
        members = [Member(server.bootstrap, "classic", f"i{n}", f"c{n}") for n in range(3)]
        try:
            gen, before = settled(server, members, "classic")
            members[0].close()
            members[0] = Member(server.bootstrap, "consumer", "i0", "con0")
            assert settled(server, members, "consumer") == (gen, before)
            server.restart()
            v = server.group("g")
            assert (v.kind, v.generation, len(v.members)) == ("consumer", gen, 3)
            assert settled(server, members, "consumer") == (gen, before)
            # the classic members are served as classic members still: rolled back, the group is classic again
            members[0].close()
            members[0] = Member(server.bootstrap, "classic", "i0", "cla0")
            assert settled(server, members, "classic") == (gen, before)
            assert [m.name for m in members if m.crash is not None] == []
        finally:
            for m in members:
                m.close()


def settled_dynamic(st: ServerThread, members: list[Member], kind: str, timeout: float = 60) -> int:
    """As `settled`, for members without instance ids: the clients' assignments are the server's."""
    deadline = time.monotonic() + timeout
    v = None
    while time.monotonic() < deadline:
        v = st.group("g")
        if v is not None and v.kind == kind and v.state == "Stable" and len(v.members) == len(members):
            mine = sorted(m.owned() for m in members)
            served = sorted((a or {}).get("t", []) for a in v.assignments.values())
            if mine == served and sorted(p for ps in mine for p in ps) == list(range(PARTITIONS)):
                return v.generation
        time.sleep(0.2)
    raise AssertionError(f"group not settled as {kind}: {v}; clients: {[(m.name, m.owned(), m.errors) for m in members]}")


def test_dynamic_classic_members_in_a_consumer_group_rejoin_when_told_and_the_last_consumer_leaving_downgrades(
        server):
    """Classic members without instance ids join a consumer group (MEMBER_ID_REQUIRED, then JoinGroup and
    SyncGroup), are told to rejoin (Heartbeat: REBALANCE_IN_PROGRESS) whenever the group epoch moves, and
    get their share; when the last consumer-protocol member leaves, the group becomes a classic group and
    rebalances once. The rebalances counted are Kafka's: one epoch bump per join and per leave, then the
    downgrade's classic rebalance."""
    server.call(server.server.topics.create, "t", PARTITIONS)
    cons = [Member(server.bootstrap, "consumer", None, f"con{n}") for n in range(2)]
    cla: list[Member] = []
    try:
        settled_dynamic(server, cons, "consumer")
        cla = [Member(server.bootstrap, "classic", None, f"cla{n}") for n in range(2)]
        assert settled_dynamic(server, cons + cla, "consumer") == 4         # four joins, four epochs
        cons[0].close()
        assert settled_dynamic(server, cons[1:] + cla, "consumer") == 5     # a leave, one bump
        cons[1].close()
        gen = settled_dynamic(server, cla, "classic")                        # downgraded, then one rebalance
        assert gen == 6
        causes = server.group("g").rebalance_causes
        assert causes == {"consumer member joined": 4, "consumer member left": 1, "downgraded_to_classic": 1}, causes
        assert [m.name for m in cons + cla if m.crash is not None or m.commit_errors] == []
    finally:
        for m in cons + cla:
            m.close()


def test_bad_classic_requests_to_a_consumer_group_get_kafkas_errors_and_change_nothing(server):
    """Over the raw wire, classic requests a consumer group cannot take: an unreadable subscription (Kafka:
    UNKNOWN_SERVER_ERROR), another protocol type (INCONSISTENT_GROUP_PROTOCOL), an unknown member's Heartbeat
    and SyncGroup (UNKNOWN_MEMBER_ID); the connection keeps serving, the group and its member are untouched."""
    from kafka.protocol.consumer.group import HeartbeatRequest

    from tests.support.groupwire import join_request, sync
    from tests.support.wire import WireClient
    server.call(server.server.topics.create, "t", PARTITIONS)
    member = Member(server.bootstrap, "consumer", None, "con")
    try:
        gen = settled_dynamic(server, [member], "consumer")
        before = server.group("g")
        with WireClient.to(server.bootstrap) as c:
            req, v = join_request("g", "m-1", None, "t", session_ms=10000)
            req.protocols[0].metadata = b"\xff\xff\x00garbage"
            assert c.call(req, v).error_code == -1
            req, v = join_request("g", "m-1", None, "t", session_ms=10000)
            req.protocol_type = "connect"
            assert c.call(req, v).error_code == 23
            hb = HeartbeatRequest(version=4, group_id="g", generation_id=gen, member_id="m-1", group_instance_id=None)
            assert c.call(hb, 4).error_code == 25
            assert sync(c, "g", "m-1", gen, None).error_code == 25
            assert c.call(hb, 4).error_code == 25                 # still serving
        after = server.group("g")
        assert (after.kind, after.generation, [m.member_id for m in after.members]) == (
            "consumer", before.generation, [m.member_id for m in before.members])
        assert settled_dynamic(server, [member], "consumer") == gen
    finally:
        member.close()


def test_kafka_python_classic_member_is_served_inside_a_consumer_group(server):
    """kafka-python 3's classic consumer (JoinGroup v4+: MEMBER_ID_REQUIRED first) joining a consumer group
    beside a confluent-kafka consumer-protocol member: both get their share, the kafka-python member's
    commits (its generation = its member epoch) are taken; when the consumer-protocol member leaves, the group
    becomes a classic group and kafka-python holds every partition."""
    from kafka import KafkaConsumer
    server.call(server.server.topics.create, "t", PARTITIONS)
    con = Member(server.bootstrap, "consumer", None, "con")
    kp = None
    try:
        settled_dynamic(server, [con], "consumer")
        kp = KafkaConsumer("t", bootstrap_servers=server.bootstrap, group_id="g", client_id="kp",
                           enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=10000,
                           heartbeat_interval_ms=300)

        def served(kind: str, n: int, timeout: float = 60):
            deadline = time.monotonic() + timeout
            v = None
            while time.monotonic() < deadline:
                kp.poll(100)
                v = server.group("g")
                if v is not None and v.kind == kind and v.state == "Stable" and len(v.members) == n:
                    mine = sorted(tp.partition for tp in kp.assignment())
                    if mine in [(a or {}).get("t", []) for a in v.assignments.values()] and mine:
                        return v, mine
            raise AssertionError(f"kafka-python not served as {kind}: {v}, {kp.assignment()}")

        v, mine = served("consumer", 2)
        assert sorted(mine + con.owned()) == list(range(PARTITIONS))
        kp.commit()                                      # OffsetCommit with its generation: accepted
        con.close()
        v, mine = served("classic", 1)
        assert mine == list(range(PARTITIONS)) and v.rebalance_causes.get("downgraded_to_classic") == 1
    finally:
        if kp is not None:
            kp.close()
        con.close()


def test_aiokafka_classic_member_is_served_inside_a_consumer_group(server):
    """aiokafka 0.14's classic consumer joining a consumer group beside a confluent-kafka consumer-protocol
    member: both get their share; the downgrade leaves it every partition."""
    import asyncio

    from aiokafka import AIOKafkaConsumer
    server.call(server.server.topics.create, "t", PARTITIONS)
    con = Member(server.bootstrap, "consumer", None, "con")

    async def run() -> tuple[list[int], list[int], dict]:
        settled_dynamic(server, [con], "consumer")
        c = AIOKafkaConsumer("t", bootstrap_servers=server.bootstrap, group_id="g", client_id="aio",
                             enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=10000,
                             heartbeat_interval_ms=300)
        await c.start()
        try:
            async def served(kind: str, n: int) -> list[int]:
                deadline = time.monotonic() + 60
                v = None
                while time.monotonic() < deadline:
                    await c.getmany(timeout_ms=100)
                    v = server.group("g")
                    if v is not None and v.kind == kind and v.state == "Stable" and len(v.members) == n:
                        mine = sorted(tp.partition for tp in c.assignment())
                        if mine and mine in [(a or {}).get("t", []) for a in v.assignments.values()]:
                            return mine
                raise AssertionError(f"aiokafka not served as {kind}: {v}, {c.assignment()}")
            first = await served("consumer", 2)
            others = con.owned()
            await c.commit()
            con.close()
            return first, others, {"all": await served("classic", 1)}
        finally:
            await c.stop()

    try:
        first, others, last = asyncio.run(asyncio.wait_for(run(), 120))
        assert sorted(first + others) == list(range(PARTITIONS)) and last["all"] == list(range(PARTITIONS))
    finally:
        con.close()
