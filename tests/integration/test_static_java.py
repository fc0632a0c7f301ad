"""Static membership (KIP-345) with the real Java kafka-clients 4.3 classic consumer and Admin.

Each group member is its own long-running JVM (tests/java/StaticConsumer.java) driven over
stdin/stdout; Admin operations run tests/java/AdminOps.java. What is checked:

- a rolling restart of six static members causes no rebalance at all (no callbacks on the others,
  generation unchanged on the server and in every member's groupMetadata(), each restarted member
  gets back exactly its partitions) - and the same roll with dynamic members does rebalance;
- two live consumers with one group.instance.id: the older one is fenced (FencedInstanceIdException
  from poll) and the newer one owns the partitions;
- a static member killed with SIGKILL is removed after its session timeout by exactly one rebalance;
- Admin: removeMembersFromConsumerGroup by instance id, describeConsumerGroups, list/alter
  consumer group offsets, deleteConsumerGroups (non-empty -> error, empty -> deleted);
- offsets committed by static members are what the restarted members resume from.

Java being unavailable fails these tests (tests/support/java.py raises), it never skips them.
"""
from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.java import _tool, compile_java, run_java

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]

# fast, light JVMs: several run at once on a 2-core machine
JVM_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Xshare:auto"]
CALLBACKS = ("assigned", "revoked", "lost")
RANGE = "range"


# ============================================================================ helpers
class JavaMember:
    """One StaticConsumer JVM: a group member driven over stdin, its stdout parsed into events."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str,
                 instance: str | None = None, **conf) -> None:
        self.name = name
        self.instance = instance
        args = [_tool("java"), *JVM_OPTS, "-cp", compile_java(), "StaticConsumer",
                bootstrap, group, topic, f"client.id={name}"]
        if instance is not None:
            args.append(f"group.instance.id={instance}")
        args += [f"{k.replace('_', '.')}={v}" for k, v in conf.items()]
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, bufsize=1)
        self.events: list[dict] = []
        self.raw: list[str] = []
        self.eof = False
        self._cv = threading.Condition()
        threading.Thread(target=self._read, name=f"java-{name}", daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            ev = None
            if line.startswith("{"):
                try:
                    ev = json.loads(line)
                except ValueError:
                    pass
            with self._cv:
                self.raw.append(line)
                if ev is not None:
                    ev["_mono"] = time.monotonic()
                    self.events.append(ev)
                self._cv.notify_all()
        with self._cv:
            self.eof = True
            self._cv.notify_all()

    # ---- inspection
    def mark(self) -> int:
        with self._cv:
            return len(self.events)

    def callbacks(self, since: int = 0) -> list[dict]:
        with self._cv:
            return [e for e in self.events[since:] if e["type"] in CALLBACKS]

    def last_callback(self) -> dict | None:
        cbs = self.callbacks()
        return cbs[-1] if cbs else None

    def last_assigned_index(self) -> int:
        """Index of the latest onPartitionsAssigned event (records before it may predate a rebalance)."""
        with self._cv:
            for i in range(len(self.events) - 1, -1, -1):
                if self.events[i]["type"] == "assigned":
                    return i
        raise AssertionError(f"{self.name} has no assignment\n{self.dump()}")

    def wait_record(self, partition: int, offset: int, timeout: float = 30) -> dict:
        """Wait for the record at partition/offset, consumed under the current assignment."""
        return self.wait_for(lambda e: e["type"] == "record" and e["partition"] == partition
                             and e["offset"] == offset, timeout, since=self.last_assigned_index(),
                             what=f"record p{partition}@{offset}")

    def records(self, since: int = 0) -> list[dict]:
        with self._cv:
            return [e for e in self.events[since:] if e["type"] == "record"]

    def stderr_tail(self, n: int = 4000) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode(errors="replace")[-n:]
        except ValueError:
            return ""

    def dump(self) -> str:
        with self._cv:
            raw = "\n    ".join(self.raw[-40:])
        return (f"--- {self.name} (instance={self.instance}, rc={self.proc.poll()}) stdout tail:\n    {raw}\n"
                f"--- {self.name} stderr tail:\n{self.stderr_tail()}")

    def wait_for(self, pred, timeout: float, since: int = 0, what: str = "event") -> dict:
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for ev in self.events[since:]:
                    if pred(ev):
                        return ev
                if self.eof:
                    raise AssertionError(f"{self.name} exited before {what}\n{self.dump()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: no {what} within {timeout}s\n{self.dump()}")
                self._cv.wait(left)

    def wait_type(self, type_: str, timeout: float, since: int = 0) -> dict:
        return self.wait_for(lambda e: e["type"] == type_, timeout, since, what=repr(type_))

    # ---- commands
    def send(self, cmd: str) -> None:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def status(self, timeout: float = 15) -> dict:
        m = self.mark()
        self.send("status")
        return self.wait_type("status", timeout, since=m)

    def commit(self, timeout: float = 20) -> dict:
        m = self.mark()
        self.send("commit")
        return self.wait_type("committed", timeout, since=m)

    def close(self, timeout: float = 30) -> int:
        """consumer.close(): a static member does not send LeaveGroup."""
        self.send("close")
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit within {timeout}s of close\n{self.dump()}") from None

    def kill(self) -> None:
        """SIGKILL the JVM: no close(), no LeaveGroup, heartbeats just stop."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self._stderr.close()


@pytest.fixture
def java_members():
    """Factory for JavaMember processes; every JVM still running at teardown is SIGKILLed."""
    started: list[JavaMember] = []

    def start(*args, **kwargs) -> JavaMember:
        m = JavaMember(*args, **kwargs)
        started.append(m)
        return m

    start.all = started
    yield start
    for m in started:
        m.terminate()


def dump_all(members) -> str:
    return "\n".join(m.dump() for m in members)


def group_view(st: ServerThread, gid: str) -> dict | None:
    """A consistent copy of the coordinator's view of one group, taken on the server loop."""
    def snap():
        rt = st.server.runtime
        g = rt.group(gid)
        offsets = {(t, p): r.offset for (t, p), r in rt.committed_offsets(gid).items()}
        if g is None:
            return {"exists": False, "offsets": offsets}
        return {"exists": True, "state": g.state, "generation": g.generation, "leader": g.leader_id,
                "protocol": g.protocol_name,
                "members": {mid: m.group_instance_id for mid, m in g.members.items()},
                "static": dict(g.static_members), "offsets": offsets}
    return st.call(snap)


def create_topic(st: ServerThread, name: str, partitions: int) -> None:
    st.call(st.server.topics.create, name, partitions)


def wait_stable(st: ServerThread, gid: str, members: list[JavaMember], timeout: float = 60,
                partitions: int | None = None) -> tuple[int, dict[str, list[int]]]:
    """Wait until the server's group is Stable with exactly `members`, and every member's latest
    callback is an onPartitionsAssigned at the server's generation. Returns (generation, name->partitions)."""
    deadline = time.monotonic() + timeout
    v = None
    while True:
        v = group_view(st, gid)
        if v["exists"] and v["state"] == "Stable" and len(v["members"]) == len(members):
            gen = v["generation"]
            last = {m.name: m.last_callback() for m in members}
            if all(e is not None and e["type"] == "assigned" and e["generation"] == gen
                   and e["member_id"] in v["members"] for e in last.values()):
                assignment = {n: e["partitions"] for n, e in last.items()}
                if partitions is not None:
                    flat = sorted(p for ps in assignment.values() for p in ps)
                    assert flat == list(range(partitions)), (assignment, dump_all(members))
                return gen, assignment
        if time.monotonic() > deadline:
            raise AssertionError(f"group {gid} not stable with {len(members)} members within {timeout}s; "
                                 f"server view: {v}\n{dump_all(members)}")
        time.sleep(0.2)


def wait_server(st: ServerThread, gid: str, pred, timeout: float, what: str, members=()) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        v = group_view(st, gid)
        if pred(v):
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"server: {what} not reached within {timeout}s; view: {v}\n"
                                 f"{dump_all(members)}")
        time.sleep(0.1)


def admin(bootstrap: str, *args) -> list[dict]:
    return run_java("AdminOps", bootstrap, *args, timeout=90)


# ============================================================================ 1. rolling restart
STATIC_SESSION_MS = 20000   # generous: a restarted JVM must rejoin within it, even on a loaded 2-core box


def test_static_rolling_restart_causes_no_rebalance(tenure_server, java_members):
    """KIP-345: closing a static member sends no LeaveGroup and rejoining with the same
    group.instance.id replaces it in place - no rebalance anywhere, same partitions back."""
    st, topic, gid = tenure_server, "roll-static", "roll-static-g"
    create_topic(st, topic, 12)
    names = [f"m{i}" for i in range(6)]

    def start(name):
        return java_members(name, st.bootstrap, gid, topic, instance=name,
                            session_timeout_ms=STATIC_SESSION_MS, heartbeat_interval_ms=1000)

    live = {n: start(n) for n in names}
    gen0, assignment0 = wait_stable(st, gid, list(live.values()), timeout=90, partitions=12)
    v0 = group_view(st, gid)
    assert v0["protocol"] == RANGE
    assert set(v0["static"]) == set(names)
    assert all(len(ps) == 2 for ps in assignment0.values()), assignment0
    # from this point on, nobody may see a callback except the member being restarted
    quiet_since = {n: m.mark() for n, m in live.items()}

    for name in names:
        old = live[name]
        before = group_view(st, gid)
        old_member_id = before["static"][name]
        assert old.close() == 0, old.dump()
        # no LeaveGroup: the coordinator still holds the member, nothing moved
        v = group_view(st, gid)
        assert v["static"].get(name) == old_member_id, (name, v)
        assert (v["state"], v["generation"], len(v["members"])) == ("Stable", gen0, 6), (name, v)

        new = live[name] = start(name)
        got = new.wait_type("assigned", timeout=45)
        assert got["partitions"] == assignment0[name], (name, got, assignment0)
        assert got["generation"] == gen0, (name, got)
        assert got["member_id"] != old_member_id
        assert got["member_id"].startswith(name + "-"), got
        quiet_since[name] = new.mark()

        v = group_view(st, gid)
        assert (v["state"], v["generation"], len(v["members"])) == ("Stable", gen0, 6), (name, v)
        assert v["static"][name] == got["member_id"]
        assert old_member_id not in v["members"]
        # leadership moves to the replacement, or stays where it was
        assert v["leader"] == (got["member_id"] if before["leader"] == old_member_id else before["leader"]), \
            (name, before, v)
        for other, m in live.items():
            assert m.callbacks(quiet_since[other]) == [], (
                f"{other} saw callbacks while {name} restarted\n{m.dump()}")

    # a crash is no different: SIGKILL (no close at all) and restart within the session timeout
    crashed = live["m2"]
    crashed_member_id = group_view(st, gid)["static"]["m2"]
    crashed.kill()
    new = live["m2"] = start("m2")
    got = new.wait_type("assigned", timeout=45)
    assert (got["partitions"], got["generation"]) == (assignment0["m2"], gen0), got
    quiet_since["m2"] = new.mark()
    v = group_view(st, gid)
    assert crashed_member_id not in v["members"] and v["static"]["m2"] == got["member_id"], v

    # let a few heartbeat rounds pass: a rebalance would surface as 27 -> revoke/rejoin
    time.sleep(3)
    v = group_view(st, gid)
    assert (v["state"], v["generation"], len(v["members"])) == ("Stable", gen0, 6), v
    for name, m in live.items():
        assert m.callbacks(quiet_since[name]) == [], m.dump()
        s = m.status()
        assert s["generation"] == gen0, s
        assert s["partitions"] == assignment0[name], (s, assignment0)
        assert s["member_id"] == v["static"][name]

    # the group still works after everyone (the leader included) was replaced: a seventh member
    # joins, one rebalance, and the replaced leader computes a full assignment
    marks = {n: m.mark() for n, m in live.items()}
    live["m6"] = start("m6")
    gen1, assignment1 = wait_stable(st, gid, list(live.values()), timeout=60, partitions=12)
    assert gen1 == gen0 + 1, (gen0, gen1)
    assert sorted(len(ps) for ps in assignment1.values()) == [1, 1, 2, 2, 2, 2, 2], assignment1
    for n in names:
        assert [e["type"] for e in live[n].callbacks(marks[n])] == ["revoked", "assigned"], live[n].dump()
    for m in live.values():
        assert m.close() == 0


def test_dynamic_rolling_restart_rebalances(tenure_server, java_members):
    """The contrast: without group.instance.id every close (LeaveGroup) and every restart
    (a new member) is a rebalance - generations move and every other member gets callbacks."""
    st, topic, gid = tenure_server, "roll-dynamic", "roll-dynamic-g"
    create_topic(st, topic, 12)
    names = [f"d{i}" for i in range(6)]

    def start(name):
        return java_members(name, st.bootstrap, gid, topic,
                            session_timeout_ms=STATIC_SESSION_MS, heartbeat_interval_ms=1000)

    live = {n: start(n) for n in names}
    gen, _ = wait_stable(st, gid, list(live.values()), timeout=90, partitions=12)
    assert group_view(st, gid)["static"] == {}

    for name in names:
        others = {n: m for n, m in live.items() if n != name}
        marks = {n: m.mark() for n, m in others.items()}
        assert live[name].close() == 0
        gen_left, _ = wait_stable(st, gid, list(others.values()), timeout=30, partitions=12)
        assert gen_left > gen, (gen, gen_left)

        live[name] = start(name)
        gen_back, _ = wait_stable(st, gid, list(live.values()), timeout=45, partitions=12)
        assert gen_back > gen_left, (gen_left, gen_back)
        for n, m in others.items():
            cbs = m.callbacks(marks[n])
            kinds = {e["type"] for e in cbs}
            assert {"revoked", "assigned"} <= kinds, (n, cbs)
            assert {e["generation"] for e in cbs if e["type"] == "assigned"} >= {gen_left, gen_back}, (n, cbs)
        gen = gen_back
    for m in live.values():
        assert m.close() == 0


# ============================================================================ 2. fencing
def test_duplicate_instance_id_fences_older_consumer(tenure_server, java_members):
    st, topic, gid = tenure_server, "fence", "fence-g"
    create_topic(st, topic, 4)
    conf = dict(session_timeout_ms=STATIC_SESSION_MS, heartbeat_interval_ms=1000)
    other = java_members("other", st.bootstrap, gid, topic, instance="other", **conf)
    older = java_members("dup-old", st.bootstrap, gid, topic, instance="dup", **conf)
    gen0, assignment0 = wait_stable(st, gid, [other, older], partitions=4)
    old_member_id = group_view(st, gid)["static"]["dup"]
    other_mark = other.mark()

    newer = java_members("dup-new", st.bootstrap, gid, topic, instance="dup", **conf)
    got = newer.wait_type("assigned", timeout=45)
    assert got["partitions"] == assignment0["dup-old"], (got, assignment0)
    assert got["generation"] == gen0
    assert got["member_id"] != old_member_id

    # the older consumer's next heartbeat is answered FENCED_INSTANCE_ID; poll() throws
    err = older.wait_type("error", timeout=20)
    assert err["exception"] == "org.apache.kafka.common.errors.FencedInstanceIdException", err
    assert older.proc.wait(20) == 3, older.dump()

    v = group_view(st, gid)
    assert v["static"]["dup"] == got["member_id"], v
    assert old_member_id not in v["members"]
    assert (v["state"], v["generation"], len(v["members"])) == ("Stable", gen0, 2), v
    s = newer.status()
    assert (s["partitions"], s["generation"]) == (assignment0["dup-old"], gen0), s
    assert other.callbacks(other_mark) == [], other.dump()
    assert other.status()["partitions"] == assignment0["other"]
    for m in (other, newer):
        assert m.close() == 0


# ============================================================================ 3. SIGKILL
KILL_SESSION_MS = 4000


def test_killed_static_member_expires_with_exactly_one_rebalance(java_members):
    with ServerThread(ServerConfig(port=0, min_session_timeout_ms=1000)) as st:
        topic, gid = "killed", "killed-g"
        create_topic(st, topic, 6)
        conf = dict(session_timeout_ms=KILL_SESSION_MS, heartbeat_interval_ms=500)
        ms = {n: java_members(n, st.bootstrap, gid, topic, instance=n, **conf) for n in ("k0", "k1", "k2")}
        gen0, assignment0 = wait_stable(st, gid, list(ms.values()), partitions=6)
        survivors = [ms["k0"], ms["k2"]]
        marks = {m.name: m.mark() for m in survivors}

        t_kill = time.monotonic()
        ms["k1"].kill()
        # nothing happens until the session timeout expires...
        time.sleep(KILL_SESSION_MS / 1000 * 0.6)
        v = group_view(st, gid)
        assert (v["state"], v["generation"], len(v["members"])) == ("Stable", gen0, 3), v
        # ...then the member is removed and the group rebalances once
        v = wait_server(st, gid, lambda v: v["generation"] != gen0, timeout=KILL_SESSION_MS / 1000 + 10,
                        what="rebalance after session expiry", members=survivors)
        t_rebalance = time.monotonic()
        assert t_rebalance - t_kill >= KILL_SESSION_MS / 1000 - 1.0, t_rebalance - t_kill
        gen1, assignment1 = wait_stable(st, gid, survivors, timeout=30, partitions=6)
        assert gen1 == gen0 + 1, (gen0, gen1)
        for p in assignment0["k1"]:
            assert any(p in ps for ps in assignment1.values()), (assignment0, assignment1)

        # no second rebalance: wait out another full session timeout
        time.sleep(KILL_SESSION_MS / 1000 + 1)
        v = group_view(st, gid)
        assert (v["state"], v["generation"]) == ("Stable", gen0 + 1), v
        assert set(v["static"]) == {"k0", "k2"}, v
        for m in survivors:
            cbs = m.callbacks(marks[m.name])
            assigned = [e for e in cbs if e["type"] == "assigned"]
            assert len(assigned) == 1 and assigned[0]["generation"] == gen0 + 1, (m.name, cbs)
            assert not [e for e in cbs if e["type"] == "lost"], (m.name, cbs)
            assert m.status()["generation"] == gen0 + 1
        for m in survivors:
            assert m.close() == 0


# ============================================================================ 4. Admin
ADMIN_SESSION_MS = 60000   # long: the removal must visibly not be a session expiry


def test_admin_remove_describe_offsets_delete(tenure_server, java_members):
    st, topic, gid = tenure_server, "adm", "adm-g"
    bs = st.bootstrap
    create_topic(st, topic, 6)
    admin(bs, "produce", topic, "6", "5")
    conf = dict(session_timeout_ms=ADMIN_SESSION_MS, heartbeat_interval_ms=1000)
    ms = {n: java_members(n, bs, gid, topic, instance=n, **conf) for n in ("a0", "a1", "a2")}
    gen0, assignment0 = wait_stable(st, gid, list(ms.values()), partitions=6)
    v0 = group_view(st, gid)

    # every member consumes its partitions to the end and commits
    for n, m in ms.items():
        for p in assignment0[n]:
            m.wait_record(p, 4)
        c = m.commit()
        assert c["generation"] == gen0
        assert sorted((o["partition"], o["offset"]) for o in c["offsets"]) == [(p, 5) for p in assignment0[n]]

    out = admin(bs, "describe", gid, "--", "list-groups", "--", "list-offsets", gid)
    [desc] = [e for e in out if e["type"] == "group"]
    assert desc["state"] == "Stable" and desc["assignor"] == RANGE and not desc["simple"], desc
    assert {(d["instance_id"], d["member_id"]) for d in desc["members"]} == \
        {(i, mid) for i, mid in v0["static"].items()}, (desc, v0)
    assert {d["instance_id"]: d["partitions"] for d in desc["members"]} == assignment0
    [groups] = [e for e in out if e["type"] == "groups"]
    assert {"group": gid, "state": "Stable", "type": "Classic", "protocol": "consumer"} in \
        [{k: g[k] for k in ("group", "state", "type", "protocol")} for g in groups["groups"]], groups
    [offs] = [e for e in out if e["type"] == "offsets"]
    assert [(o["topic"], o["partition"], o["offset"]) for o in offs["offsets"]] == \
        [(topic, p, 5) for p in range(6)]

    # a2 shuts down: static, so it stays in the group (60s session) and nothing moves ...
    survivors = [ms["a0"], ms["a1"]]
    marks = {m.name: m.mark() for m in survivors}
    assert ms["a2"].close() == 0
    t_close = time.monotonic()
    v = group_view(st, gid)
    assert "a2" in v["static"] and v["generation"] == gen0 and v["state"] == "Stable", v
    # ... until the operator removes it by instance id: immediate rebalance
    out = admin(bs, "remove-members", gid, "a2", "nosuch")
    by = {(e["type"], e.get("instance")) for e in out}
    assert ("removed", "a2") in by, out
    [bad] = [e for e in out if e["type"] == "remove_error"]
    assert (bad["instance"], bad["exception"]) == \
        ("nosuch", "org.apache.kafka.common.errors.UnknownMemberIdException"), bad
    v = group_view(st, gid)
    assert "a2" not in v["static"] and len(v["members"]) == 2, v
    gen1, assignment1 = wait_stable(st, gid, survivors, timeout=30, partitions=6)
    assert time.monotonic() - t_close < ADMIN_SESSION_MS / 1000 - 10, \
        "that was a session expiry, not the admin removal"
    assert gen1 == gen0 + 1
    for p in assignment0["a2"]:
        assert any(p in ps for ps in assignment1.values()), (assignment0, assignment1)
    for m in survivors:
        assert [e["type"] for e in m.callbacks(marks[m.name])] == ["revoked", "assigned"], m.dump()
    v = group_view(st, gid)
    assert set(v["static"]) == {"a0", "a1"}, v

    out = admin(bs, "describe", gid,
                "--", "alter-offsets", gid, topic, "0=1",
                "--", "delete-groups", gid)
    [desc] = [e for e in out if e["type"] == "group"]
    assert sorted(d["instance_id"] for d in desc["members"]) == ["a0", "a1"], desc
    # Kafka refuses an admin offset commit (generation -1, no member) on an active group ...
    [alter] = [e for e in out if e["type"].startswith("alter")]
    assert alter["type"] == "alter_error", alter
    assert alter["exception"] == "org.apache.kafka.common.errors.UnknownMemberIdException", alter
    # ... and deleting a non-empty group
    [dele] = [e for e in out if e["type"].startswith("delete")]
    assert dele["type"] == "delete_error", dele
    assert dele["exception"] == "org.apache.kafka.common.errors.GroupNotEmptyException", dele
    assert group_view(st, gid)["offsets"] == {(topic, p): 5 for p in range(6)}

    # shut everything down (static: no leave), remove all members, then alter/list/delete work
    for m in survivors:
        assert m.close() == 0
    assert group_view(st, gid)["state"] == "Stable"
    out = admin(bs, "remove-all-members", gid,
                "--", "describe", gid,
                "--", "alter-offsets", gid, topic, "0=1", "1=2",
                "--", "list-offsets", gid)
    [rm] = [e for e in out if e["type"] == "remove_all"]
    assert rm["error"] is None, rm
    [desc] = [e for e in out if e["type"] == "group"]
    assert desc["state"] == "Empty" and desc["members"] == [], desc
    assert [e["type"] for e in out if e["type"].startswith("alter")] == ["altered"], out
    [offs] = [e for e in out if e["type"] == "offsets"]
    assert [(o["partition"], o["offset"]) for o in offs["offsets"]] == \
        [(0, 1), (1, 2), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert [o["metadata"] for o in offs["offsets"][:2]] == ["altered", "altered"]
    v = group_view(st, gid)
    assert (v["state"], v["members"], v["generation"]) == ("Empty", {}, gen1 + 1), v

    out = admin(bs, "delete-groups", gid, "never-existed", "--", "list-offsets", gid)
    res = {e["group"]: e for e in out if e["type"].startswith("delete")}
    assert res[gid]["type"] == "deleted", res
    assert res["never-existed"]["type"] == "delete_error", res
    assert res["never-existed"]["exception"] == "org.apache.kafka.common.errors.GroupIdNotFoundException", res
    [offs] = [e for e in out if e["type"] == "offsets"]
    assert offs["offsets"] == [], offs
    v = group_view(st, gid)
    assert not v["exists"] and v["offsets"] == {}, v


# ============================================================================ 5. committed offsets
def test_restarted_static_members_resume_from_committed_offsets(tenure_server, java_members):
    st, topic, gid = tenure_server, "resume", "resume-g"
    bs = st.bootstrap
    create_topic(st, topic, 4)
    admin(bs, "produce", topic, "4", "10", "first")
    conf = dict(session_timeout_ms=STATIC_SESSION_MS, heartbeat_interval_ms=1000)

    def start(n):
        return java_members(n, bs, gid, topic, instance=n, **conf)

    ms = {n: start(n) for n in ("r0", "r1")}
    gen0, assignment0 = wait_stable(st, gid, list(ms.values()), partitions=4)
    for n, m in ms.items():
        for p in assignment0[n]:
            m.wait_record(p, 9)
        c = m.commit()
        assert sorted((o["partition"], o["offset"]) for o in c["offsets"]) == \
            [(p, 10) for p in assignment0[n]]
    assert group_view(st, gid)["offsets"] == {(topic, p): 10 for p in range(4)}

    # more records arrive; the live members read them but do not commit
    admin(bs, "produce", topic, "4", "5", "second")
    for n, m in ms.items():
        for p in assignment0[n]:
            m.wait_record(p, 14)

    for n in list(ms):
        assert ms[n].close() == 0
        new = ms[n] = start(n)
        got = new.wait_type("assigned", timeout=45)
        assert (got["partitions"], got["generation"]) == (assignment0[n], gen0), got
        for p in assignment0[n]:
            new.wait_record(p, 14)
            offsets = [e["offset"] for e in new.records() if e["partition"] == p]
            # resumed at the committed offset 10: not from 0 (auto.offset.reset=earliest), not at 15
            assert offsets == list(range(10, 15)), (n, p, offsets)
    v = group_view(st, gid)
    assert (v["state"], v["generation"], len(v["members"])) == ("Stable", gen0, 2), v
    out = admin(bs, "list-offsets", gid)
    assert [(o["partition"], o["offset"]) for o in out[0]["offsets"]] == [(p, 10) for p in range(4)]
    for m in ms.values():
        assert m.close() == 0
