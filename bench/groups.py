"""Static-membership group benchmarks (figures, never assertions).

1. formation + rolling restart: N confluent-kafka (librdkafka) static members (group.instance.id)
   subscribe to one topic of 12 partitions. Against tenure and against librdkafka's own mock cluster
   (`test.mock.num.brokers`), in the same script with the same client settings:
   - formation: time from creating the first consumer until the group is STABLE;
   - rolling restart: each member in turn is closed and replaced by a new consumer with the same
     instance id; the restart of one member lasts from its close until the group is STABLE again, and
     the rolling-restart time is the sum over the members (the quiet window that confirms each stable
     state is not counted; a late change seen in the final observation window is).
   STABLE means: every live member has an assignment, together they hold all 12 partitions exactly
   once, and no member has seen an assign/revoke callback for --quiet-s (default 1 s).
   Rebalances are counted the same way on both targets, from the clients: each member records the
   group generation (librdkafka's consumer group metadata) in every on_assign callback, and the script
   reads every member's current generation at each stable point; a rebalance is one step of the
   newest generation any member has seen (a generation whose sync never completed counts too). After the last restart the script watches for session timeout + 3 s
   more, so a rebalance the coordinator starts when a closed member's session expires is counted too.
   The mock auto-creates topics with 4 partitions, so the script creates the mock cluster itself through
   librdkafka's mock API (ctypes, on the library confluent-kafka ships) with a 12-partition topic. Each
   target keeps its own initial rebalance delay (tenure its server default, see bench/initial_delay.py; the
   mock 3000 ms, which lets all members join one generation - with 0 the mock forms in several 9 s rounds);
   --mock-initial-delay-ms overrides the mock's.
   A rolling restart is bounded by --restart-budget-s (shrunk to fit --deadline-s); if the budget runs out, the output
   prints the measured part and, clearly labelled EXTRAPOLATED, the per-restart median times N.
2. heartbeats: 1,000 static members in 100 groups (formed with kafka-python's codec; a 30-minute session so
   members set up first do not expire while the rest are set up) send Heartbeat v4 for a fixed time over one
   connection per group: each round writes one heartbeat per member of the group in one write (--hb-depth; 1:
   one at a time) and the next round starts when all are answered. The heartbeats are encoded once before the
   run (only the correlation id is patched; answers are not decoded), from --hb-procs generator processes, so
   the server rather than the generator is the bound; prints throughput, latency percentiles and the CPU per
   heartbeat of the server and of the generator.

    .venv/bin/python bench/groups.py [--members 6,50] [--restart-budget-s 1000] [--hb-seconds 10]

Both targets get session.timeout.ms=10000 and max.poll.interval.ms=10000 (the rebalance timeout), so a
member the coordinator waits for costs at most ~10 s.
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import glob
import json
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import serve_argv, tree_label  # noqa: E402

from tests.support.groups import confluent_generation as generation_of  # noqa: E402

PARTITIONS = 12
SESSION_MS = 1800000      # heartbeat bench: the broker's maximum, no member expires during set-up
CLIENT_SESSION_MS = 10000


# --gc-timer: run in the server's process before tenure: every garbage collection's start (wall clock), generation
# and duration, written as JSON to the path given when the process exits
GC_TIMER = """
import atexit as _atexit, gc as _gc, json as _json, time as _time
_gc_rows, _gc_start = [], [0.0]
def _gc_cb(phase, info):
    if phase == "start":
        _gc_start[0] = _time.perf_counter()
    else:
        _gc_rows.append((_time.time(), info["generation"], _time.perf_counter() - _gc_start[0]))
_gc.callbacks.append(_gc_cb)
_atexit.register(lambda: _json.dump(_gc_rows, open(%r, "w")))
"""


def start_tenure(*extra: str, tree: Path | None = None, ready: dict | None = None,
                 gc_out: str | None = None) -> tuple[subprocess.Popen, str]:
    """`tenure serve` from this tree (the venv's install) or, with `tree`, from that source tree; with `ready`, the
    server's ready file (its admin endpoint's address) is read into it; with `gc_out`, its garbage collections are
    timed (GC_TIMER) and written there when it exits (both trees then run through bench/trees.py's launcher)."""
    args = ["serve", "--port", "0", "--log-level", "WARNING", "--default-partitions", str(PARTITIONS), *extra]
    with tempfile.TemporaryDirectory() as tmp:
        if ready is not None:
            args += ["--ready-file", os.path.join(tmp, "ready.json")]
        if gc_out is not None:
            argv = serve_argv(REPO if tree is None else tree, *args, prelude=GC_TIMER % gc_out)
        else:
            argv = [sys.executable, "-m", "tenure", *args] if tree is None else serve_argv(tree, *args)
        proc = subprocess.Popen(argv,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = proc.stdout.readline()
        m = re.match(r"tenure listening on (\S+)", line)
        if not m:
            proc.kill()
            raise RuntimeError(f"tenure did not start: {line!r}")
        if ready is not None:                  # written before the ready line
            with open(os.path.join(tmp, "ready.json")) as f:
                ready.update(json.load(f))
    return proc, m.group(1)


class MockCluster:
    """librdkafka's mock cluster, made through its C API (the copy of librdkafka confluent-kafka loaded),
    so the topic can have 12 partitions (auto-creation gives 4) and the initial rebalance delay can be set."""

    def __init__(self, topic: str, partitions: int, initial_delay_ms: int | None, brokers: int = 1) -> None:
        import confluent_kafka
        libs = glob.glob(str(Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs" / "librdkafka*.so*"))
        if not libs:
            libs = [ctypes.util.find_library("rdkafka") or "librdkafka.so.1"]
        lib = self.lib = ctypes.CDLL(libs[0])
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_size_t]
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_handle_mock_cluster.restype = ctypes.c_void_p
        lib.rd_kafka_handle_mock_cluster.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        err = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        for k, v in ((b"test.mock.num.brokers", str(brokers).encode()), (b"log_level", b"3")):
            if lib.rd_kafka_conf_set(conf, k, v, err, len(err)) != 0:
                raise RuntimeError(err.value.decode())
        self.rk = lib.rd_kafka_new(0, conf, err, len(err))          # RD_KAFKA_PRODUCER
        if not self.rk:
            raise RuntimeError(err.value.decode())
        mc = lib.rd_kafka_handle_mock_cluster(self.rk)
        if initial_delay_ms is not None:
            lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mc, initial_delay_ms)
        self.mc = mc
        code = lib.rd_kafka_mock_topic_create(mc, topic.encode(), partitions, min(3, brokers))
        if code != 0:
            raise RuntimeError(f"mock topic create: error {code}")
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mc).decode()

    def close(self) -> None:
        if self.rk:
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, name: str, log: list):
        from confluent_kafka import Consumer
        self.name = name
        self.log = log
        self.assignment: list[int] | None = None      # None: not assigned yet, or revoked
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": name,
                           "session.timeout.ms": CLIENT_SESSION_MS, "heartbeat.interval.ms": 1000,
                           "max.poll.interval.ms": 10000, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "log_level": 3})
        self.c.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer, parts):
        self.assignment = sorted(p.partition for p in parts)
        self.log.append(("assign", self.name, time.monotonic(), generation_of(consumer)))

    def _revoke(self, consumer, parts):
        self.assignment = None
        self.log.append(("revoke", self.name, time.monotonic(), None))

    def poll(self):
        self.c.poll(0)

    def close(self):
        self.c.close()


def poll_for(members, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in members:
            m.poll()
        time.sleep(0.005)


def complete(members) -> bool:
    if any(m.assignment is None for m in members):
        return False
    return sorted(p for m in members for p in m.assignment) == list(range(PARTITIONS))


def wait_stable(members, log: list, since: float, quiet: float, timeout: float) -> float | None:
    """Poll until the group is STABLE (see the module doc); returns the moment it became so (the later
    of `since` and the last callback), or None on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if complete(members):
            last = max([since] + [e[2] for e in log])
            if time.monotonic() - last >= quiet:
                return last
        time.sleep(0.005)
    return None


def group_generation(members, log: list) -> int:
    """The newest generation any member has seen: in an assign callback, or (joined, not yet assigned)
    in its current group metadata."""
    seen = [e[3] for e in log if e[0] == "assign"] + [generation_of(m.c) for m in members]
    return max(seen, default=-1)


def formation_and_restart(bootstrap: str, topic: str, group: str, n: int, quiet: float, restart_timeout: float,
                          budget: float) -> dict:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    p.produce(topic, b"x")          # tenure auto-creates the topic (12 partitions); the mock has it already
    p.flush(10)
    parts = len(p.list_topics(topic, timeout=10).topics[topic].partitions)
    assert parts == PARTITIONS, f"{topic} has {parts} partitions, not {PARTITIONS}"
    del p
    log: list = []
    t0 = time.monotonic()
    members = [Member(bootstrap, group, topic, f"m{i}", log) for i in range(n)]
    t_formed = wait_stable(members, log, t0, quiet, 180)
    gen_formed = group_generation(members, log)
    out = {"formed": t_formed is not None, "formation_s": (t_formed or time.monotonic()) - t0,
           "formation_generations": gen_formed - min([e[3] for e in log if e[0] == "assign"], default=gen_formed) + 1,
           "formation_assigns": sum(1 for e in log if e[0] == "assign")}
    before = {m.name: m.assignment for m in members}
    log.clear()
    restart_times, per_restart, mismatched, assigns_others = [], [], 0, 0
    t_budget = time.monotonic()
    gen = gen_formed
    for i in range(n):
        spent = time.monotonic() - t_budget
        if spent > budget or (restart_times and spent + max(restart_times) > budget):
            break                                   # the next restart would not fit the budget
        old = members[i]
        mark = len(log)
        old.close()
        ts = time.monotonic()
        new = Member(bootstrap, group, topic, old.name, log)
        members[i] = new
        t_stable = wait_stable(members, log, ts, quiet, restart_timeout)
        if t_stable is None:
            break
        restart_times.append(t_stable - ts)
        now_gen = group_generation(members, log[mark:])
        per_restart.append(max(now_gen, gen) - gen)
        gen = max(now_gen, gen)
        assigns_others += sum(1 for e in log[mark:] if e[0] == "assign" and e[1] != old.name)
        if new.assignment != before[old.name]:
            mismatched += 1
    restarted = len(restart_times)
    # a coordinator may still act on a closed member's expired session: watch a session timeout more
    mark = len(log)
    t_watch = time.monotonic()
    poll_for(members, CLIENT_SESSION_MS / 1000 + 3)
    late_s = 0.0
    if len(log) > mark:
        t_late = wait_stable(members, log, t_watch, quiet, restart_timeout)
        late_s = (t_late or time.monotonic()) - t_watch
    late = max(group_generation(members, log[mark:]), gen) - gen
    assigns_others += sum(1 for e in log[mark:] if e[0] == "assign")
    for m in members:
        m.close()
    rolling = sum(restart_times) + late_s
    median = statistics.median(restart_times) if restart_times else float("nan")
    rebalances = sum(per_restart) + late
    partial = restarted not in (0, n)
    out.update({
        "restarted": restarted, "rolling_s": rolling, "per_restart_median_s": median,
        "rolling_extrapolated_s": rolling + median * (n - restarted) if partial else None,
        "rebalances_extrapolated": rebalances * n / restarted if partial else None,
        "rebalances": rebalances, "late_rebalances": late,
        "per_restart_rebalances": dict(sorted(Counter(per_restart).items())),
        "assigns_on_others": assigns_others, "assignment_changed": mismatched,
    })
    return out


def heartbeats_on(tree: Path | None, args) -> dict:
    """The heartbeat bench against a `tenure serve` of its own (from `tree`; None: this one), with the server's CPU
    (user + system, from /proc) per heartbeat answered."""
    # each group is expected with its members through the admin endpoint (expect_group), so its first generation
    # forms as soon as all of them joined; a tree without expect_group falls back to a short initial delay, which
    # lets each group's concurrent first joins form one generation
    ready: dict = {}
    gc_out = tempfile.mktemp(prefix="tenure-gc-", suffix=".json") if args.gc_timer else None
    proc, bs = start_tenure("--initial-rebalance-delay-ms", "200", *args.serve_arg, tree=tree, ready=ready,
                            gc_out=gc_out)
    spy = None
    try:
        expect = None
        if ready.get("admin"):
            from tenure.control.http_client import request
            admin = ready["admin"]

            def expect(gid: str) -> None:
                status, body = request(admin, "POST", f"/groups/{gid}/expect", {"members": args.hb_per_group})
                if status != 200:
                    raise RuntimeError(f"expect_group {gid}: HTTP {status} {body}")
            try:
                expect("hb-probe")
            except RuntimeError as exc:
                print(f"heartbeats: {tree_label(tree) if tree else 'this tree'} has no expect_group ({exc}); groups form with the 200 ms "
                      "initial delay", file=sys.stderr)
                expect = None
        holder: dict = {}

        def on_start() -> None:
            nonlocal spy
            holder["cpu"], holder["sys"], holder["t"] = server_cpu_s(proc.pid), server_cpu_s(proc.pid, True), time.time()
            if args.pyspy:                       # the heartbeat phase only (the groups formed before it)
                from hot_path import sample
                spy = sample(proc.pid, spy_path(args.pyspy, tree), args.hb_seconds)
        r = heartbeat_bench(bs, args.hb_groups, args.hb_per_group, args.hb_seconds, on_start=on_start, expect=expect,
                            depth=args.hb_depth, procs=args.hb_procs, rate=args.hb_rate, anchored=args.hb_anchor)
        r["server_us"] = (server_cpu_s(proc.pid) - holder["cpu"]) / max(1, r["heartbeats"]) * 1e6
        r["server_sys_us"] = (server_cpu_s(proc.pid, True) - holder["sys"]) / max(1, r["heartbeats"]) * 1e6
    finally:
        if spy is not None:
            spy.wait(60)
        proc.send_signal(signal.SIGTERM)           # the GC timer writes its rows as the server exits
        proc.wait(15)
    if gc_out is not None:
        r["gc"] = gc_summary(gc_out, holder["t"], holder["t"] + args.hb_seconds)
    return r


def spy_path(base: str, tree: Path | None) -> str:
    return f"{base}.{tree_label(REPO if tree is None else tree)}.txt"


def gc_summary(path: str, start: float, stop: float) -> dict:
    """The server's garbage collections in the heartbeat window (GC_TIMER's rows): per generation, how many, their
    total and longest durations (ms)."""
    try:
        with open(path) as f:
            rows = json.load(f)
        os.remove(path)
    except (OSError, ValueError):
        return {}
    out: dict = {}
    for t, gen, dur in rows:
        if start <= t <= stop:
            n, total, longest = out.get(gen, (0, 0.0, 0.0))
            out[gen] = (n + 1, total + dur * 1000, max(longest, dur * 1000))
    return out


def fmt_gc(gc: dict) -> str:
    return "; ".join(f"gen{g}: {n} collections, {total:.1f} ms in all, longest {longest:.1f} ms"
                     for g, (n, total, longest) in sorted(gc.items())) or "no collection"


def server_cpu_s(pid: int, system: bool = False) -> float:
    """User + system CPU seconds of a process, from /proc (`system`: the system time alone)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[12]) + (0 if system else int(fields[11]))) / os.sysconf("SC_CLK_TCK")


async def form_heartbeat_groups(bootstrap: str, groups: int, per_group: int,
                                expect: Callable[[str], None] | None = None) -> tuple[list[tuple], float]:
    """Each of `groups` groups of `per_group` static members formed once (kafka-python's codec, one connection per
    member while forming): [(group id, generation, [(member id, instance id), ...])], and the seconds it took."""
    from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest

    from tests.support.wire import AsyncWireClient
    P = JoinGroupRequest.JoinGroupRequestProtocol

    async def one_group(g: int):
        gid = f"hb-{g}"
        if expect is not None:                   # the first rebalance ends when all per_group have joined
            await asyncio.to_thread(expect, gid)
        conns = [await AsyncWireClient.connect(bootstrap) for _ in range(per_group)]

        def join(i: int, member_id: str = ""):
            return conns[i].call(JoinGroupRequest(
                group_id=gid, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=5000, member_id=member_id,
                group_instance_id=f"{gid}-i{i}", protocol_type="consumer",
                protocols=[P(name="range", metadata=b"")]), 5)
        # everyone joins at once; until one generation holds all of them, rejoin with the member ids
        # they were given (a known member's rejoin completes the rebalance as soon as all are in)
        ids = [""] * per_group
        while True:
            joins = await asyncio.gather(*(join(i, ids[i]) for i in range(per_group)))
            ids = [j.member_id or ids[i] for i, j in enumerate(joins)]
            if len({j.generation_id for j in joins}) == 1 and not any(j.error_code for j in joins):
                break
        gen = joins[0].generation_id
        await asyncio.gather(*(c.call(SyncGroupRequest(
            group_id=gid, generation_id=gen, member_id=j.member_id, group_instance_id=f"{gid}-i{i}",
            assignments=[]), 3) for i, (c, j) in enumerate(zip(conns, joins))))
        for c in conns:
            await c.close()
        return gid, gen, [(j.member_id, f"{gid}-i{i}") for i, j in enumerate(joins)]

    t_setup = time.monotonic()
    setups = [await one_group(g) for g in range(groups)]
    return setups, time.monotonic() - t_setup


def heartbeat_frames(setups: list[tuple]) -> list[list[bytes]]:
    """Per group, one pre-encoded Heartbeat v4 frame per member (kafka-python's codec, encoded once before the run;
    the pump patches only the correlation id)."""
    from kafka.protocol.consumer.group import HeartbeatRequest

    from tests.support.wire import request_bytes
    return [[request_bytes(HeartbeatRequest(group_id=gid, generation_id=gen, member_id=mid, group_instance_id=iid),
                           4, 0, client_id="hb") for mid, iid in members] for gid, gen, members in setups]


class HeartbeatPump(asyncio.Protocol):
    """One connection carrying one group's members: each round writes `depth` heartbeats (the next members in turn)
    in one write, as a client of many members does at a heartbeat tick, and the next round starts when all of them
    are answered. Answers are not decoded: their size, correlation id and error code are read."""

    def __init__(self, frames: list[bytes], depth: int, start_at: float, stop_at: float, lat: list[float],
                 codes: dict, interval: float = 0.0, reads: list[int] | None = None,
                 sends: list[float] | None = None, anchored: bool = False) -> None:
        self.frames = [bytearray(f) for f in frames]
        self.depth, self.start_at, self.stop_at, self.lat, self.codes = depth, start_at, stop_at, lat, codes
        self.interval = interval           # > 0: a round every interval seconds, answered or not (an offered rate)
        self.reads = reads if reads is not None else [0]   # [the process's reads so far] (answers per read: how the server batches)
        self.sends = sends if sends is not None else []     # perf_counter() of each open-loop round (how they cluster)
        self.anchored = anchored           # open loop: round k at the first's time + k * interval (no drift)
        self.ticks = 0
        self.first_tick = 0.0
        self.buf = bytearray()
        self.i = self.cid = 0
        self.sent: dict[int, float] = {}
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        loop = asyncio.get_running_loop()
        loop.call_at(loop.time() + max(0.0, self.start_at - time.time()), self._tick if self.interval else self._round)

    def _tick(self) -> None:
        """Open loop: a round now and the next one `interval` later, until the run's end."""
        if time.time() >= self.stop_at:
            if not self.sent:
                self.transport.close()
            return
        self._round()
        self.sends.append(time.perf_counter())
        loop = asyncio.get_running_loop()
        if not self.anchored:          # the next round an interval after this one ran: late rounds drift
            loop.call_later(self.interval, self._tick)
            return
        if not self.ticks:
            self.first_tick = loop.time()
        self.ticks += 1
        loop.call_at(self.first_tick + self.ticks * self.interval, self._tick)

    def _round(self) -> None:
        out = []
        now = time.perf_counter()
        for _ in range(self.depth):
            f = self.frames[self.i % len(self.frames)]
            self.i += 1
            self.cid += 1
            struct.pack_into(">i", f, 8, self.cid)
            self.sent[self.cid] = now
            out.append(bytes(f))
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        self.reads[0] += 1
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            size = struct.unpack_from(">i", buf)[0]
            if len(buf) < 4 + size:
                return
            now = time.perf_counter()
            cid = struct.unpack_from(">i", buf, 4)[0]
            code = struct.unpack_from(">h", buf, 4 + 4 + 1 + 4)[0]     # v4: header tags, throttle_time_ms
            self.codes[code] = self.codes.get(code, 0) + 1
            self.lat.append(now - self.sent.pop(cid))
            del buf[:4 + size]
            if not self.sent:
                if time.time() >= self.stop_at:
                    self.transport.close()
                    return
                if not self.interval:
                    self._round()

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(None)


def pump_heartbeats(host: str, port: int, frame_sets: list[list[bytes]], depth: int, start_at: float,
                    seconds: float, interval: float = 0.0, anchored: bool = False) -> dict:
    """One generator process: a HeartbeatPump per group from `start_at` (wall clock) for `seconds`; its latencies,
    the answers' error codes and its own CPU seconds."""
    lat: list[float] = []
    codes: dict[int, int] = {}
    reads = [0]
    sends: list[float] = []

    async def run() -> None:
        loop = asyncio.get_running_loop()
        pumps = []
        for k, frames in enumerate(frame_sets):     # open loop: the connections' rounds spread over the interval
            _, p = await loop.create_connection(
                lambda f=frames, k=k: HeartbeatPump(f, depth or len(f), start_at + interval * k / len(frame_sets),
                                                    start_at + seconds, lat, codes, interval, reads, sends,
                                                    anchored), host, port)
            pumps.append(p)
        await asyncio.gather(*(p.done for p in pumps))
    t = os.times()
    asyncio.run(run())
    u = os.times()
    return {"lat": lat, "codes": codes, "reads": reads[0], "cpu_s": (u.user - t.user) + (u.system - t.system),
            "sends": sends}


def _pump_child(conn, *args) -> None:
    conn.send(pump_heartbeats(*args))
    conn.close()


def heartbeat_bench(bootstrap: str, groups: int, per_group: int, seconds: float,
                    on_start: Callable[[], object] = lambda: None,
                    expect: Callable[[str], None] | None = None, depth: int = 0, procs: int = 1,
                    rate: float = 0.0, anchored: bool = False) -> dict:
    """Form the groups, then heartbeat for `seconds` from `procs` generator processes (the groups split among
    them), `depth` heartbeats per round on each connection (0: one per member of its group); `rate`: heartbeats/s
    offered in all (open loop: each connection's rounds on a fixed interval), 0: each round as soon as the last is
    answered (closed loop: the most the server answers)."""
    import multiprocessing
    setups, setup_s = asyncio.run(form_heartbeat_groups(bootstrap, groups, per_group, expect))
    sets = heartbeat_frames(setups)
    host, port = bootstrap.rsplit(":", 1)
    interval = (depth or per_group) * groups / rate if rate > 0 else 0.0
    ctx = multiprocessing.get_context("fork")
    start_at = time.time() + 1.0                  # every process connected and waiting by then
    children = []
    for k in range(procs):
        parent_end, child_end = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_pump_child, args=(child_end, host, int(port), sets[k::procs], depth, start_at,
                                                      seconds, interval, anchored))
        child.start()
        children.append((child, parent_end))
    time.sleep(max(0.0, start_at - time.time()))
    on_start()
    results = [end.recv() for _, end in children]
    elapsed = time.time() - start_at
    for child, _ in children:
        child.join(10)
    lat = sorted(x for r in results for x in r["lat"])
    codes: dict[int, int] = {}
    for r in results:
        for code, n in r["codes"].items():
            codes[code] = codes.get(code, 0) + n
    reads = sum(r["reads"] for r in results)       # the generator's reads (data_received calls)
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
    # how the open loop's rounds cluster: for each round, the other connections' rounds sent within 1 ms of it
    # (perf_counter is the system's monotonic clock: comparable between the generator processes); spread evenly
    # over the interval, 2 ms x the connections / the interval
    sends = sorted(t for r in results for t in r["sends"])
    near, j, k = 0, 0, 0
    for t in sends:
        while sends[j] < t - 0.001:
            j += 1
        while k < len(sends) and sends[k] <= t + 0.001:
            k += 1
        near += k - j - 1
    cluster = {"near_1ms": near / len(sends) if sends else 0.0,
               "even_1ms": 0.002 * groups / interval if interval else 0.0}
    return {"cluster": cluster, "heartbeats": len(lat), "per_s": len(lat) / elapsed, "p50_ms": pct(0.5), "p99_ms": pct(0.99),
            "max_ms": lat[-1] * 1000, "errors": sum(n for c, n in codes.items() if c), "codes": codes,
            "setup_s": setup_s, "answers_per_read": len(lat) / max(1, reads), "client_us": sum(r["cpu_s"] for r in results) / max(1, len(lat)) * 1e6}


def fmt_result(n: int, target: str, r: dict) -> str:
    per_reb = f"{r['assigns_on_others'] / r['rebalances']:.1f}" if r["rebalances"] else "-"
    line = (f"N={n:<3} {target:<6} formed={r['formed']} formation {r['formation_s']:.2f}s "
            f"({r['formation_generations']} generation(s), {r['formation_assigns']} assign callbacks); "
            f"rolling restart {r['restarted']}/{n} members {r['rolling_s']:.2f}s "
            f"(median {r['per_restart_median_s']:.2f}s per member); rebalances caused {r['rebalances']} "
            f"(per restart {{rebalances: restarts}} {r['per_restart_rebalances']}, after the last restart "
            f"{r['late_rebalances']}); assign callbacks on the other members {r['assigns_on_others']} "
            f"({per_reb} per rebalance); restarted members whose partitions changed {r['assignment_changed']}")
    if r["rolling_extrapolated_s"] is not None:
        line += (f"\n      EXTRAPOLATED (the budget ran out after {r['restarted']}/{n} restarts): rolling restart "
                 f"of all {n} ~ {r['rolling_extrapolated_s']:.0f}s (measured {r['rolling_s']:.1f}s + median x "
                 f"{n - r['restarted']}), rebalances ~ {r['rebalances_extrapolated']:.0f}")
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", default="6,50")
    ap.add_argument("--targets", default="tenure,mock")
    ap.add_argument("--quiet-s", type=float, default=1.0, help="no callback for this long = stable")
    ap.add_argument("--restart-timeout-s", type=float, default=60)
    ap.add_argument("--restart-budget-s", type=float, default=1000,
                    help="stop a rolling restart after this long and extrapolate the rest")
    ap.add_argument("--deadline-s", type=float, default=1400,
                    help="shrink restart budgets so the whole script ends within this (fits `timeout 1500`)")
    ap.add_argument("--mock-initial-delay-ms", type=int, default=None,
                    help="set the mock's group initial rebalance delay (default: leave the mock's own, 3000 ms)")
    ap.add_argument("--hb-groups", type=int, default=100)
    ap.add_argument("--hb-per-group", type=int, default=10)
    ap.add_argument("--hb-seconds", type=float, default=10)
    ap.add_argument("--hb-depth", type=int, default=0,
                    help="heartbeats in flight per group's connection, written in one write per round (default 0: "
                    "one per member of the group; 1: one at a time, the members in turn)")
    ap.add_argument("--hb-procs", type=int, default=1, help="load generator processes (the groups split among them)")
    ap.add_argument("--hb-rate", type=float, default=0,
                    help="heartbeats/s offered (open loop: p50/p99 at that rate); default 0: closed loop, each "
                    "connection's next round as soon as the last is answered (the most the server answers)")
    ap.add_argument("--hb-anchor", action="store_true",
                    help="open loop: each connection's round k at its first round's time + k intervals (default: "
                    "the next round an interval after the last ran, so late rounds drift and may cluster)")
    ap.add_argument("--baseline", action="append", default=[], metavar="TREE",
                    help="also run the heartbeat bench against `tenure serve` from this source tree (e.g. a `git "
                    "worktree` of main), this tree and the baselines in turn, --hb-rounds times; prints the ratios")
    ap.add_argument("--hb-rounds", type=int, default=1)
    ap.add_argument("--gc-timer", action="store_true",
                    help="time the server's garbage collections (gc.callbacks, in its process) and print those of the "
                         "heartbeat phase: per generation, how many and how long")
    ap.add_argument("--py-spy", metavar="PATH", dest="pyspy",
                    help="sample the server with py-spy (--nonblocking) during the heartbeat phase, write the "
                         "collapsed stacks to PATH.TREE.txt and print the functions with the most samples")
    ap.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                    help="one more argument to every heartbeat bench's `tenure serve` (repeatable), e.g. "
                         "--serve-arg=--capture-requests=0")
    args = ap.parse_args()
    started = time.monotonic()
    from benchcommon import tree_version
    from confluent_kafka import libversion, version
    ck = version()
    print(f"confluent-kafka {ck[0] if isinstance(ck, tuple) else ck}, librdkafka {libversion()[0]}, {os.cpu_count()} cpus, "
          f"tree {tree_version()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for n in [int(x) for x in args.members.split(",") if x.strip() and int(x) > 0]:
        for target in args.targets.split(","):
            proc = mock = None
            topic, group = f"bench-{n}", f"bench-group-{n}"
            try:
                if target == "tenure":
                    proc, bs = start_tenure()
                else:
                    mock = MockCluster(topic, PARTITIONS, args.mock_initial_delay_ms)
                    bs = mock.bootstrap
                # leave room for an overrunning last restart, the final watch and the heartbeat bench
                left = args.deadline_s - (time.monotonic() - started) - 150
                budget = max(30.0, min(args.restart_budget_s, left))
                r = formation_and_restart(bs, topic, group, n, args.quiet_s, args.restart_timeout_s, budget)
                rows.append((n, target, r))
                print(fmt_result(n, target, r), flush=True)
            finally:
                if proc is not None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(15)
                if mock is not None:
                    mock.close()
    for n in sorted({r[0] for r in rows}):
        t = next((r for nn, tt, r in rows if nn == n and tt == "tenure"), None)
        m = next((r for nn, tt, r in rows if nn == n and tt == "mock"), None)
        if t and m and t["formed"] and m["formed"]:
            line = f"N={n}: formation ratio tenure/mock = {t['formation_s'] / m['formation_s']:.2f}"
            if t["restarted"] == n and m["restarted"] == n:
                line += f"; rolling-restart ratio tenure/mock = {t['rolling_s'] / m['rolling_s']:.3f}"
            elif t["restarted"] == n and m["rolling_extrapolated_s"]:
                line += (f"; rolling-restart ratio tenure/mock = {t['rolling_s'] / m['rolling_extrapolated_s']:.3f}"
                         f" (against the EXTRAPOLATED mock total)")
            line += f"; rebalances caused by the rolling restart: tenure {t['rebalances']}, mock {m['rebalances']}"
            if m["rebalances_extrapolated"] is not None:
                line += f" in {m['restarted']}/{n} restarts (EXTRAPOLATED to all {n}: ~{m['rebalances_extrapolated']:.0f})"
            print(line, flush=True)
    if "tenure" in args.targets:
        trees: list[Path | None] = [None] + [Path(t) for t in args.baseline]
        runs: dict[str, list[dict]] = {}
        # named once: a file edited meanwhile must not make this tree a second one
        labels = [tree_label(REPO if tree is None else tree) + ("" if tree is None else " (baseline)")
                  for tree in trees]
        for rnd in range(args.hb_rounds):
            for tree, label in zip(trees, labels, strict=True):
                r = heartbeats_on(tree, args)
                runs.setdefault(label, []).append(r)
                print(f"heartbeats [{label}, round {rnd + 1}]: {args.hb_groups * args.hb_per_group} static members "
                      f"in {args.hb_groups} groups, {r['heartbeats']} heartbeats in {args.hb_seconds:.0f}s = "
                      f"{r['per_s']:.0f}/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, max {r['max_ms']:.1f} "
                      f"ms, server CPU {r['server_us']:.0f} us per heartbeat ({r['server_sys_us']:.0f} us of it system; generator {r['client_us']:.0f} us), {r['answers_per_read']:.1f} answers per generator read, errors {r['errors']} (by code "
                      f"{r['codes']}); groups formed in {r['setup_s']:.1f}s; load average {os.getloadavg()[0]:.1f}",
                      flush=True)
                if args.hb_rate:
                    c = r["cluster"]
                    print(f"    rounds sent within 1 ms of a round (other connections'): {c['near_1ms']:.1f} (spread "
                          f"evenly: {c['even_1ms']:.1f}){' (anchored rounds)' if args.hb_anchor else ''}", flush=True)
                if "gc" in r:
                    print(f"    the server's garbage collections in those {args.hb_seconds:.0f}s: {fmt_gc(r['gc'])}",
                          flush=True)
                if args.pyspy:
                    from hot_path import print_profile
                    print_profile(spy_path(args.pyspy, tree))
        if len(runs) > 1:
            (this, mine), *others = runs.items()
            med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
            for other, base in others:
                print(f"heartbeats, medians of {args.hb_rounds} round(s), {this} against {other}: "
                      f"{med(mine, 'per_s'):.0f}/s vs {med(base, 'per_s'):.0f}/s = "
                      f"{med(mine, 'per_s') / med(base, 'per_s'):.2f}x; p50 {med(mine, 'p50_ms'):.2f} vs "
                      f"{med(base, 'p50_ms'):.2f} ms; p99 {med(mine, 'p99_ms'):.2f} vs {med(base, 'p99_ms'):.2f} ms; "
                      f"server CPU {med(mine, 'server_us'):.0f} vs {med(base, 'server_us'):.0f} us per heartbeat = "
                      f"{med(mine, 'server_us') / med(base, 'server_us'):.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
