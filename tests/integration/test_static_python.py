"""Static group membership (KIP-345) driven by the real Python clients: confluent-kafka (librdkafka),
kafka-python 3 and aiokafka, plus kcat and the confluent AdminClient.

Item labels refer to docs/behaviour.md. Every member polls on its own thread
(tests/support/groups.py) so heartbeats continue exactly as in an application. The server's state is
read on its own loop (ServerThread.call); what the clients sent is read from a RequestLog wrapped around
the running server's coordinator runtime.

What the clients do on close() for a static member (checked by the LeaveGroup counts below):
- librdkafka (confluent-kafka, kcat): no LeaveGroup when group.instance.id is set.
- kafka-python 3: no LeaveGroup when group_instance_id is set and the broker is >= 2.3
  (BaseCoordinator.maybe_leave_group_async only leaves for dynamic members); close() still calls the
  closing consumer's own on_partitions_revoked (Java's onLeavePrepare), which is local only.
- aiokafka: no LeaveGroup when group_instance_id is set (GroupShard._maybe_leave_group).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.groups import (
    CLIENTS,
    GroupMember,
    RequestLog,
    commit_offsets,
    committed,
    committed_offsets,
    group_view,
    member_id,
    position,
    wait_for,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOIN_GROUP = 11         # api keys
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server():
    """Like tenure_server, but accepting the short session timeouts these tests use."""
    with ServerThread(ServerConfig(port=0, min_session_timeout_ms=1000)) as s:
        s.reqs = RequestLog(s)     # what the clients sent and were answered (assertions, diagnostics)
        yield s


def _topic(server, name: str, partitions: int) -> None:
    server.call(lambda: server.server.topics.create(name, partitions))


def _produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors = []
    for part, n in per_partition.items():
        for i in range(n):
            p.produce(topic, value=f"{part}:{i}".encode(), partition=part,
                      on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(20) == 0 and not errors, errors


def _settle(server, group: str, members: list[GroupMember], partitions: int, quiet: float = 1.0,
            timeout: float = 60) -> dict:
    """Wait until the group is Stable with exactly these members, every partition owned once, and the
    generation and the assignments hold still for `quiet` seconds."""
    def ok():
        for m in members:
            assert m.crash is None, f"{m.name} crashed: {m.crash!r}"
        v = group_view(server, group)
        if not v or v["state"] != "Stable" or len(v["members"]) != len(members):
            return None
        if sorted(p for m in members for p in m.assignment) != list(range(partitions)):
            return None
        return v, [m.assignment for m in members]

    deadline = time.monotonic() + timeout
    while True:
        try:
            v, owned = wait_for(ok, max(deadline - time.monotonic(), 0.1), f"group {group} to settle")
        except AssertionError as exc:
            detail = "\n".join(f"  {m.name}: assignment={sorted(m.assignment)} events={m.events_copy()} "
                                f"errors={m.errors}" for m in members)
            # what the server answered to each member's group requests
            detail += "".join(f"\n{m.name}:\n{server.reqs.dump(m.name)}" for m in members)
            raise AssertionError(f"{exc}\nserver: {group_view(server, group)}\n{detail}") from None
        time.sleep(quiet)
        again = ok()
        if again and again[0]["generation"] == v["generation"] and again[1] == owned:
            return again[0]
        assert time.monotonic() < deadline, f"group {group} never held still"


def _stop_all(members) -> None:
    for m in members:
        try:
            m.stop(30)
        except AssertionError:
            pass


# ============================================================================ 1. rolling restart
@pytest.mark.parametrize("client", CLIENTS)
def test_rolling_restart_of_static_members_causes_no_rebalance(server, client):
    """J23-J26, L5: six static members on 12 partitions; each in turn is closed and restarted with
    the same group.instance.id. No LeaveGroup is sent, the generation never moves, the other five get
    no callback at all, and the restarted member gets exactly its previous partitions."""
    _topic(server, "roll", 12)
    reqs = server.reqs

    def member(i):
        return GroupMember(client, server.bootstrap, "roll-g", "roll", f"m{i}", name=f"m{i}").start()

    members = [member(i) for i in range(6)]
    try:
        view = _settle(server, "roll-g", members, 12)
        gen = view["generation"]
        before = [m.assignment for m in members]
        assert all(len(a) == 2 for a in before), before
        assert set(view["static"]) == {f"m{i}" for i in range(6)}

        for i in range(6):
            for m in members:
                m.clear_events()
            v0 = group_view(server, "roll-g")
            old_id = v0["static"][f"m{i}"]
            members[i].stop()
            v = group_view(server, "roll-g")
            # a closed static member stays in the group until its session times out
            assert (v["state"], v["generation"]) == ("Stable", gen)
            assert old_id in v["members"] and v["static"][f"m{i}"] == old_id

            members[i] = member(i)
            assert members[i].wait_assigned(30) == before[i], f"m{i} came back with other partitions"
            time.sleep(1.0)   # > 3 heartbeat intervals: a rebalance would have reached every member by now
            v = group_view(server, "roll-g")
            assert (v["state"], v["generation"]) == ("Stable", gen), f"restarting m{i} caused a rebalance"
            assert len(v["members"]) == 6 and old_id not in v["members"]
            new_id = v["static"][f"m{i}"]
            assert new_id != old_id and new_id == member_id(members[i])
            # J23: leadership moves to the replacement; otherwise the leader is untouched
            assert v["leader"] == (new_id if v0["leader"] == old_id else v0["leader"])
            for j, m in enumerate(members):
                if j != i:
                    assert m.events_copy() == [], f"m{j} saw callbacks when m{i} restarted"
                    assert m.assignment == before[j]
            ev = members[i].events_copy()
            assert [p for kind, p in ev if kind == "assign"] == [before[i]], ev
            assert all(not p for kind, p in ev if kind != "assign"), ev   # only the empty first-join revoke

        assert reqs.count(LEAVE_GROUP) == 0, "a static member sent LeaveGroup on close()"
        assert [m.assignment for m in members] == before
        assert all(not m.errors for m in members), [m.errors for m in members]
    finally:
        _stop_all(members)


@pytest.mark.parametrize("client", CLIENTS)
def test_rolling_restart_of_dynamic_members_rebalances(server, client):
    """The contrast: the same restarts without group.instance.id. Each close sends LeaveGroup and each
    restart moves the generation; every other member sees a revocation and a new assignment."""
    _topic(server, "droll", 12)
    reqs = server.reqs

    def member(i):
        return GroupMember(client, server.bootstrap, "droll-g", "droll", None, name=f"d{i}").start()

    members = [member(i) for i in range(6)]
    try:
        gen = _settle(server, "droll-g", members, 12, quiet=0.6)["generation"]
        for i in range(6):
            for m in members:
                m.clear_events()
            leaves = reqs.count(LEAVE_GROUP)
            members[i].stop()
            wait_for(lambda leaves=leaves: reqs.count(LEAVE_GROUP) == leaves + 1, 10, f"d{i}'s LeaveGroup")
            members[i] = member(i)
            v = _settle(server, "droll-g", members, 12, quiet=0.6)
            assert v["generation"] > gen, f"restarting dynamic d{i} did not rebalance"
            gen = v["generation"]
            for j, m in enumerate(members):
                if j != i:
                    kinds = [k for k, p in m.events_copy() if p]
                    assert "revoke" in kinds and "assign" in kinds, (j, m.events_copy())
        assert reqs.count(LEAVE_GROUP) == 6
    finally:
        _stop_all(members)


# ============================================================================ 2. fencing
def test_confluent_duplicate_instance_id_fences_the_older_consumer(server):
    """J23, J31: a second live consumer with the same group.instance.id replaces the first without a
    rebalance; the first one's next heartbeat gets FENCED_INSTANCE_ID, which librdkafka raises as a
    fatal error; the newer one keeps every partition."""
    _topic(server, "fence", 4)
    old = GroupMember("confluent", server.bootstrap, "fence-g", "fence", "x", name="old").start()
    new = None
    try:
        assert old.wait_assigned() == frozenset(range(4))
        gen = _settle(server, "fence-g", [old], 4, quiet=0.3)["generation"]
        old_id = member_id(old)
        new = GroupMember("confluent", server.bootstrap, "fence-g", "fence", "x", name="new").start()
        assert new.wait_assigned() == frozenset(range(4))
        from confluent_kafka import KafkaError
        # librdkafka reports FENCED_INSTANCE_ID as a fatal error through error_cb (code _FATAL)
        fatal = wait_for(lambda: [e for e in old.errors if e.code() == KafkaError._FATAL], 15,
                         "the old consumer's fatal error")
        assert "fenced by other consumer with same group.instance.id" in fatal[0].str()
        from confluent_kafka import KafkaException
        with pytest.raises(KafkaException):
            commit_offsets(old, {0: 1})
        commit_offsets(new, {0: 2})
        assert committed_offsets(server, "fence-g") == {("fence", 0): 2}
        time.sleep(1.0)
        v = group_view(server, "fence-g")
        assert (v["state"], v["generation"]) == ("Stable", gen)
        assert list(v["members"]) == [member_id(new)] and v["static"] == {"x": member_id(new)} != {"x": old_id}
        assert new.assignment == frozenset(range(4)) and not new.errors
        assert [p for k, p in new.events_copy() if k == "assign"] == [frozenset(range(4))]
        # the counters an operator would watch: the fenced attempts, and no rebalance for the replacement
        assert server.metrics.fenced["fence-g"] >= 1        # its heartbeat (librdkafka then fails locally)
        assert server.metrics.static_events[("fence-g", "replaced")] == 1
        assert server.rebalances("fence-g") == 1 and server.group("fence-g").rebalance_causes == {"member_joined": 1}
        assert 'tenure_fenced_instances_total{group="fence-g"}' in server.metrics_text()
    finally:
        _stop_all([m for m in (old, new) if m])


def test_kafka_python_duplicate_instance_id_fences_the_older_consumer(server, caplog):
    """kafka-python 3: the older consumer's heartbeat thread gets FencedInstanceIdError, logs it and stops
    heartbeating (poll() does not raise); its next commit raises FencedInstanceIdError. The newer one owns
    the partitions and commits fine."""
    from kafka.errors import FencedInstanceIdError

    caplog.set_level(logging.ERROR, logger="kafka.coordinator")
    _topic(server, "kfence", 4)
    old = GroupMember("kafka-python", server.bootstrap, "kfence-g", "kfence", "x", name="old").start()
    new = None
    try:
        gen = _settle(server, "kfence-g", [old], 4, quiet=0.3)["generation"]
        new = GroupMember("kafka-python", server.bootstrap, "kfence-g", "kfence", "x", name="new").start()
        assert new.wait_assigned() == frozenset(range(4))
        # the heartbeat thread catches FENCED_INSTANCE_ID (a poll() that was rejoining would raise it)
        wait_for(lambda: any("fenced group_instance_id" in r.getMessage() for r in caplog.records)
                 or any(isinstance(e, FencedInstanceIdError) for e in old.errors), 15,
                 "the old consumer to be fenced")
        with pytest.raises(FencedInstanceIdError):
            commit_offsets(old, {0: 1})
        commit_offsets(new, {0: 1})
        assert committed_offsets(server, "kfence-g") == {("kfence", 0): 1}
        time.sleep(1.0)
        v = group_view(server, "kfence-g")
        assert (v["state"], v["generation"]) == ("Stable", gen)
        assert v["static"] == {"x": member_id(new)} and list(v["members"]) == [member_id(new)]
        assert new.assignment == frozenset(range(4))
    finally:
        _stop_all([m for m in (old, new) if m])


def test_aiokafka_duplicate_instance_id_is_not_fenced_by_the_client(server):
    """aiokafka 0.14 heartbeats with Heartbeat v0/v1, which carry no group.instance.id, and has no
    FENCED_INSTANCE_ID handling. So the replaced consumer's heartbeat is answered UNKNOWN_MEMBER_ID
    (J31: old memberId without an instance id -> 25, as Kafka does); aiokafka then rejoins with
    memberId "" and the same instance id, which is again a static replacement. The two consumers keep
    displacing each other; the server handles every swap without a rebalance and never holds more than
    one member for the instance id. This documents the client's limitation; nothing is fenced."""
    _topic(server, "afence", 4)
    reqs = server.reqs
    old = GroupMember("aiokafka", server.bootstrap, "afence-g", "afence", "x", name="old").start()
    new = None
    try:
        gen = _settle(server, "afence-g", [old], 4, quiet=0.3)["generation"]
        new = GroupMember("aiokafka", server.bootstrap, "afence-g", "afence", "x", name="new").start()
        new.wait_assigned()
        seen = set()
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            v = group_view(server, "afence-g")
            assert v["generation"] == gen and len(v["members"]) == 1 and list(v["static"]) == ["x"]
            seen.add(v["static"]["x"])
            time.sleep(0.05)
        assert len(seen) >= 3, "expected the two aiokafka consumers to keep replacing each other"
        assert {v for k, v, *_ in reqs.entries if k == HEARTBEAT} <= {0, 1}
    finally:
        _stop_all([m for m in (old, new) if m])


# ============================================================================ 3. a static member dies
_MEMBER_PROC = ("import sys; sys.path.insert(0, sys.argv[1]); import logging; logging.disable(logging.CRITICAL); "
                "from tests.support.groups import member_main; member_main(sys.argv[2:])")


def _synced(reqs: RequestLog, client_id: str, since: float) -> int:
    """SyncGroups a member sent after `since` that were answered without error: the generations it completed
    on the wire. Less the on_partitions_assigned calls it made since: the ones it never handed to its
    application."""
    return sum(1 for t, cid, req, done, resp in list(reqs.calls)
               if cid == client_id and t >= since and req.API_KEY == SYNC_GROUP and done and not resp.error_code)


def _assigns(member: GroupMember) -> int:
    return len([k for k, _ in member.events_copy() if k == "assign"])


@pytest.mark.parametrize("client", CLIENTS)
def test_killed_static_member_is_removed_after_session_timeout_with_one_rebalance(server, client, record_property):
    """T1, T2: a static member in another process hangs, then is SIGKILLed (no LeaveGroup, no heartbeats).
    Until its session timeout the group is untouched; then exactly one rebalance, caused by the expiry,
    hands its partitions to the two survivors, and its instance id is unmapped. The only other rebalances
    tolerated are kafka-python's leader re-joining after dropping a generation it had completed (the next
    test), one per dropped generation."""
    session_ms = 3000
    _topic(server, "kill", 6)
    reqs = server.reqs
    live = [GroupMember(client, server.bootstrap, "kill-g", "kill", f"s{i}", name=f"s{i}",
                        session_timeout_ms=10000).start() for i in range(2)]
    proc = subprocess.Popen([sys.executable, "-c", _MEMBER_PROC, ROOT, client, server.bootstrap, "kill-g",
                             "kill", "victim", str(session_ms)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assigned: list = []
    reader = threading.Thread(target=lambda: [assigned.append(json.loads(ln)) for ln in proc.stdout], daemon=True)
    reader.start()
    try:
        def settled():
            v = group_view(server, "kill-g")
            got = [a["assigned"] for a in assigned if "assigned" in a]
            assert not any("crash" in a for a in assigned), assigned
            if not (v and v["state"] == "Stable" and len(v["members"]) == 3 and got and got[-1]):
                return None
            if sorted(got[-1] + [p for m in live for p in m.assignment]) != list(range(6)):
                return None
            return v, frozenset(got[-1])
        wait_for(settled, 60, "three members to settle")
        time.sleep(1.0)
        v, victim_parts = wait_for(settled, 10, "the group to hold still")
        gen = v["generation"]
        victim_id = v["static"]["victim"]
        before = server.call(server.metrics.rebalance_causes, "kill-g")
        since = time.monotonic()
        for m in live:
            m.clear_events()

        proc.send_signal(signal.SIGSTOP)      # it hangs for a second (as a starved process may), then dies
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        killed_at = time.monotonic()
        # T1: the session counts from the last heartbeat (or join, or sync) the server had from the victim
        last_seen = max(t for t, cid, req, *_ in list(reqs.calls)
                        if cid == "victim" and req.API_KEY in (JOIN_GROUP, HEARTBEAT, SYNC_GROUP))
        while time.monotonic() - last_seen < session_ms / 1000 - 0.7:   # well inside the session
            v = group_view(server, "kill-g")
            assert v["generation"] == gen and victim_id in v["members"], \
                f"rebalanced inside the session (victim last seen {killed_at - last_seen:.2f} s before the kill)"
            time.sleep(0.05)
        # the survivors own every partition and it holds (1.5 s: 5 heartbeat intervals)
        v = _settle(server, "kill-g", live, 6, quiet=1.5, timeout=killed_at + session_ms / 1000 + 6 - time.monotonic())
        after = server.call(server.metrics.rebalance_causes, "kill-g")
        causes = {c: n - before.get(c, 0) for c, n in after.items() if n > before.get(c, 0)}
        # T2: the expiry caused exactly one rebalance
        assert causes.pop("session_expired", 0) == 1, causes
        # Any other rebalance must be kafka-python's leader re-joining a Stable group after throwing away a
        # generation it had completed (test_kafka_python_drops_a_join_completed_between_polls): Kafka, like
        # tenure, rebalances when the leader sends JoinGroup in Stable. Each one is a generation the leader
        # synced on the wire but never handed to its application.
        leader = v["members"][v["leader"]][0]
        dropped = {m.name: _synced(reqs, m.name, since) - _assigns(m) for m in live}
        why = f"causes besides the expiry: {causes}, dropped: {dropped}\n" + "\n".join(
            f"{m.name}:\n{reqs.dump(m.name)}" for m in live)
        if client == "kafka-python":
            record_property("leader_rejoined", causes.get("leader_rejoined", 0))   # how often the client did it
            record_property("dropped_generations", dropped)
        if client == "kafka-python" and dropped[leader]:
            assert causes == {"leader_rejoined": dropped[leader]}, why
        else:
            assert causes == {}, why
        assert v["generation"] == gen + 1 + sum(causes.values()), (v["generation"], gen, why)
        assert v["state"] == "Stable" and victim_id not in v["members"] and "victim" not in v["static"]
        assert set(v["static"]) == {"s0", "s1"}
        owned = [p for m in live for p in m.assignment]
        assert sorted(owned) == list(range(6))
        for m in live:      # handed its partitions once per rebalance it took part in
            assert 1 <= _assigns(m) <= 1 + sum(causes.values()), (m.name, m.events_copy(), why)
        assert victim_parts <= frozenset(owned)
        assert reqs.count(LEAVE_GROUP) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        _stop_all(live)


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_kafka_python_drops_a_join_completed_between_polls(client):
    """Why the test above can see kafka-python's leader re-join: kafka-python 3.0.12's poll() stops waiting
    for a join that outlasts its timeout and leaves it running; if the JoinGroup and SyncGroup complete
    before the next poll(), that poll() throws the finished join away and sends a fresh JoinGroup
    (join_group_async starts a new join task when the previous one is done instead of taking its result;
    Java's AbstractCoordinator keeps a finished join future and completes the join with it). From the
    group's leader that JoinGroup arrives in Stable, which Kafka and tenure answer with a rebalance
    (J20). librdkafka, joining on its own threads, keeps its generation: the contrast."""
    with ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=3000)) as s:
        reqs = RequestLog(s)
        s.create_topics({"drop": 2})
        _produce(s.bootstrap, "drop", {0: 1, 1: 1})     # a poll() returns as soon as it has a record
        assigned: list = []
        if client == "kafka-python":
            from kafka import ConsumerRebalanceListener, KafkaConsumer

            class Listener(ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked):
                    pass

                def on_partitions_assigned(self, parts):
                    assigned.append(parts)

            c = KafkaConsumer(bootstrap_servers=s.bootstrap, group_id="drop-g", group_instance_id="i",
                              client_id="i", enable_auto_commit=False, auto_offset_reset="earliest")
            c.subscribe(["drop"], listener=Listener())
            assert "drop" in c.topics()            # see GroupMember._run_kafka_python
            poll = lambda t: c.poll(timeout_ms=int(t * 1000))   # noqa: E731
        else:
            from confluent_kafka import Consumer
            c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "drop-g", "group.instance.id": "i",
                          "client.id": "i", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
            c.subscribe(["drop"], on_assign=lambda cons, parts: assigned.append(parts))
            poll = c.poll

        def polled(pred):
            poll(0.05)
            return pred()
        try:
            since = time.monotonic()
            # short polls until the JoinGroup is on the server (the initial delay holds it 3 s), then none
            # until the join and sync are done
            wait_for(lambda: polled(lambda: reqs.count(JOIN_GROUP, {"i"})), 20, "the JoinGroup")
            wait_for(lambda: _synced(reqs, "i", since), 20, "the SyncGroup to be answered")
            if client == "kafka-python":               # and the client to have read the answer
                wait_for(lambda: c._coordinator._join_task is not None and c._coordinator._join_task.is_done,
                         10, "kafka-python's join task to finish")
            assert poll(20), "no record within 20 s"   # one long poll: whatever it joins, it keeps
            g = s.group("drop-g")
            causes, dropped = g.rebalance_causes, _synced(reqs, "i", since) - len(assigned)
            detail = f"{causes} dropped={dropped} generation={g.generation}\n{reqs.dump('i')}"
            if client == "kafka-python":
                assert causes == {"member_joined": 1, "leader_rejoined": 1} and dropped == 1, detail
                assert (g.state, g.generation) == ("Stable", 2), detail
            else:
                assert causes == {"member_joined": 1} and dropped == 0, detail
                assert (g.state, g.generation) == ("Stable", 1), detail
            assert len(assigned) == 1, assigned
        finally:
            c.close()


# ============================================================================ 4. AdminClient
def test_confluent_admin_client_on_a_static_group(server):
    """L4, O1-O3, O6, A1-A2 through confluent-kafka's AdminClient: list/describe (group.instance.id
    visible per member), list/alter offsets, delete. A live group refuses offset alteration and deletion;
    once the closed static members' sessions expire the group is Empty and both succeed."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    _topic(server, "adm", 4)
    _produce(server.bootstrap, "adm", {p: 10 for p in range(4)})
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    members = [GroupMember("confluent", server.bootstrap, "adm-g", "adm", f"a{i}", name=f"a{i}",
                           session_timeout_ms=2000).start() for i in range(2)]
    try:
        view = _settle(server, "adm-g", members, 4, quiet=0.5)
        for m in members:
            commit_offsets(m, {p: 3 + p for p in m.assignment})

        listed = admin.list_consumer_groups(request_timeout=10).result(15)
        assert not listed.errors
        g = {x.group_id: x for x in listed.valid}["adm-g"]
        assert g.state == ConsumerGroupState.STABLE and not g.is_simple_consumer_group
        stable = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(15)
        assert "adm-g" not in {x.group_id for x in stable.valid}

        desc = admin.describe_consumer_groups(["adm-g"], request_timeout=10)["adm-g"].result(15)
        assert desc.state == ConsumerGroupState.STABLE and desc.partition_assignor == "range"
        assert {m.group_instance_id: m.member_id for m in desc.members} == view["static"]
        for dm in desc.members:
            mine = next(m for m in members if m.instance_id == dm.group_instance_id)
            assert dm.client_id == mine.name
            assert {(tp.topic, tp.partition) for tp in dm.assignment.topic_partitions} == \
                {("adm", p) for p in mine.assignment}

        req = [ConsumerGroupTopicPartitions("adm-g", [TopicPartition("adm", p) for p in range(4)])]
        offs = admin.list_consumer_group_offsets(req)["adm-g"].result(15)
        assert {tp.partition: tp.offset for tp in offs.topic_partitions} == {p: 3 + p for p in range(4)}

        # a live group: the admin's commit (generation -1, no member) is refused (O3), deletion too (A2)
        alter = [ConsumerGroupTopicPartitions("adm-g", [TopicPartition("adm", 0, 9)])]
        res = admin.alter_consumer_group_offsets(alter)["adm-g"].result(15)
        assert [tp.error.code() if tp.error else None for tp in res.topic_partitions] == \
            [KafkaError.UNKNOWN_MEMBER_ID]
        assert committed_offsets(server, "adm-g")[("adm", 0)] == 3
        with pytest.raises(Exception) as exc:
            admin.delete_consumer_groups(["adm-g"], request_timeout=10)["adm-g"].result(15)
        assert exc.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

        # close both: static members send no LeaveGroup, the group empties after their session timeout
        _stop_all(members)
        assert group_view(server, "adm-g")["state"] == "Stable"
        wait_for(lambda: group_view(server, "adm-g")["state"] == "Empty", 10, "the sessions to expire")
        desc = admin.describe_consumer_groups(["adm-g"])["adm-g"].result(15)
        assert desc.state == ConsumerGroupState.EMPTY and desc.members == []

        res = admin.alter_consumer_group_offsets(alter)["adm-g"].result(15)
        assert [(tp.partition, tp.offset, tp.error) for tp in res.topic_partitions] == [(0, 9, None)]
        offs = admin.list_consumer_group_offsets(req)["adm-g"].result(15)
        assert {tp.partition: tp.offset for tp in offs.topic_partitions} == {0: 9, 1: 4, 2: 5, 3: 6}

        assert admin.delete_consumer_groups(["adm-g"])["adm-g"].result(15) is None
        assert group_view(server, "adm-g") is None and committed_offsets(server, "adm-g") == {}
        listed = admin.list_consumer_groups().result(15)
        assert "adm-g" not in {x.group_id for x in listed.valid}
        offs = admin.list_consumer_group_offsets(req)["adm-g"].result(15)
        assert all(tp.offset < 0 for tp in offs.topic_partitions)
    finally:
        _stop_all(members)


# ============================================================================ 5. offsets across restarts
@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_a_static_restart(server, client):
    """O1-O6: members commit, are closed and restarted with the same instance ids (no rebalance);
    the restarted members read the commits back with committed() and resume exactly there."""
    _topic(server, "offs", 4)
    _produce(server.bootstrap, "offs", {p: 10 for p in range(4)})
    mk = lambda i: GroupMember(client, server.bootstrap, "offs-g", "offs", f"o{i}", name=f"o{i}").start()  # noqa: E731
    members = [mk(i) for i in range(2)]
    try:
        gen = _settle(server, "offs-g", members, 4, quiet=0.5)["generation"]
        # (records read before the group settled may be read twice: nothing was committed yet)
        wait_for(lambda: all({o for p, o, _ in m.records if p == part} >= set(range(10))
                             for m in members for part in m.assignment), 30, "every record to be consumed")
        want = {p: 3 + p for p in range(4)}
        for m in members:
            commit_offsets(m, {p: want[p] for p in m.assignment})
        assert committed_offsets(server, "offs-g") == {("offs", p): o for p, o in want.items()}
        before = [m.assignment for m in members]

        _stop_all(members)
        members = [mk(i) for i in range(2)]
        v = _settle(server, "offs-g", members, 4, quiet=0.5)
        assert v["generation"] == gen and [m.assignment for m in members] == before
        for m in members:
            assert committed(m, sorted(m.assignment)) == {p: want[p] for p in m.assignment}
        wait_for(lambda: sum(len(m.records) for m in members) >= sum(10 - o for o in want.values()), 30,
                 "the restarted members to read from their committed offsets")
        time.sleep(0.3)    # nothing more (no duplicates) arrives
        for m in members:
            per = {}
            for p, off, value in m.records:
                per.setdefault(p, []).append(off)
                assert value == f"{p}:{off}".encode()
            assert per == {p: list(range(want[p], 10)) for p in m.assignment}
            assert position(m, sorted(m.assignment)) == {p: 10 for p in m.assignment}
    finally:
        _stop_all(members)


# ============================================================================ 6. kcat
@pytest.mark.kcat
def test_kcat_static_balanced_consumer(server):
    """kcat -G (librdkafka's balanced consumer) with a group.instance.id joins, shows up in the server's
    group with that instance id, and consumes exactly the produced records; on exit it sends no
    LeaveGroup (static)."""
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (apt-get install kcat)"
    _topic(server, "kc", 3)
    reqs = server.reqs
    n = 30
    proc = subprocess.Popen([kcat, "-b", server.bootstrap, "-G", "kc-g", "-c", str(n), "-q",
                             "-X", "client.id=kcat-member", "-X", "group.instance.id=kcat-1",
                             "-X", "session.timeout.ms=3000", "-X", "auto.offset.reset=earliest",
                             "-f", "%p %o %s\\n", "kc"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def joined():
            v = group_view(server, "kc-g")
            return v if v and v["state"] == "Stable" and len(v["members"]) == 1 else None
        v = wait_for(joined, 30, "kcat to join kc-g")
        (mid, (iid, cid)), = v["members"].items()
        assert (iid, cid) == ("kcat-1", "kcat-member") and v["static"] == {"kcat-1": mid}

        _produce(server.bootstrap, "kc", {p: n // 3 for p in range(3)})
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        got = sorted(tuple(int(x) if i < 2 else x for i, x in enumerate(line.split(" ", 2)))
                     for line in out.splitlines() if line.strip())
        assert got == sorted((p, i, f"{p}:{i}") for p in range(3) for i in range(n // 3))
        # static: kcat leaves no LeaveGroup behind, the member stays until its session expires
        assert reqs.count(LEAVE_GROUP) == 0
        v = group_view(server, "kc-g")
        assert v["static"] == {"kcat-1": mid}
        wait_for(lambda: group_view(server, "kc-g")["state"] == "Empty", 10, "kcat's session to expire")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
