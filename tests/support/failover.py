"""Coordinator failover with real clients on a tenure cluster (`ServerThread(brokers=3)`), shared by the
Java and confluent-kafka tests (tests/integration/test_failover_*.py).

A group of consumers, each committing synchronously after every batch it consumes, while a `Feeder` (an
idempotent confluent-kafka producer on its own thread) keeps records flowing into every partition.
`run_coordinator_failover` then:

1. stops the broker that coordinates the group (`coordinator_of`);
2. restarts one member (close, then a new consumer of the same identity) while that broker is down;
3. starts the broker again and moves the coordinator back to it (`move_coordinator`);
4. stops the feeder and lets every member commit the end of its partitions.

After 1 and 3 every member has had a commit acknowledged by the new coordinator (so it found it), no
member saw a callback, every member's generation, member id and partitions are what they were, the
server's group is Stable with the same generation and members, and every offset acknowledged before the
event is still committed (read back with the client's own OffsetFetch through AdminClient). What 2 does is
`static`: a static member gets its partitions back with no rebalance anywhere; a dynamic member's
close() leaves the group and its new consumer joins as a new member: one rebalance for everyone. At the end the committed offsets are the log end offsets, every acknowledged
record was consumed and none was produced twice.

Members are adapters with one interface (JavaAdapter over tests/java/StaticConsumer.java,
ConfluentAdapter over tests/support/groups.py's GroupMember).
"""
from __future__ import annotations

import threading
import time

from tests.support.groups import GroupMember, confluent_generation, member_id, wait_for

SESSION_MS = 10000          # a restarted JVM must rejoin within it on a loaded 2-core machine


# ---------------------------------------------------------------------- the record stream
class Feeder:
    """An idempotent confluent-kafka producer writing `topic:partition:i` values to every partition in
    turn (about `rate` records/s) until stop(); `acked` holds (partition, offset, value) of every delivery."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 80) -> None:
        from confluent_kafka import Producer
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list = []
        self._p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                            "message.timeout.ms": 60000, "log_level": 0})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed.append(err)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            p = i % self.partitions
            self._p.produce(self.topic, value=f"{self.topic}:{p}:{i}".encode(), partition=p,
                            on_delivery=self._delivered)
            self._p.poll(0)
            i += 1
            time.sleep(1 / self.rate)

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def stop(self) -> dict[int, int]:
        """Stop producing, wait for every delivery; returns {partition: log end offset} as acknowledged."""
        self._stop.set()
        self._thread.join(10)
        left = self._p.flush(60)
        assert left == 0 and not self.failed, f"{left} records undelivered, failures: {self.failed[:5]}"
        ends: dict[int, int] = {}
        for p, o, _ in self.acked:
            ends[p] = max(ends.get(p, 0), o + 1)
        return ends

    def __exit__(self, *exc) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(10)
            self._p.flush(5)


def committed_by_admin(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """The group's committed offsets through confluent-kafka's AdminClient (FindCoordinator + OffsetFetch)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin.list_consumer_group_offsets([req], request_timeout=20)[group].result(30)
    return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in res.topic_partitions}


# ---------------------------------------------------------------------- the members, one interface
class JavaAdapter:
    """A tests/java/StaticConsumer.java JVM with commit.each.poll=true."""

    def __init__(self, start, name: str, bootstrap: str, group: str, topic: str, static: bool) -> None:
        self.name, self.static = name, static
        self._args = (name, bootstrap, group, topic)
        self._start = start                  # the test's java_members factory
        self.m = start(*self._args, instance=name if static else None, session_timeout_ms=SESSION_MS,
                       heartbeat_interval_ms=1000, commit_each_poll="true")
        self._mark = 0
        self._old_records: list[tuple[int, int, bytes]] = []
        self._old_commits: list[tuple[float, dict[int, int]]] = []

    def mark(self) -> None:
        self._mark = self.m.mark()

    def callbacks(self) -> list:
        return [(e["type"], e["partitions"], e["generation"]) for e in self.m.callbacks(self._mark)]

    def last_assignment(self) -> tuple[list[int], int, str] | None:
        e = self.m.last_callback()
        if e is None or e["type"] != "assigned":
            return None
        return e["partitions"], e["generation"], e["member_id"]

    def status(self) -> tuple[list[int], int, str]:
        s = self.m.status()
        return s["partitions"], s["generation"], s["member_id"]

    def commits(self) -> list[tuple[float, dict[int, int]]]:
        got = [(e["ts"] / 1000, {o["partition"]: o["offset"] for o in e["offsets"]})
               for e in self.m.events if e["type"] == "committed"]
        return self._old_commits + got

    def commit_errors(self) -> list:
        return [e for e in self.m.events if e["type"] == "commit_error"]

    def records(self) -> list[tuple[int, int, bytes]]:
        return self._old_records + [(e["partition"], e["offset"], e["value"].encode())
                                    for e in self.m.records()]

    def restart(self) -> None:
        """close() (a static member sends no LeaveGroup, a dynamic one does), then a new JVM."""
        assert self.m.close() == 0, self.m.dump()
        self._old_records, self._old_commits = self.records(), self.commits()
        self.m = self._start(*self._args, instance=self.name if self.static else None,
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000, commit_each_poll="true")
        self._mark = 0

    def close(self) -> None:
        self.m.close()

    def dump(self) -> str:
        return self.m.dump()


class ConfluentAdapter:
    """A tests/support/groups.py GroupMember (confluent-kafka) with commit_each_poll."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, static: bool) -> None:
        self.name, self.static = name, static
        self._args = (bootstrap, group, topic)
        self.m = self._new()
        self._mark = self._gen_mark = 0
        self._old_records: list = []
        self._old_commits: list = []

    def _new(self) -> GroupMember:
        return GroupMember("confluent", *self._args, self.name if self.static else None, name=self.name,
                           session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000,
                           commit_each_poll=True).start()

    def mark(self) -> None:
        self._mark = len(self.m.events_copy())
        self._gen_mark = len(self.m.generations)

    def callbacks(self) -> list:
        evs = self.m.events_copy()[self._mark:]
        gens = self.m.generations[self._gen_mark:]
        names = {"assign": "assigned", "revoke": "revoked", "lost": "lost"}     # as the Java program names them
        return [(names[k], sorted(ps), g) for (k, ps), g in zip(evs, gens)]

    def last_assignment(self) -> tuple[list[int], int, str] | None:
        evs = self.m.events_copy()
        if not evs or evs[-1][0] != "assign" or self.m.crash is not None:
            return None
        return self.status()

    def status(self) -> tuple[list[int], int, str]:
        assert self.m.crash is None, self.m.crash
        return (sorted(self.m.assignment), self.m.call(confluent_generation), member_id(self.m))

    def commits(self) -> list[tuple[float, dict[int, int]]]:
        return self._old_commits + list(self.m.commits)

    def commit_errors(self) -> list:
        return list(self.m.commit_errors)

    def records(self) -> list[tuple[int, int, bytes]]:
        return self._old_records + list(self.m.records)

    def restart(self) -> None:
        self.m.stop()
        self._old_records, self._old_commits = self.records(), self.commits()
        self.m = self._new()
        self._mark = self._gen_mark = 0

    def close(self) -> None:
        if not self.m.closed.is_set():
            self.m.stop()

    def dump(self) -> str:
        return (f"--- {self.name}: events {self.m.events_copy()}, generations {self.m.generations}, "
                f"errors {self.m.errors[-5:]}, commit errors {self.m.commit_errors[-5:]}, crash {self.m.crash!r}")


# ---------------------------------------------------------------------- checks
def dump_all(members) -> str:
    return "\n".join(m.dump() for m in members)


def server_view(st, group: str) -> tuple[str, int, dict[str, str | None], dict[str, list[int]]]:
    """(state, generation, {member id: instance id}, {member id: partitions}) from the coordinator."""
    v = st.group(group)
    assert v is not None, f"the coordinator does not know {group}"
    return (v.state, v.generation, {m.member_id: m.group_instance_id for m in v.members},
            {m.member_id: sorted(p for ps in (m.assignment or {}).values() for p in ps) for m in v.members})


def wait_formed(st, group: str, members, partitions: int, timeout: float = 90):
    """Until the server's group is Stable with exactly these members and each member's latest callback is
    an assignment at that generation; returns (generation, {name: (partitions, member id)})."""
    last = None

    def formed():
        nonlocal last
        v = st.group(group)
        if v is None or v.state != "Stable" or len(v.members) != len(members):
            last = v
            return None
        got = {m.name: m.last_assignment() for m in members}
        last = (v.state, v.generation, got)
        if any(a is None or a[1] != v.generation for a in got.values()):
            return None
        if sorted(p for a in got.values() for p in a[0]) != list(range(partitions)):
            return None
        return v.generation, {n: (a[0], a[2]) for n, a in got.items()}
    try:
        return wait_for(formed, timeout, f"{group} formed with {len(members)} members", interval=0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen {last}\n{dump_all(members)}") from None


def wait_committed_since(members, since: float, timeout: float = 60, what: str = "") -> None:
    """Every member has had a commit acknowledged after `since` (time.time())."""
    def done():
        return all(any(ts > since for ts, _ in m.commits()) for m in members)
    try:
        wait_for(done, timeout, f"every member to commit again {what}", interval=0.1)
    except AssertionError as e:
        late = [m.name for m in members if not any(ts > since for ts, _ in m.commits())]
        raise AssertionError(f"{e}: {late} did not\n{dump_all([m for m in members if m.name in late])}") from None


def acked_before(members, t: float) -> dict[int, int]:
    """{partition: highest offset acknowledged as committed before time t}."""
    out: dict[int, int] = {}
    for m in members:
        for ts, offs in m.commits():
            if ts < t:
                for p, o in offs.items():
                    out[p] = max(out.get(p, -1), o)
    return out


def assert_nothing_moved(st, group, members, generation, assignment, view, what: str) -> None:
    """No callback since the mark, same generation, member id and partitions on every member; the
    server's group as it was."""
    for m in members:
        assert m.callbacks() == [], f"{m.name} saw callbacks {what}: {m.callbacks()}\n{m.dump()}"
        parts, gen, mid = m.status()
        assert (parts, gen, mid) == (assignment[m.name][0], generation, assignment[m.name][1]), (
            f"{m.name} {what}: now {(parts, gen, mid)}, before {assignment[m.name]} at generation {generation}")
    now = server_view(st, group)
    assert now == view, f"the group changed {what}: {now} != {view}"


def assert_commits_kept(bootstrap: str, group: str, topic: str, partitions: int, before: dict[int, int],
                        what: str) -> dict[int, int | None]:
    got = committed_by_admin(bootstrap, group, topic, partitions)
    lost = {p: (o, got.get(p)) for p, o in before.items() if got.get(p) is None or got[p] < o}
    assert not lost, f"acknowledged commits lost {what}: {{partition: (acknowledged, committed now)}} {lost}"
    return got


def static_restart_keeps_partitions(st, group, restarted, others, generation, assignment):
    """A static member restarted while the old coordinator's broker is down gets its partitions back at the
    same generation (a new member id under the same instance id); nobody else sees a callback."""
    got = wait_for(restarted.last_assignment, 60, f"{restarted.name} to be assigned again")
    parts, gen, mid = got
    assert (parts, gen) == (assignment[restarted.name][0], generation), (got, assignment[restarted.name])
    assert mid != assignment[restarted.name][1]
    for m in others:
        assert m.callbacks() == [], f"{m.name} saw callbacks when {restarted.name} restarted\n{m.dump()}"
    state, gen_now, members, _ = server_view(st, group)
    assert (state, gen_now, members.get(mid)) == ("Stable", generation, restarted.name), (state, gen_now, members)
    return generation, {**assignment, restarted.name: (parts, mid)}


def dynamic_restart_rebalances(st, group, restarted, others, generation, assignment):
    """A dynamic member restarted while the old coordinator's broker is down leaves the group (close()
    sends LeaveGroup) and joins as a new member: a rebalance, every other member revokes all its
    partitions (eager range assignor) and is assigned again at a newer generation."""
    members = [restarted, *others]
    gen, now = wait_formed(st, group, members, len([p for a in assignment.values() for p in a[0]]))
    assert gen > generation, (gen, generation)
    for m in others:
        cbs = m.callbacks()
        assert cbs and cbs[0][0] == "revoked", f"{m.name}: {cbs}"
        assert cbs[0][1] == assignment[m.name][0], f"{m.name} revoked {cbs[0][1]}, held {assignment[m.name][0]}"
        assert cbs[-1][0] == "assigned" and cbs[-1][2] == gen, f"{m.name}: {cbs}"
    return gen, now


# ---------------------------------------------------------------------- the scenario
def run_coordinator_failover(st, make_member, group: str, topic: str, partitions: int, n: int,
                             static: bool) -> dict:
    """The scenario of the module doc. make_member(name) starts one member. Returns figures for
    record_property."""
    expect_restart = static_restart_keeps_partitions if static else dynamic_restart_rebalances
    st.create_topics({topic: partitions})
    figures: dict = {}
    with Feeder(st.bootstrap, topic, partitions) as feeder:
        members = [make_member(f"{'s' if static else 'd'}{i}") for i in range(n)]
        try:
            gen, assignment = wait_formed(st, group, members, partitions)
            wait_committed_since(members, 0, what="after the group formed")
            view = server_view(st, group)
            if static:
                assert set(view[2].values()) == {m.name for m in members}, view

            # 1. the coordinating broker stops
            old = st.coordinator_of(group)
            for m in members:
                m.mark()
            t = time.time()
            st.stop_broker(old)
            stopped = time.time()
            new = st.coordinator_of(group)
            assert new != old, f"{group} is still coordinated by the stopped broker {old}"
            assert_commits_kept(st.bootstrap, group, topic, partitions, acked_before(members, t),
                                f"when broker {old} stopped")
            wait_committed_since(members, stopped, what=f"after broker {old} stopped")
            figures["rediscovered_s"] = round(max(min(ts for ts, _ in m.commits() if ts > stopped)
                                                  for m in members) - stopped, 3)
            assert_nothing_moved(st, group, members, gen, assignment, view,
                                 f"when coordinator {old} stopped (now {new})")

            # 2. one member restarts while that broker is down
            first, others = members[0], members[1:]
            for m in members:
                m.mark()
            first.restart()
            gen, assignment = expect_restart(st, group, first, others, gen, assignment)
            view = server_view(st, group)

            # 3. the broker comes back and the coordinator moves back to it
            st.start_broker(old)
            for m in members:
                m.mark()
            t = time.time()
            st.move_coordinator(group, old)
            moved = time.time()
            assert st.coordinator_of(group) == old
            assert_commits_kept(st.bootstrap, group, topic, partitions, acked_before(members, t),
                                f"when the coordinator moved back to {old}")
            wait_committed_since(members, moved, what=f"after the coordinator moved back to {old}")
            assert_nothing_moved(st, group, members, gen, assignment, view,
                                 f"when the coordinator moved back to {old}")

            # 4. the end of every partition is consumed and committed
            ends = feeder.stop()

            def caught_up():
                got = {}
                for m in members:
                    for _, offs in m.commits():
                        for p, o in offs.items():
                            got[p] = max(got.get(p, 0), o)
                return all(got.get(p, 0) >= e for p, e in ends.items())
            wait_for(caught_up, 60, "every member to commit the end of its partitions")
            final = committed_by_admin(st.bootstrap, group, topic, partitions)
            assert final == {p: ends.get(p) for p in range(partitions)}, (final, ends)
            acked = {(p, o): v for p, o, v in feeder.acked}
            consumed: dict[tuple[int, int], bytes] = {}
            for m in members:
                for p, o, v in m.records():
                    consumed[(p, o)] = v
            missing = sorted(set(acked) - set(consumed))
            assert not missing, f"{len(missing)} acknowledged records never consumed, e.g. {missing[:5]}"
            assert all(consumed[k] == v for k, v in acked.items())
            values = [v for (p, o), v in consumed.items()]
            assert len(values) == len(set(values)), "a record was written twice by the idempotent producer"
            figures.update(records=len(acked), commits=sum(len(m.commits()) for m in members),
                           commit_errors=sum(len(m.commit_errors()) for m in members))
            return figures
        finally:
            for m in members:
                try:
                    m.close()
                except Exception:
                    pass
