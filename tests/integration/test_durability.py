"""Durability with real clients against a real server process (`python -m tenure serve --data-dir`).

1. Crash safety: rounds of load (confluent-kafka static consumers committing and being replaced, raw-wire
   static members doing JoinGroup/SyncGroup/OffsetCommit v8) against a server that is SIGKILLed at a
   seeded-random moment and restarted on the same data dir. Every acknowledged commit and every
   acknowledged instance -> member mapping is there after each restart.
2. Torn tails on a real server: a segment cut mid-batch or with a flipped byte in its last batch is cut
   back at start (and says so); a flipped byte in a middle batch stops the server with exit code 4 and
   leaves the data dir untouched.
3. Restart without rebalance: a Stable static group survives a server restart (same generation, leader,
   members and assignments), its consumers reconnect, and a rolling restart of them afterwards causes no
   rebalance - with confluent-kafka, and with the Java kafka-clients 4.3 consumer (marker `java`).

Run with -s to see the counts each test measures.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support import groupwire as gw
from tests.support.clients import create_topic
from tests.support.procs import TenureProcess
from tests.support.wire import WireClient

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(240)


def say(msg: str) -> None:
    print(f"[durability] {msg}", flush=True)


# ============================================================================ 1. crash safety
SEED = int(os.environ.get("TENURE_DURABILITY_SEED", "20240345"))     # the kill points and the load's choices
ROUNDS = 5
POLICIES = ["batch", "batch", "always", "batch", "batch"]   # the server under load in round i
SEGMENT_BYTES = 8192
OFFSETS_PARTITIONS = 3          # the nine groups spread over three __consumer_offsets logs
CLEANER_INTERVAL_MS = 250       # the log cleaner compacts while the load runs, so kills land mid-pass too
TOPIC, PARTITIONS = "dur", 4


class LoadProcess:
    """tests/support/durability_load.py in a child process; its events parsed as they arrive."""

    def __init__(self, cfg: dict, stderr_path: Path) -> None:
        self.events: list[dict] = []
        self._cv = threading.Condition()
        self.eof = False
        err = open(stderr_path, "ab")
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.durability_load", json.dumps(cfg)],
                                         cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                         text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        finally:
            err.close()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self._cv:
                self.events.append(ev)
                self._cv.notify_all()
        with self._cv:
            self.eof = True
            self._cv.notify_all()

    def wait_event(self, pred, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for ev in self.events:
                    if pred(ev):
                        return ev
                left = deadline - time.monotonic()
                if self.eof or left <= 0:
                    raise AssertionError(f"load process: no such event within {timeout}s; last: {self.events[-5:]}")
                self._cv.wait(left)

    def kill_and_drain(self) -> list[dict]:
        """SIGKILL, then every event it printed (its stdout is read to the end)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        with self._cv:
            self._cv.wait_for(lambda: self.eof, 10)
            assert self.eof, "the load process's stdout did not close"
            return list(self.events)


class Ledger:
    """What the clients were told, folded from the load events, rebased on what each restart shows.

    Commits, per key (group, topic, partition) - each key has exactly one writer at a time, which waits
    for each answer before its next commit, and values only grow:
      base[k]   the last acknowledged value (or the value the last restart showed)
      open[k]   values attempted after it whose outcome is unknown (no answer: sent just before the kill)
    Mappings, per (group, instance):
      mbase[i]  the member id of the last acknowledged join (or what the last restart showed)
      mopen[i]  joins after it that were not acknowledged: the id if the JoinGroup was answered, else None
      seen[i]   every member id ever observed for the instance
    """

    def __init__(self) -> None:
        self.base: dict[tuple, int] = {}
        self.open: dict[tuple, set[int]] = defaultdict(set)
        self.mbase: dict[tuple, str] = {}
        self.mopen: dict[tuple, list] = defaultdict(list)
        self.seen: dict[tuple, set[str]] = defaultdict(set)
        self.round = defaultdict(int)          # counters of the current round
        self.total = defaultdict(int)

    def count(self, name: str, n: int = 1) -> None:
        self.round[name] += n
        self.total[name] += n

    def fold(self, events: list[dict], killed_at: float) -> list[str]:
        """Apply one load run's events; returns the unexpected ones (errors before the kill)."""
        unexpected = []
        for ev in events:
            kind = ev["ev"]
            if kind in ("attempt", "ack", "refused", "failed"):
                keys = [(ev["group"], t, p) for t, p in ev["keys"]]
                v = ev["v"]
                for k in keys:
                    if kind == "attempt":
                        self.open[k].add(v)
                    elif kind == "ack":
                        assert v > self.base.get(k, -1), ("values must grow", k, v, self.base.get(k))
                        self.base[k] = v
                        self.open[k] = {x for x in self.open[k] if x > v}
                    elif kind == "refused":
                        self.open[k].discard(v)
                if kind == "ack":
                    self.count("commits acknowledged")
                    self.count("partition offsets acknowledged", len(keys))
                elif kind == "refused":
                    self.count("commits refused")
                elif kind == "failed":
                    self.count("commits unanswered")
            elif kind == "join":
                self.mopen[(ev["group"], ev["inst"])].append(None)
                self.count("joins sent")
            elif kind == "answered":
                i = (ev["group"], ev["inst"])
                self.seen[i].add(ev["member"])
                self.mopen[i][-1] = ev["member"]
            elif kind == "assigned":
                i = (ev["group"], ev["inst"])
                self.seen[i].add(ev["member"])
                if self.mbase.get(i) != ev["member"]:
                    self.count("mappings acknowledged")
                self.mbase[i] = ev["member"]
                self.mopen[i] = []
            elif kind in ("error", "client_error") and ev["t"] < killed_at:
                unexpected.append(f"{ev.get('group')}/{ev.get('inst')}: {ev['what']}")
        return unexpected

    def check(self, fetched: dict, described: dict) -> list[str]:
        """Compare the restarted server with the ledger, count, rebase. Returns the violations."""
        lost = []
        keys = set(self.base) | {k for k, vs in self.open.items() if vs}
        got = {(g, t, p): v for g, offs in fetched.items() for (t, p), v in offs.items()}
        for k in sorted(keys | set(got)):
            r, a, o = got.get(k), self.base.get(k), self.open.get(k, set())
            self.count("offsets checked")
            if o:
                self.count("offsets with a commit in flight")
            if r == a:
                self.count("offsets = last acknowledged")
            elif r in o:
                self.count("offsets = the commit in flight")
            else:
                lost.append(f"offset {k}: server has {r}, last acknowledged {a}, in flight {sorted(o)}")
                continue
            if r is not None:
                self.base[k] = r
            self.open[k] = set()
        self.count("offsets lost", len(lost))

        groups = {g for g, _ in set(self.mbase) | set(self.mopen)}
        servers = {}
        for g in groups:
            d = described.get(g)
            if d is None:
                continue
            # a loaded group with members is Stable; one without is Empty, or unknown ("Dead")
            allowed = ("Stable",) if d["members"] else ("Empty", "Dead")
            if d["state"] not in allowed:
                lost.append(f"group {g}: loaded in state {d['state']} with {len(d['members'])} member(s)")
            for mid, (iid, _, _) in d["members"].items():
                if iid is None:
                    lost.append(f"group {g}: a dynamic member {mid} nobody created")
                servers[(g, iid)] = mid
            if len(d["members"]) != len(set(iid for iid, _, _ in d["members"].values())):
                lost.append(f"group {g}: two members for one instance id: {d['members']}")
        mlost = 0
        for i in sorted(set(self.mbase) | set(self.mopen) | set(servers), key=str):
            r, a, o = servers.get(i), self.mbase.get(i), self.mopen.get(i, [])
            known = {x for x in o if x is not None}
            self.count("mappings checked")
            if o:
                self.count("mappings with a join in flight")
            if r == a:
                self.count("mappings = last acknowledged")
            elif r is not None and (r in known or (None in o and r not in self.seen[i])):
                self.count("mappings = the join in flight")
            else:
                mlost += 1
                lost.append(f"mapping {i}: server has {r}, last acknowledged {a}, in flight {o}")
                continue
            if r is not None:
                self.mbase[i] = r
                self.seen[i].add(r)
            self.mopen[i] = []
        self.count("mappings lost", mlost)
        return lost


def _server_view(bootstrap: str, groups) -> tuple[dict, dict]:
    with WireClient.to(bootstrap, timeout=15) as c:
        return gw.fetch_all(c, groups), gw.describe(c, groups)


def test_acknowledged_commits_and_mappings_survive_sigkill(tmp_path, record_property):
    """ROUNDS rounds: a server (--fsync batch; round 2 --fsync always; --segment-bytes 8192, three
    __consumer_offsets partitions, the log cleaner every 250 ms) under load
    from a separate load process is SIGKILLed at a seeded-random moment, then restarted on the same data
    dir (a new port, so no old client can reach it), and the state it serves is compared with what the
    clients were acknowledged. The ledger is then rebased on that state, so every later round also
    checks that earlier data survived every later restart.

    Strongest statement asserted, per partition: OffsetFetch == the last acknowledged offset, unless a
    later commit was in flight at the kill (sent, no answer), in which case it is that one or the last
    acknowledged one; nothing else (never older, never a refused commit, no phantom keys). Per static
    instance: DescribeGroups names the member id of the last acknowledged join, unless a later join was
    in flight, in which case it is that join's id (if the JoinGroup was answered) or an id never seen."""
    rng = random.Random(SEED)
    data = tmp_path / "data"
    srv = TenureProcess(data, fsync=POLICIES[0], segment_bytes=SEGMENT_BYTES, stderr_path=tmp_path / "server.log",
                        extra=("--offsets-partitions", str(OFFSETS_PARTITIONS),
                               "--cleaner-interval-ms", str(CLEANER_INTERVAL_MS)))
    ledger = Ledger()
    confluent = ([{"group": f"c{i}", "instance": f"c{i}", "partitions": list(range(PARTITIONS))} for i in range(3)]
                 + [{"group": "s", "instance": f"s{i}", "partitions": [i]} for i in range(3)])
    wire = [{"group": f"w{i}", "instance": f"w{i}", "partitions": [0, 1]} for i in range(3)]
    groups = sorted({d["group"] for d in confluent + wire})
    ports: set[int] = set()
    t_start = time.monotonic()
    load = None
    try:
        srv.start()
        ports.add(srv.port)
        create_topic(srv.bootstrap, TOPIC, PARTITIONS)
        for rnd in range(ROUNDS):
            cfg = {"bootstrap": srv.bootstrap, "round": rnd, "seed": rng.random(), "topic": TOPIC,
                   "confluent": confluent, "wire": wire, "session_ms": 60000, "replace_p": 0.04,
                   "pause_s": [0.004, 0.02], "value_base": (rnd + 1) * 10_000_000}
            load = LoadProcess(cfg, tmp_path / "load.log")
            started = load.wait_event(lambda e: e["ev"] == "start", 30)
            delay = rng.uniform(0.5, 3.0)
            time.sleep(max(0.0, started["t"] + delay - time.monotonic()))
            killed_at = time.monotonic()
            srv.kill()
            events = load.kill_and_drain()
            load = None
            unexpected = ledger.fold(events, killed_at)

            srv.fsync = POLICIES[rnd + 1] if rnd + 1 < ROUNDS else "batch"
            t0 = time.monotonic()
            srv.start()
            while srv.port in ports:              # an old client must not be able to reach it
                srv.kill()
                srv.start()
            ports.add(srv.port)
            restart_s = time.monotonic() - t0
            fetched, described = _server_view(srv.bootstrap, groups)
            lost = ledger.check(fetched, described)
            cut = [ln.split(": ", 2)[-1] for ln in srv.stderr().splitlines()
                   if "recovery cut" in ln or "interrupted compaction" in ln]
            loaded = [ln.split("tenure.server: ", 1)[-1] for ln in srv.stderr().splitlines() if "loaded __consumer" in ln]
            segs = len(list(data.glob("__consumer_offsets-*/*.log")))
            say(f"round {rnd} (--fsync {POLICIES[rnd]}): killed {delay:.2f}s into the load; restarted in "
                f"{restart_s:.2f}s ({loaded[-1] if loaded else '?'}; {segs} segment files)"
                + (f"; recovery: {cut}" if cut else ""))
            say("  " + ", ".join(f"{k}: {v}" for k, v in ledger.round.items()))
            ledger.round.clear()
            assert not lost, "\n".join(lost)
            assert not unexpected, "load errors before the kill:\n" + "\n".join(unexpected)
        srv.terminate()
    finally:
        if load is not None:
            load.kill_and_drain()
        srv.kill()
    t = ledger.total
    say(f"seed {SEED}, {ROUNDS} kills in {time.monotonic() - t_start:.1f}s: acknowledged {t['commits acknowledged']} "
        f"commits ({t['partition offsets acknowledged']} partition offsets) and {t['mappings acknowledged']} "
        f"instance->member mappings; after the restarts {t['offsets checked']} offset checks: "
        f"{t['offsets = last acknowledged']} = last acknowledged, {t['offsets = the commit in flight']} = the commit "
        f"in flight ({t['offsets with a commit in flight']} had one), lost {t['offsets lost']}; "
        f"{t['mappings checked']} mapping checks: {t['mappings = last acknowledged']} = last acknowledged, "
        f"{t['mappings = the join in flight']} = the join in flight ({t['mappings with a join in flight']} had one), "
        f"lost {t['mappings lost']}")
    for k, v in t.items():
        record_property(k.replace(" ", "_").replace("=", "eq").replace(">", ""), v)
    assert t["offsets lost"] == 0 and t["mappings lost"] == 0
    assert t["commits acknowledged"] >= 50 and t["mappings acknowledged"] >= 9, dict(t)


# ============================================================================ 1b. nothing shows what is not durable
class _Pending:
    """A request sent on its own connection whose answer is read later."""

    def __init__(self, bootstrap: str, req_and_version) -> None:
        from tests.support.wire import request_bytes
        self.req, self.version = req_and_version
        self.conn = WireClient.to(bootstrap, timeout=10)
        self.conn.send_raw(request_bytes(self.req, self.version, 1))

    def answered_within(self, seconds: float) -> bool:
        import select
        return bool(select.select([self.conn.sock], [], [], seconds)[0])

    def answer(self):
        import struct

        from tests.support.wire import response_class
        payload = self.conn.read_frame()
        self.conn.close()
        return response_class(self.req).decode(struct.pack(">i", len(payload)) + payload, version=self.version,
                                               header=True, framed=True)


@pytest.fixture
def fsync_gate(monkeypatch) -> threading.Event:
    """A slow disk on demand: while the returned event is clear, every os.fsync waits for it."""
    import os as _os
    gate = threading.Event()
    gate.set()
    real_fsync = _os.fsync

    def held_fsync(fd):
        assert gate.wait(30), "fsync gate never opened"
        real_fsync(fd)
    monkeypatch.setattr(_os, "fsync", held_fsync)
    yield gate
    gate.set()


@pytest.mark.parametrize("policy", ["batch", "always"])
def test_no_answer_shows_group_state_before_its_records_are_fsynced(tmp_path, fsync_gate, policy):
    """With fsync held back (a slow disk), answers that carry no records of their own but show state
    whose records are still waiting for their fsync - a follower's SyncGroup after the leader's wrote the
    generation's GroupMetadata, an OffsetFetch after another client's OffsetCommit - wait for that fsync
    like the requests that wrote it. (Before the fix they left at once: a power loss could then take back
    a generation, an assignment and an instance->member mapping that a member had been given, or an
    offset another client had read.)"""
    from tenure.config import ServerConfig
    from tenure.server import ServerThread

    gate = fsync_gate
    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path / "data"), fsync=policy,
                                   initial_rebalance_delay_ms=300)) as st:
        bs = st.bootstrap
        create_topic(bs, "t", 1)                       # commits are for partitions that exist
        end = lambda: st.call(lambda: sum(p.log_end_offset for p in st.server.runtime.offsets_topic.partitions))  # noqa: E731
        # two static members join one generation (within the initial delay)
        ja = _Pending(bs, gw.join_request("hold-g", "", "a", "t", session_ms=30000))
        jb = _Pending(bs, gw.join_request("hold-g", "", "b", "t", session_ms=30000))
        ra, rb = ja.answer(), jb.answer()
        assert ra.error_code == rb.error_code == 0 and ra.generation_id == rb.generation_id
        (leader, li), (follower, fi) = sorted([(ra, "a"), (rb, "b")], key=lambda x: x[0].leader != x[0].member_id)
        assert leader.member_id == leader.leader

        gate.clear()                                   # from here on, no fsync completes
        before = end()
        assignments = {m.member_id: gw.assignment("t", [i]) for i, m in enumerate(leader.members)}
        lsync = _Pending(bs, gw.sync_request("hold-g", leader.member_id, leader.generation_id, li, assignments))
        wait_until = time.monotonic() + 10
        while end() == before:                         # the GroupMetadata record is written, not synced
            assert time.monotonic() < wait_until, "the leader's SyncGroup wrote nothing"
            time.sleep(0.01)
        fsync_ = _Pending(bs, gw.sync_request("hold-g", follower.member_id, follower.generation_id, fi))
        commit = _Pending(bs, gw.commit_request("hold-simple", "", -1, None, "t", {0: 42}))
        while end() == before + 1:
            assert time.monotonic() < wait_until, "the OffsetCommit wrote nothing"
            time.sleep(0.01)
        fetch = _Pending(bs, gw.fetch_request(["hold-simple"]))
        time.sleep(1.0)                                # time enough for any answer that does not wait
        held = {name: p.answered_within(0) for name, p in
                [("leader SyncGroup", lsync), ("follower SyncGroup", fsync_), ("OffsetCommit", commit),
                 ("OffsetFetch", fetch)]}
        assert not any(held.values()), f"answered before the fsync: {[n for n, a in held.items() if a]}"

        gate.set()
        assert lsync.answer().error_code == 0
        f = fsync_.answer()
        assert f.error_code == 0 and gw.decode_assignment(f.assignment) == {"t": [1]}, f
        assert gw.commit_codes(commit.answer()) == {0: 0}
        assert gw.fetched(fetch.answer()) == {"hold-simple": {("t", 0): 42}}


@pytest.mark.parametrize("policy", ["batch", "always"])
def test_produce_with_acks_is_answered_only_after_its_fsync(tmp_path, fsync_gate, policy):
    """Produce with acks=1 and acks=-1 to a user topic on a data dir: written at once, but no answer while
    the fsync is held back; once it completes the answers carry the base offsets."""
    from tenure.config import ServerConfig
    from tenure.server import ServerThread
    from tests.support.wire import build_batch, produce_request

    gate = fsync_gate
    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path / "data"), fsync=policy)) as st:
        st.call(lambda: st.server.topics.create("held-t", 1))
        gate.clear()
        all_acks = _Pending(st.bootstrap, (produce_request("held-t", 0, build_batch([(b"k1", b"v1")]), acks=-1), 9))
        leader = _Pending(st.bootstrap, (produce_request("held-t", 0, build_batch([(b"k2", b"v2")]), acks=1), 9))
        time.sleep(1.0)
        assert not all_acks.answered_within(0) and not leader.answered_within(0), "answered before the fsync"
        assert st.call(lambda: st.server.topics.get("held-t").partitions[0].log_end_offset) == 2   # written
        gate.set()
        bases = sorted(r.responses[0].partition_responses[0].base_offset for r in (all_acks.answer(), leader.answer()))
        assert bases == [0, 1]


# ============================================================================ 2. torn tails on a real server
OFFSETS_DIR = "__consumer_offsets-0"
TORN_COMMITS = 60


def _confluent_committer(bootstrap: str, group: str):
    """A confluent-kafka consumer used only to commit and read offsets (no subscription: generation -1)."""
    from confluent_kafka import Consumer
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "log_level": 0})


def _commit(c, topic: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import TopicPartition
    res = c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    assert all(tp.error is None for tp in res), res


def _committed(c, topic: str, partitions) -> dict[int, int | None]:
    from confluent_kafka import TopicPartition
    res = c.committed([TopicPartition(topic, p) for p in partitions], timeout=15)
    return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in res}


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _batches(path: Path):
    from tenure.storage import parse_batches
    return parse_batches(path.read_bytes(), verify_crc=True)


@pytest.fixture(scope="module")
def written_dir(tmp_path_factory):
    """A data dir written through a real server: a static member (raw wire JoinGroup/SyncGroup), then
    TORN_COMMITS commits by confluent-kafka of offset i to tt/0 and tt/1 (one batch each), segments of
    4096 bytes; stopped with SIGTERM (exit 0)."""
    base = tmp_path_factory.mktemp("written")
    data = base / "data"
    srv = TenureProcess(data, fsync="always", segment_bytes=4096, stderr_path=base / "server.log")
    try:
        srv.start()
        create_topic(srv.bootstrap, "tt", 2)
        with WireClient.to(srv.bootstrap) as w:
            j = gw.join(w, "tt-static", "", "i0", "tt", session_ms=60000)
            assert j.error_code == 0, j
            s = gw.sync(w, "tt-static", j.member_id, j.generation_id, "i0",
                        {j.member_id: gw.assignment("tt", [0, 1])})
            assert s.error_code == 0, s
        c = _confluent_committer(srv.bootstrap, "tt")
        for i in range(1, TORN_COMMITS + 1):
            _commit(c, "tt", {0: i, 1: i})
        c.close()
        assert srv.terminate() == 0, srv.stderr()
    finally:
        srv.kill()
    segs = sorted((data / OFFSETS_DIR).glob("*.log"))
    assert len(segs) >= 3, segs                     # it rolled: the newest segment is not the only one
    batches = [h for seg in segs for h in _batches(seg)]
    return {"dir": data, "member": j.member_id, "batches": len(batches),
            "records": sum(h.records_count for h in batches), "last_records": batches[-1].records_count}


LOADED = re.compile(r"loaded __consumer_offsets: (\d+) record\(s\) in (\d+) batch\(es\)")


def _restart_and_check(tmp_path, data: Path, expect_offset: int, member: str) -> str:
    """Start a server on `data`, check what it serves and that it serves on; return its stderr."""
    srv = TenureProcess(data, fsync="batch", segment_bytes=4096, stderr_path=tmp_path / "server.log")
    try:
        srv.start()
        err = srv.stderr()
        c = _confluent_committer(srv.bootstrap, "tt")
        assert _committed(c, "tt", [0, 1]) == {0: expect_offset, 1: expect_offset}
        with WireClient.to(srv.bootstrap) as w:
            d = gw.describe(w, ["tt-static"])["tt-static"]
        assert d["state"] == "Stable" and gw.instance_map(d) == {"i0": member}, d
        # it serves on: a commit lands after the cut, and is there after a clean restart
        _commit(c, "tt", {0: 1000, 1: 1001})
        assert _committed(c, "tt", [0, 1]) == {0: 1000, 1: 1001}
        c.close()
        assert srv.terminate() == 0
        srv.start()
        assert "recovery cut" not in srv.stderr(), srv.stderr()
        c = _confluent_committer(srv.bootstrap, "tt")
        assert _committed(c, "tt", [0, 1]) == {0: 1000, 1: 1001}
        c.close()
        assert srv.terminate() == 0
        return err
    finally:
        srv.kill()


@pytest.mark.parametrize("damage", ["truncated mid-batch", "flipped byte in the last batch"])
def test_damaged_tail_is_cut_reported_and_served_on(tmp_path, written_dir, damage):
    """The newest __consumer_offsets segment loses its last batch (a torn write, or a corrupt last batch):
    the server starts, logs the file, byte position and reason of the cut, serves every commit before it
    (offset TORN_COMMITS - 1; the static mapping too) and takes new commits after it."""
    data = tmp_path / "data"
    shutil.copytree(written_dir["dir"], data)
    seg = sorted((data / OFFSETS_DIR).glob("*.log"))[-1]
    last = _batches(seg)[-1]
    raw = bytearray(seg.read_bytes())
    if damage == "truncated mid-batch":
        cut_to = last.position + last.size // 2
        seg.write_bytes(raw[:cut_to])
        reason = "torn batch"
    else:
        raw[last.position + last.size - 3] ^= 0x10       # inside the last record: the CRC no longer matches
        seg.write_bytes(raw)
        reason = "CRC-32C"
    size_before = seg.stat().st_size
    err = _restart_and_check(tmp_path, data, TORN_COMMITS - 1, written_dir["member"])
    # everything before the cut was replayed: every batch but the last one
    assert [tuple(map(int, m)) for m in LOADED.findall(err)] == \
        [(written_dir["records"] - written_dir["last_records"], written_dir["batches"] - 1)], err
    cut = [ln for ln in err.splitlines() if "recovery cut" in ln]
    assert len(cut) == 1, err
    assert seg.name in cut[0] and f"at byte {last.position} " in cut[0] and reason in cut[0], cut[0]
    assert f"cut {size_before - last.position} byte(s)" in cut[0], cut[0]
    say(f"{damage}: {cut[0].split(': ', 1)[1]}")


@pytest.mark.parametrize("where", ["a middle batch of the newest segment", "the last batch of an older segment"])
def test_damage_before_the_tail_refuses_to_start_and_touches_nothing(tmp_path, written_dir, where):
    """A flipped byte with valid data after it is never cut: the server exits 4 before listening, naming
    the file and byte position, and the data dir is byte-for-byte what it was."""
    data = tmp_path / "data"
    shutil.copytree(written_dir["dir"], data)
    segs = sorted((data / OFFSETS_DIR).glob("*.log"))
    if where.startswith("a middle"):
        seg = segs[-1]
        hs = _batches(seg)
        assert len(hs) >= 3, hs
        victim = hs[len(hs) // 2]
    else:
        seg = segs[-2]
        victim = _batches(seg)[-1]
    raw = bytearray(seg.read_bytes())
    raw[victim.position + victim.size - 3] ^= 0x10
    seg.write_bytes(raw)
    before = _snapshot(data)
    srv = TenureProcess(data, fsync="batch", stderr_path=tmp_path / "server.log")
    rc, err = srv.run_to_exit(30)
    assert rc == 4, err
    assert f"{seg} at byte {victim.position} (offset {victim.base_offset})" in err, err
    assert "CRC-32C" in err and "Traceback" not in err, err
    assert _snapshot(data) == before, "the refused start changed the data dir"
    say(f"{where}: exit {rc}: {err.strip().splitlines()[-1]}")


# ============================================================================ 3. restart without rebalance
@pytest.fixture
def quiet_librdkafka(monkeypatch):
    """GroupMember's confluent consumers (tests/support/groups.py) with librdkafka's own log limited to
    critical: while the server restarts, each would print a "Connection refused" line every 50 ms to
    stderr, which -s shows. Their errors still reach GroupMember.errors through error_cb."""
    import confluent_kafka
    real = confluent_kafka.Consumer
    monkeypatch.setattr(confluent_kafka, "Consumer", lambda conf: real({**conf, "log_level": 2}))


def _admin_group(srv: TenureProcess, group: str) -> dict:
    v = srv.admin(f"/groups/{group}")
    assert v is not None, f"group {group} unknown to the server"
    return v


def _essentials(v: dict) -> dict:
    """What a restart must keep of a group (the admin endpoint's view)."""
    return {"state": v["state"], "generation": v["generation"], "leader": v["leader"], "protocol": v["protocol"],
            "static": v["static_members"],
            "members": {m["member_id"]: (m["group_instance_id"], m["client_id"], m["session_timeout_ms"],
                                         json.dumps(m["assignment"], sort_keys=True)) for m in v["members"]}}


def _alive(members) -> bool:
    for m in members:
        assert m.crash is None, f"{m.name} crashed: {m.crash!r}"
    return True


def _described(srv: TenureProcess, group: str) -> dict:
    with WireClient.to(srv.bootstrap) as w:
        return gw.describe(w, [group])[group]


def _wait_admin(srv: TenureProcess, group: str, pred, timeout: float, what: str) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        v = srv.admin(f"/groups/{group}")
        if v is not None and pred(v):
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s; server: {v}")
        time.sleep(0.1)


def test_loaded_static_group_is_stable_and_a_rejoining_member_gets_its_partitions_back(tmp_path, quiet_librdkafka):
    """Three confluent-kafka static members form a group and close (static: no LeaveGroup); the server is
    stopped (SIGTERM) and started again on the same data dir. DescribeGroups shows the same Stable group
    (members, instance ids, client ids, assignments), the admin endpoint the same generation and leader;
    one member rejoins with its group.instance.id and gets exactly its partitions at that generation,
    with no rebalance (the two absent members stay, nothing moves)."""
    from tests.support.groups import GroupMember, member_id

    data = tmp_path / "data"
    srv = TenureProcess(data, extra=("--admin-port", "0"), stderr_path=tmp_path / "server.log")
    members: list = []
    try:
        srv.start()
        create_topic(srv.bootstrap, "lg", 6)
        members = [GroupMember("confluent", srv.bootstrap, "lg-g", "lg", f"l{i}", session_timeout_ms=30000,
                               rebalance_timeout_ms=30000).start() for i in range(3)]
        v0 = _wait_admin(srv, "lg-g", lambda v: _alive(members) and v["state"] == "Stable" and len(v["members"]) == 3
                         and sorted(p for m in members for p in m.assignment) == list(range(6))
                         and all(m["assignment"] for m in v["members"]), 60, "a Stable group of three")
        time.sleep(1.0)
        v0 = _admin_group(srv, "lg-g")
        before = {m.instance_id: m.assignment for m in members}
        d0 = _described(srv, "lg-g")
        for m in members:
            m.stop()
        members = []
        assert _essentials(_admin_group(srv, "lg-g")) == _essentials(v0)      # closing left nothing

        assert srv.terminate() == 0
        srv.start(port=srv.port)
        v1 = _admin_group(srv, "lg-g")
        assert _essentials(v1) == _essentials(v0), (v0, v1)
        d1 = _described(srv, "lg-g")
        assert d1 == d0 and d1["state"] == "Stable" and len(d1["members"]) == 3, (d0, d1)
        say(f"loaded: {v1['state']}, generation {v1['generation']}, leader {v1['leader']}, "
            f"{len(v1['members'])} members: {v1['static_members']}")

        back = GroupMember("confluent", srv.bootstrap, "lg-g", "lg", "l1", session_timeout_ms=30000,
                           rebalance_timeout_ms=30000).start()
        members = [back]
        assert back.wait_assigned(30) == before["l1"]
        time.sleep(1.0)
        v2 = _admin_group(srv, "lg-g")
        new_id = member_id(back)
        assert (v2["state"], v2["generation"]) == ("Stable", v0["generation"]), v2
        assert v2["static_members"] == {**v0["static_members"], "l1": new_id}, v2
        assert [k for k, p in back.events_copy() if p] == ["assign"], back.events_copy()
        say(f"l1 rejoined as {new_id}: partitions {sorted(back.assignment)}, generation {v2['generation']}")
    finally:
        for m in members:
            m.stop()
        srv.kill()


class _JavaRoll:
    """Six Java kafka-clients 4.3 consumers (tests/java/StaticConsumer.java), one JVM each.

    metadata.recovery.strategy=none: with the 4.x default (rebootstrap), a client that can reach no
    broker of its metadata at all - every client of a one-broker cluster while that broker restarts -
    swaps its metadata for the bootstrap view, which has no partitions; the group leader then sees its
    subscribed topic "change" and rejoins ("cached metadata has changed"): one full rebalance after
    every restart of a single broker, a real Kafka one too. That is the client's doing, not the
    server's; `none` keeps the metadata it had and reconnects to the same broker."""
    session_ms = 20000

    def __init__(self, factory, bootstrap: str, group: str, topic: str) -> None:
        self.factory, self.bootstrap, self.group, self.topic = factory, bootstrap, group, topic

    def start(self, name: str):
        return self.factory(name, self.bootstrap, self.group, self.topic, instance=name,
                            session_timeout_ms=self.session_ms, heartbeat_interval_ms=1000,
                            metadata_recovery_strategy="none")

    @staticmethod
    def assignment(m) -> frozenset | None:
        cb = m.last_callback()
        return frozenset(cb["partitions"]) if cb and cb["type"] == "assigned" else None

    @staticmethod
    def mark(m) -> int:
        return m.mark()

    @staticmethod
    def callbacks(m, since) -> list:
        return [(e["type"], e["partitions"], e["generation"]) for e in m.callbacks(since)]

    @staticmethod
    def commit(m) -> int:
        """commitSync through the member; returns the generation the client holds."""
        mark = m.mark()
        m.send("commit")
        e = m.wait_for(lambda e: e["type"] in ("committed", "commit_error"), 60, since=mark, what="commit")
        assert e["type"] == "committed", (e, m.dump())
        return e["generation"]

    def wait_assigned(self, m, timeout: float) -> tuple[frozenset, int, str]:
        e = m.wait_type("assigned", timeout)
        return frozenset(e["partitions"]), e["generation"], e["member_id"]

    @staticmethod
    def close(m) -> None:
        assert m.close() == 0, m.dump()

    @staticmethod
    def dump(m) -> str:
        return m.dump()


class _ConfluentRoll:
    """Six confluent-kafka consumers (tests/support/groups.py GroupMember threads)."""
    session_ms = 20000

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic

    def start(self, name: str):
        from tests.support.groups import GroupMember
        return GroupMember("confluent", self.bootstrap, self.group, self.topic, name,
                           session_timeout_ms=self.session_ms, heartbeat_interval_ms=1000,
                           rebalance_timeout_ms=self.session_ms).start()

    @staticmethod
    def assignment(m) -> frozenset | None:
        assert m.crash is None, m.crash
        return m.assignment or None

    @staticmethod
    def mark(m) -> int:
        return len(m.events_copy())

    @staticmethod
    def callbacks(m, since) -> list:
        return m.events_copy()[since:]

    @staticmethod
    def commit(m) -> None:
        from tests.support.groups import commit_offsets
        commit_offsets(m, {p: 0 for p in m.assignment})

    def wait_assigned(self, m, timeout: float) -> tuple[frozenset, None, str]:
        from tests.support.groups import member_id
        return m.wait_assigned(timeout), None, member_id(m)

    @staticmethod
    def close(m) -> None:
        m.stop()

    @staticmethod
    def dump(m) -> str:
        return f"{m.name}: events={m.events_copy()} errors={m.errors}"


def _restart_then_roll(tmp_path, make_roll) -> None:
    """Six static consumers on 12 partitions are Stable; the server is stopped (SIGTERM) and started again
    on the same data dir and port; the consumers reconnect on their own (a commit from each goes
    through, at the old generation); then each consumer in turn is closed and restarted with its
    group.instance.id. Throughout: the generation never moves from its value before the server restart,
    no consumer but the restarted one sees a rebalance callback, each restarted one gets exactly its
    previous partitions."""
    group, topic = "roll-g", "roll"
    srv = TenureProcess(tmp_path / "data", extra=("--admin-port", "0"), stderr_path=tmp_path / "server.log")
    live: dict = {}
    roll = None
    try:
        srv.start()
        create_topic(srv.bootstrap, topic, 12)
        roll = make_roll(srv.bootstrap, group, topic)
        names = [f"m{i}" for i in range(6)]
        t0 = time.monotonic()
        live = {n: roll.start(n) for n in names}

        def settled(v):
            owned = [roll.assignment(m) for m in live.values()]
            return (v["state"] == "Stable" and len(v["members"]) == 6 and all(owned)
                    and sorted(p for ps in owned for p in ps) == list(range(12)))
        _wait_admin(srv, group, settled, 90, "six members Stable")
        time.sleep(1.5)
        v0 = _wait_admin(srv, group, settled, 10, "six members Stable")
        gen0 = v0["generation"]
        before = {n: roll.assignment(m) for n, m in live.items()}
        assert all(len(ps) == 2 for ps in before.values()), before
        formed_s = time.monotonic() - t0
        marks = {n: roll.mark(m) for n, m in live.items()}

        def quiet(except_name=None):
            for n, m in live.items():
                if n != except_name:
                    assert roll.callbacks(m, marks[n]) == [], f"{n} saw a rebalance\n{roll.dump(m)}"

        # ---- the server restarts under the live group
        t1 = time.monotonic()
        assert srv.terminate() == 0, srv.stderr()
        srv.start(port=srv.port)
        down_s = time.monotonic() - t1
        v1 = _admin_group(srv, group)
        assert _essentials(v1) == _essentials(v0), (v0, v1)
        for n, m in live.items():                 # each reconnects by itself; its commit is accepted
            g = roll.commit(m)
            assert g in (None, gen0), (n, g, gen0)
        time.sleep(3.5)                          # > 3 heartbeat intervals: a rebalance would be under way
        v = _admin_group(srv, group)
        assert _essentials(v) == _essentials(v0), (f"the server restart caused a rebalance:\nbefore {v0}\n"
                                                   f"after {v}\n" + "\n".join(roll.dump(m) for m in live.values())
                                                   + "\n" + srv.stderr()[-5000:])
        quiet()
        reconnected_s = time.monotonic() - t1

        # ---- then a rolling restart of the consumers
        t2 = time.monotonic()
        for n in names:
            old_id = _admin_group(srv, group)["static_members"][n]
            roll.close(live[n])
            live[n] = roll.start(n)
            parts, gen, new_id = roll.wait_assigned(live[n], 60)
            assert parts == before[n], (n, parts, before[n])
            assert gen in (None, gen0), (n, gen, gen0)
            marks[n] = roll.mark(live[n])
            v = _admin_group(srv, group)
            assert (v["state"], v["generation"], len(v["members"])) == ("Stable", gen0, 6), v
            assert v["static_members"][n] == new_id != old_id, (n, v)
            quiet(n)
        time.sleep(2.5)
        v = _admin_group(srv, group)
        assert (v["state"], v["generation"], len(v["members"])) == ("Stable", gen0, 6), v
        quiet()
        assert {n: roll.assignment(m) for n, m in live.items()} == before
        say(f"{type(roll).__name__}: formed in {formed_s:.1f}s at generation {gen0}; server restart + "
            f"reconnect of six consumers {reconnected_s:.1f}s (server down {down_s:.1f}s); rolling restart "
            f"{time.monotonic() - t2:.1f}s; generation still {v['generation']}, no callbacks")
        for m in live.values():
            roll.close(m)
        live = {}
        assert srv.terminate() == 0
    finally:
        if roll is not None and isinstance(roll, _ConfluentRoll):
            for m in live.values():
                try:
                    m.stop(15)
                except AssertionError:
                    pass
        srv.kill()


def test_server_restart_then_rolling_restart_confluent(tmp_path, quiet_librdkafka):
    _restart_then_roll(tmp_path, _ConfluentRoll)


@pytest.mark.java
def test_server_restart_then_rolling_restart_java(tmp_path, java_members):
    _restart_then_roll(tmp_path, lambda bs, g, t: _JavaRoll(java_members, bs, g, t))


@pytest.fixture
def java_members():
    """JavaMember processes (tests/integration/test_static_java.py); every JVM left is SIGKILLed."""
    from tests.integration.test_static_java import JavaMember
    started: list = []

    def start(*args, **kwargs):
        m = JavaMember(*args, **kwargs)
        started.append(m)
        return m
    yield start
    for m in started:
        m.terminate()
