"""The hot path: throughput, latency and the server's CPU per request for Heartbeat, OffsetCommit, Fetch and
Produce (figures, never assertions).

`tenure serve` is spawned; then, per API, C connections each keep one request in flight (as a real client does)
for --seconds. The load generator is lean so that the server, not the client, is measured: each request is
encoded once with kafka-python before the run, and during the run only its correlation id is patched and only
the response's size, correlation id and error code are read. For each API the script prints requests/s, p50 /
p99 / max latency, the server's CPU per request in microseconds (user + system time of the server process from
/proc, divided by the requests answered) and the load generator's own CPU per request.

- Heartbeat v4: --groups static groups of --members members each (formed first through expect_group, so no
  initial delay), one connection per group cycling through its members' heartbeats;
- OffsetCommit v8: one member per group commits --commit-partitions partitions of a topic;
- Fetch v12: one partition holding a few small records, from offset 0, max_wait_ms 0;
- Produce v9: acks=1, one 10-record batch (~1 KB) per request to one partition per connection.

    .venv/bin/python bench/hot_path.py [--apis heartbeat,commit,fetch,produce] [--groups 100] [--members 10]
        [--connections 100] [--seconds 10] [--baseline TREE [--rounds N]] [--py-spy PATH]

--baseline TREE runs the same against `tenure serve` from another source tree (a `git worktree` of main: `git
worktree add --detach ../base main`), both through bench/trees.py's launcher, the trees taking turns --rounds
times, and prints this tree's figures against the baseline's (medians).

--in-process feeds each API's requests to one connection of an in-process server (no socket) and measures the CPU
time of its loop thread per request; with --profile PATH it also runs cProfile on that thread during each API's
run (PATH.TREE.API) and prints the top functions and the split of a request's time (coordinator runtime, its
shard and the Result applied, decoding, encoding, the dispatcher). --coordinator measures the group coordinator's
runtime alone: decoded Heartbeat and OffsetCommit requests handed to `GroupRuntime.handle`, no server, no codec.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchcommon import tree_version  # noqa: E402
from trees import python_argv, serve_argv, tree_label  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int | None = None) -> float:
    """User + system CPU seconds of a process (None: this one)."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Pump(asyncio.Protocol):
    """One connection keeping one pre-encoded request in flight: each response (its size, correlation id and
    error code read, nothing decoded) sends the next frame of the cycle."""

    def __init__(self, frames: list[bytes], error_at: int, stop_at: float, lat: list[float], errors: dict) -> None:
        self.frames = [bytearray(f) for f in frames]
        self.error_at, self.stop_at, self.lat, self.errors = error_at, stop_at, lat, errors
        self.buf = bytearray()
        self.i = 0
        self.cid = 0
        self.sent = 0.0
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._send()

    def _send(self) -> None:
        f = self.frames[self.i % len(self.frames)]
        self.i += 1
        self.cid += 1
        struct.pack_into(">i", f, 8, self.cid)
        self.sent = time.perf_counter()
        self.transport.write(f)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            size = struct.unpack_from(">i", buf)[0]
            if len(buf) < 4 + size:
                return
            now = time.perf_counter()
            cid = struct.unpack_from(">i", buf, 4)[0]
            assert cid == self.cid, (cid, self.cid)
            code = struct.unpack_from(">h", buf, 4 + self.error_at)[0]
            self.errors[code] = self.errors.get(code, 0) + 1
            self.lat.append(now - self.sent)
            del buf[:4 + size]
            if now >= self.stop_at:
                self.transport.close()
                if not self.done.done():
                    self.done.set_result(None)
                return
            self._send()

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def pump(host: str, port: int, frame_sets: list[list[bytes]], error_at: int, seconds: float) -> dict:
    loop = asyncio.get_running_loop()
    lat: list[float] = []
    errors: dict[int, int] = {}
    stop_at = time.perf_counter() + seconds
    t0 = time.perf_counter()
    protos = []
    for frames in frame_sets:
        _, p = await loop.create_connection(lambda f=frames: Pump(f, error_at, stop_at, lat, errors), host, port)
        protos.append(p)
    await asyncio.gather(*(p.done for p in protos))
    elapsed = time.perf_counter() - t0
    lat.sort()
    q = lambda x: lat[min(len(lat) - 1, int(x * len(lat)))] * 1000  # noqa: E731
    return {"n": len(lat), "per_s": len(lat) / elapsed, "p50": q(0.5), "p99": q(0.99), "max": lat[-1] * 1000,
            "errors": errors}


def sample(pid: int, path: str, seconds: float) -> subprocess.Popen:
    """py-spy sampling the server for `seconds` (its own process; --nonblocking: the server is never paused)."""
    return subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--duration",
                             str(max(1, int(seconds))), "--rate", "200", "--nonblocking", "--format", "raw",
                             "--output", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def print_profile(path: str, top: int = 25) -> None:
    """The functions with the most samples of their own (the leaf of a stack), and with the most samples in
    total (anywhere on a stack), from py-spy's collapsed stacks."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    n = 0
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        k = int(count)
        n += k
        # "func (path/file.py:line)" -> "func (file.py)": a function's samples summed over its lines
        frames = [f"{f.split(' (')[0]} ({f.rsplit('/', 1)[-1].rsplit(':', 1)[0].rstrip(')')})"
                  for f in stack.split(";")]
        own[frames[-1]] = own.get(frames[-1], 0) + k
        for f in set(frames):
            total[f] = total.get(f, 0) + k
    print(f"    py-spy: {n} samples; own share / total share")
    for f, k in sorted(own.items(), key=lambda x: -x[1])[:top]:
        print(f"    own {k / n:6.1%}  total {total[f] / n:6.1%}  {f}")
    print("    by total share:")
    for f, k in sorted(total.items(), key=lambda x: -x[1])[:top]:
        print(f"    total {k / n:6.1%}  {f}")


# (part, file, function): the entry points whose cumulative time make the split of a request's time
SPLIT = (("coordinator runtime (routing, handler, replay, timers)", "coordinator/runtime.py", "handle"),
         ("coordinator runtime (routing, handler, replay, timers)", "coordinator/group_runtime.py", "handle"),
         ("  of it: the shard (handler and replay)", "coordinator/shard.py", "handle"),
         ("  of it: the Result applied (answers, timers)", "coordinator/runtime.py", "apply"),
         ("decoding the request", "protocol/codec.py", "decode_request"),
         ("encoding the answer", "protocol/codec.py", "encode_response"),
         ("the dispatcher, all of it", "tenure/server/dispatch.py", "__call__"))


def print_split(stats, api: str, label: str) -> None:
    """The shares of a cProfile (of the loop thread) spent under each of SPLIT's entry points, of the time of the
    connection's loop (`Connection.run`). A part named by two entry points (a method a tree overrides) counts the
    outermost, the larger."""
    cum: dict[tuple[str, str], float] = {}
    for (file, _line, fn), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():   # type: ignore[attr-defined]
        key = (file.replace("\\", "/"), fn)
        cum[key] = max(cum.get(key, 0.0), ct)
    total = max((ct for (f, fn), ct in cum.items() if f.endswith("tenure/server/connection.py") and fn == "run"),
                default=0.0)
    if not total:
        return
    shares: dict[str, float] = {}
    for part, file, fn in SPLIT:
        ct = max((c for (f, name), c in cum.items() if f.endswith(file) and name == fn), default=0.0)
        shares[part] = max(shares.get(part, 0.0), ct)
    print(f"    split of {api} ({label}), share of the connection loop's time under cProfile:")
    for part, ct in shares.items():
        print(f"    {ct / total:6.1%}  {part}")


def frame(req, version: int) -> bytes:
    from tests.support.wire import request_bytes
    return request_bytes(req, version, 0, client_id="hot")


def admin_post(url: str, body: dict) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()


async def form_groups(bootstrap: str, expect: Callable[[str, int], object], groups: int,
                      members: int) -> list[list[tuple]]:
    """Each group formed once (static members, expect_group set first): [(group, member id, instance id, gen)]."""
    from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest

    from tests.support.wire import AsyncWireClient
    P = JoinGroupRequest.JoinGroupRequestProtocol
    out = []
    for g in range(groups):
        gid = f"hp-{g}"
        expect(gid, members)
        conns = [await AsyncWireClient.connect(bootstrap) for _ in range(members)]
        joins = await asyncio.gather(*(c.call(JoinGroupRequest(
            group_id=gid, session_timeout_ms=1_800_000, rebalance_timeout_ms=30000, member_id="",
            group_instance_id=f"{gid}-i{i}", protocol_type="consumer", protocols=[P(name="range", metadata=b"")]),
            5) for i, c in enumerate(conns)))
        assert all(j.error_code == 0 for j in joins), [j.error_code for j in joins]
        await asyncio.gather(*(c.call(SyncGroupRequest(
            group_id=gid, generation_id=j.generation_id, member_id=j.member_id, group_instance_id=f"{gid}-i{i}",
            assignments=[]), 3) for i, (c, j) in enumerate(zip(conns, joins))))
        for c in conns:
            await c.close()
        out.append([(gid, j.member_id, f"{gid}-i{i}", j.generation_id) for i, j in enumerate(joins)])
    return out


_STREAM_CLIENT = r"""
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
for i in range(int(sys.argv[2]) // 10):
    s.sendall(b"y" * 200)                       # ten 20-byte requests in one write
    need = 140
    while need > 0:                             # their ten 14-byte answers
        need -= len(s.recv(65536))
s.close()
"""


def streams(rounds: int, n: int = 60000) -> None:
    """--streams: a connection's reader and writer alone, over TCP on the loopback with a client process that writes
    ten 20-byte requests at a time and waits for their ten 14-byte answers: asyncio's StreamReader/StreamWriter (as
    the listener made them before) against tenure's Stream (tenure/server/stream.py), taking turns on the event
    loop the server uses; each request gets a loop turn and its own answer written (then drained: asyncio's drain
    every time, the Stream's only when `must_drain()`); and the Stream writing a read's ten answers in one write
    (what the send system call costs per answer). The CPU time of the loop per request, and the load."""
    import socket as socket_module

    from tenure.server.eventloop import run
    from tenure.server.stream import Stream

    async def one(kind: str) -> float:
        loop = asyncio.get_running_loop()
        listening = socket_module.create_server(("127.0.0.1", 0))
        listening.setblocking(False)
        client = subprocess.Popen([sys.executable, "-c", _STREAM_CLIENT, str(listening.getsockname()[1]), str(n)])
        sock, _ = await loop.sock_accept(listening)
        listening.close()
        sock.setblocking(False)
        if kind == "asyncio streams":
            reader, writer = await asyncio.open_connection(sock=sock)
        else:
            stream = Stream()
            await loop.connect_accepted_socket(lambda: stream, sock=sock)
            reader = writer = stream      # type: ignore[assignment]
        c0, served = time.thread_time(), 0
        while data := await reader.read(256 * 1024):
            if kind == "Stream, one write":          # the read's answers written together (as held answers are)
                k = len(data) // 20
                for _ in range(k):
                    await asyncio.sleep(0)
                writer.write(b"a" * 14 * k)
                served += k
                continue
            for _ in range(len(data) // 20):
                await asyncio.sleep(0)
                writer.write(b"a" * 14)
                if kind == "asyncio streams" or writer.must_drain():   # type: ignore[attr-defined]
                    await writer.drain()
                served += 1
        cpu = time.thread_time() - c0
        writer.close()
        client.wait(60)
        return cpu / served * 1e6

    got: dict[str, list[float]] = {"asyncio streams": [], "tenure Stream": [], "Stream, one write": []}
    for rnd in range(rounds):
        for kind in got:
            got[kind].append(run(one(kind)))
            print(f"  round {rnd + 1}: {kind:<16} {got[kind][-1]:5.2f} us per request (loop CPU); load average "
                  f"{os.getloadavg()}", flush=True)
    mine, base = statistics.median(got["tenure Stream"]), statistics.median(got["asyncio streams"])
    print(f"medians of {rounds}: tenure Stream {mine:.2f} us against asyncio streams {base:.2f} us = "
          f"{mine / base:.2f}x (min {min(got['tenure Stream']):.2f} against {min(got['asyncio streams']):.2f}); "
          f"the ten answers of a read in one write: {statistics.median(got['Stream, one write']):.2f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apis", default="heartbeat,commit,fetch,produce")
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--connections", type=int, default=100, help="for fetch and produce")
    ap.add_argument("--commit-partitions", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--profile", metavar="PATH", help="run the server under cProfile, write its stats to PATH and "
                    "print the top functions by own time (the figures above are then inflated by the profiler)")
    ap.add_argument("--py-spy", metavar="PATH", dest="pyspy",
                    help="sample the server with py-spy (--nonblocking) during each API's run, write the collapsed "
                    "stacks to PATH.API.txt and print the functions with the most own and total samples")
    ap.add_argument("--in-process", action="store_true",
                    help="no sockets: each API's requests fed to one connection of an in-process server, and the "
                    "CPU time of the server's loop thread per request (tenure and the codec, without the kernel)")
    ap.add_argument("--coordinator", action="store_true",
                    help="the group coordinator's runtime alone (no server, no codec: decoded requests handed to "
                    "GroupRuntime.handle over an in-memory __consumer_offsets, on uvloop): the CPU time per "
                    "heartbeat and commit of the coordinator itself (apis heartbeat, commit and mixed only: mixed is the "
                    "heartbeats with a commit in every 100, with --fsync batch the case where answers wait)")
    ap.add_argument("--fsync", default="never", choices=("never", "batch", "always"),
                    help="--coordinator: the fsync policy of its in-memory __consumer_offsets (batch: answers wait "
                         "for durability through a worker thread's round trip, as a server's with a data dir do)")
    ap.add_argument("--split", action="store_true",
                    help="a heartbeat's path in parts, in process: the whole connection (capture on and off), the "
                    "connection with a fixed answer, decode_request, the dispatcher (with the owners answering at "
                    "once, capture on and off), the coordinator runtime alone: CPU time per heartbeat of each")
    ap.add_argument("--streams", action="store_true",
                    help="a connection's reader and writer alone over a loopback socket: asyncio's streams against "
                    "tenure's Stream (tenure/server/stream.py), --rounds turns each (no server, this tree only)")
    ap.add_argument("--per-read", type=int, default=1,
                    help="--in-process: requests given in one read (10: a group's heartbeats, as bench/groups.py's "
                    "generator sends them on one connection per group of ten members)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of every tree, taking turns (medians compared)")
    ap.add_argument("--baseline", action="append", default=[], metavar="TREE",
                    help="also run every API against `tenure serve` from this source tree (e.g. a `git worktree` of "
                    "main) and print this tree's figures against its; repeatable")
    args = ap.parse_args()
    trees = [REPO] + [Path(t) for t in args.baseline]
    print(f"tenure {tree_version()}; cpus {os.cpu_count()}; load average at start {os.getloadavg()}", flush=True)
    if args.streams:
        streams(args.rounds)
        return
    results: dict[str, list[list[dict]]] = {}
    # named once: a file edited meanwhile must not make this tree a second one
    labels = [tree_label(tree) + ("" if tree == REPO else " (baseline)") for tree in trees]
    for rnd in range(args.rounds):
        for tree, label in zip(trees, labels, strict=True):   # the trees take turns: drift in load hits both
            print(f"round {rnd + 1}: tree {tree} = {label}; load average {os.getloadavg()}", flush=True)
            results.setdefault(label, []).append(
                run_in_process(tree, args, "coordinator_child") if args.coordinator
                else run_in_process(tree, args, "split_child") if args.split
                else run_in_process(tree, args) if args.in_process else run_tree(tree, args))
    if len(results) > 1:
        (this, mine), *others = results.items()
        med = lambda runs, i, k: statistics.median(rows[i][k] for rows in runs)  # noqa: E731
        for other, base in others:
            print(f"this tree {this} against {other}, medians of {args.rounds} round(s): server CPU per request, "
                  f"requests/s, p99 (ratio this/baseline)")
            width = max(10, *(len(r["api"]) for r in mine[0]))
            for i, r in enumerate(mine[0]):
                cpu, bcpu = med(mine, i, "server_us"), med(base, i, "server_us")
                rate, brate = med(mine, i, "per_s"), med(base, i, "per_s")
                print(f"  {r['api']:<{width}} {cpu:6.1f} us vs {bcpu:6.1f} us = {cpu / bcpu:.2f}x   {rate:9,.0f}/s vs "
                      f"{brate:9,.0f}/s = {rate / brate:.2f}x   p99 {med(mine, i, 'p99'):6.2f} vs "
                      f"{med(base, i, 'p99'):6.2f} ms")
    print(f"load average at end {os.getloadavg()}")
    if args.profile and not (args.in_process or args.coordinator):
        import pstats
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(40)


def frames_for(api: str, groups: list[list[tuple]], args) -> tuple[list[list[bytes]], int]:
    """Each connection's cycle of pre-encoded request frames for `api`, and where the answer's error code is."""
    from kafka.protocol.consumer import FetchRequest, HeartbeatRequest, OffsetCommitRequest

    from tests.support.wire import build_batch, produce_request

    if api == "heartbeat":
        sets = [[frame(HeartbeatRequest(group_id=g, generation_id=gen, member_id=m, group_instance_id=i),
                       4) for g, m, i, gen in grp] for grp in groups]
        error_at = 4 + 1 + 4           # header v1: correlation id, tagged fields; throttle_time_ms
    elif api == "commit":
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        sets = [[frame(OffsetCommitRequest(
            group_id=g, generation_id_or_member_epoch=gen, member_id=m, group_instance_id=i,
            topics=[T(name="hp-commits", partitions=[T.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=1, committed_leader_epoch=-1,
                committed_metadata="") for p in range(args.commit_partitions)])]), 8)]
            for g, m, i, gen in (grp[0] for grp in groups)]
        # header v1, throttle, topics (compact array, 1 byte), name (compact string), partitions
        # (1 byte), partition_index (4): the first partition's error code
        error_at = 4 + 1 + 4 + 1 + 1 + len("hp-commits") + 1 + 4
    elif api == "fetch":
        F = FetchRequest.FetchTopic
        sets = [[frame(FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[F(topic="hp-data", partitions=[F.FetchPartition(
                partition=c, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1 << 20)])], forgotten_topics_data=[],
            rack_id=""), 12)] for c in range(args.connections)]
        error_at = 4 + 1 + 4                # the response's top-level error code
    elif api == "produce":
        batch = build_batch([(None, b"x" * 100)] * 10)
        sets = [[frame(produce_request("hp-data", c, batch, acks=1), 9)] for c in range(args.connections)]
        # header v1, responses (1), name (compact), partitions (1), index (4): the partition's error
        error_at = 4 + 1 + 1 + 1 + len("hp-data") + 1 + 4
    else:
        raise SystemExit(f"unknown api {api}")
    return sets, error_at


class _Feed:
    """A connection's reader in the in-process mode: the next frame of the cycle at each read (after a loop turn, as
    a socket's reader waits for the client's next request) until the run's end, then b"" (the client closed)."""

    def __init__(self, frames: list[bytes], stop_at: float, per_read: int = 1) -> None:
        self.frames = [bytearray(f) for f in frames]
        self.stop_at, self.i, self.per_read = stop_at, 0, per_read

    async def read(self, n: int) -> bytes:
        await asyncio.sleep(0)
        if time.perf_counter() >= self.stop_at:
            return b""
        out = []
        for _ in range(self.per_read):       # --per-read: that many requests in one read (a group's heartbeats)
            f = self.frames[self.i % len(self.frames)]
            self.i += 1
            struct.pack_into(">i", f, 8, self.i)
            out.append(bytes(f))
        return b"".join(out)


class _Sink:
    """A connection's writer in the in-process mode: counts the answers and their error codes."""

    def __init__(self, error_at: int) -> None:
        self.error_at, self.answers, self.errors = error_at, 0, {}

    def write(self, data: bytes) -> None:
        at = 0                               # one write may carry several answers (held answers: connection.py)
        while at < len(data):
            self.answers += 1
            code = struct.unpack_from(">h", data, at + 4 + self.error_at)[0]
            self.errors[code] = self.errors.get(code, 0) + 1
            at += 4 + struct.unpack_from(">i", data, at)[0]

    async def drain(self) -> None:
        pass

    def must_drain(self) -> bool:
        """As a socket's writer (tenure/server/stream.py) whose transport never pauses: no drain needed (a tree
        whose connection does not ask awaits `drain` every time)."""
        return False


def in_process_child(opts: dict) -> None:
    """The in-process mode's child (tenure imported from the tree under test): a ServerThread with a data dir; each
    API's requests fed to one `Connection` of that server's own (its dispatcher, limits, metrics) with no socket,
    for --seconds; the loop thread's CPU time (time.thread_time) per request printed as JSON."""
    import threading

    from tenure.server import ServerThread
    from tenure.server.connection import Peer
    from tests.support.wire import WireClient, build_batch, create_topic, produce_request
    args = argparse.Namespace(**opts)
    out = []
    with tempfile.TemporaryDirectory() as d:
        st = ServerThread(port=0, data_dir=str(Path(d) / "data"), fsync="batch").start()
        try:
            w = WireClient.to(st.bootstrap)
            create_topic(w, "hp-commits", args.commit_partitions)
            create_topic(w, "hp-data", args.connections)
            for p in range(args.connections):
                w.call(produce_request("hp-data", p, build_batch([(None, b"x" * 100)] * 10), acks=1), 9)
            w.sock.close()
            groups = asyncio.run(form_groups(st.bootstrap, st.expect_group, args.groups, args.members))
            for api in args.apis.split(","):
                sets, error_at = frames_for(api, groups, args)
                frames = [f for fs in sets for f in fs]

                async def drive(frames: list[bytes] = frames, error_at: int = error_at) -> tuple[float, float, _Sink]:
                    sink = _Sink(error_at)
                    conn = st.server._connection(Peer(1_000_000, ("127.0.0.1", 1), "/127.0.0.1"),
                                                 _Feed(frames, time.perf_counter() + args.seconds,
                                                       getattr(args, "per_read", 1)), sink)
                    assert threading.current_thread() is not threading.main_thread()
                    prof = None
                    if args.profile:                 # cProfile of the loop thread during this API's run
                        import cProfile
                        prof = cProfile.Profile()
                        prof.enable()
                    c0, t0 = time.thread_time(), time.perf_counter()
                    await conn.run()
                    took = time.thread_time() - c0, time.perf_counter() - t0
                    if prof is not None:
                        prof.disable()
                        prof.dump_stats(f"{args.profile}.{api}")  # noqa: B023 - run within the iteration
                    return *took, sink
                cpu, wall, sink = asyncio.run_coroutine_threadsafe(drive(), st.loop).result(args.seconds + 60)
                out.append({"api": api, "n": sink.answers, "per_s": sink.answers / wall,
                            "server_us": cpu / max(1, sink.answers) * 1e6, "errors": sink.errors})
        finally:
            st.stop()
    print("RESULT " + json.dumps(out), flush=True)


def split_child(opts: dict) -> None:
    """The --split mode's child (tenure imported from the tree under test): a ServerThread with a data dir and
    --groups groups of --members static members, as --in-process; then each part of a heartbeat's path timed on
    the server's loop thread, alone and together (best of 3 runs of `n` heartbeats each, CPU time per heartbeat):
    the whole connection with --per-read requests per read (the capture on, then off); the connection with a
    dispatcher that answers a fixed frame (framing, decode, the loop turn, the send); `decode_request` alone; the
    dispatcher fed decoded requests, with the owners' routes answering a ready answer and with the real ones (and
    the whole connection with the owners answering a ready answer); the
    coordinator runtime's `handle` alone. What the parts take apart does not add up to what they take together
    (a longer path misses the CPU's caches more): both are printed."""
    import threading

    from tenure.protocol.codec import decode_request
    from tenure.server import ServerThread
    from tenure.server.connection import Peer
    args = argparse.Namespace(**opts)
    n = 20000
    with tempfile.TemporaryDirectory() as d:
        st = ServerThread(port=0, data_dir=str(Path(d) / "data"), fsync="batch").start()
        try:
            groups = asyncio.run(form_groups(st.bootstrap, st.expect_group, args.groups, args.members))
            sets, error_at = frames_for("heartbeat", groups, args)
            frames = [f for fs in sets for f in fs]

            async def run() -> list[dict]:
                assert threading.current_thread() is not threading.main_thread()
                conn = st.server._connection(Peer(1_000_000, ("127.0.0.1", 1), "/127.0.0.1"), None, _Sink(error_at))
                dispatch, peer, capture = conn.dispatch, conn.peer, conn.dispatch.capture
                reqs = [decode_request(f[4:], conn.limits, conn.served) for f in frames]
                answer = await st.server.runtime.handle(reqs[0], peer.context.for_request(12, 4, "hot", 0, None))

                async def sent(frame: bytes) -> None:
                    pass

                async def ready(req, ctx):
                    return answer

                async def fixed(req, peer, send) -> bool:
                    await send(b"\x00\x00\x00\x0a" + b"\x00" * 10)
                    return True

                def whole(stub=None):
                    async def go() -> float:
                        sink = _Sink(0 if stub else error_at)
                        c = st.server._connection(Peer(1_000_001, ("127.0.0.1", 1), "/127.0.0.1"),
                                                  _Feed(frames, time.perf_counter() + 60, args.per_read), sink)
                        if stub is not None:
                            c.dispatch = stub
                        feed = c.reader
                        stop = feed.read

                        async def bounded(k: int) -> bytes:       # n requests, then the client closes
                            return b"" if sink.answers >= n else await stop(k)
                        feed.read = bounded
                        c0 = time.thread_time()
                        await c.run()
                        return (time.thread_time() - c0) / max(1, sink.answers)
                    return go

                def loop(fn):
                    async def go() -> float:
                        c0 = time.thread_time()
                        for i in range(n):
                            await fn(i)
                        return (time.thread_time() - c0) / n
                    return go

                async def decode(i):
                    decode_request(frames[i % len(frames)][4:], conn.limits, conn.served)

                async def dispatched(i):
                    await dispatch(reqs[i % len(reqs)], peer, sent)

                ctx = peer.context.for_request(12, 4, "hot", 0, None)

                async def handled(i):
                    await st.server.runtime.handle(reqs[i % len(reqs)], ctx)

                async def best(go) -> float:
                    return min([await go() for _ in range(3)]) * 1e6

                out: dict[str, float] = {}
                size = capture.capacity
                out["connection, the whole path"] = await best(whole())
                capture.resize(0)
                out["  the same, the capture off"] = await best(whole())
                capture.resize(100)
                out["  the same, the capture's ring 100 long"] = await best(whole())
                capture.resize(size)
                import gc
                gc.disable()
                try:
                    out["  the same, the collector off"] = await best(whole())
                finally:
                    gc.enable()
                out["connection, a fixed answer (decode incl.)"] = await best(whole(fixed))
                routes = dict(dispatch.routes)
                dispatch.routes.update({k: ready for k in routes})
                out["connection, the owners answering at once"] = await best(whole())
                dispatch.routes.update(routes)
                out["decode_request"] = await best(loop(decode))
                out["dispatcher (coordinator incl.)"] = await best(loop(dispatched))
                routes = dict(dispatch.routes)
                dispatch.routes.update({k: ready for k in routes})
                out["dispatcher, owners answering at once"] = await best(loop(dispatched))
                capture.resize(0)
                out["  the same, the capture off "] = await best(loop(dispatched))
                capture.resize(size)
                dispatch.routes.update(routes)
                out["coordinator runtime.handle"] = await best(loop(handled))
                return [{"api": k, "n": n, "per_s": 1e6 / v, "server_us": v, "errors": {}} for k, v in out.items()]
            rows = asyncio.run_coroutine_threadsafe(run(), st.loop).result(600)
        finally:
            st.stop()
    print("RESULT " + json.dumps(rows), flush=True)


def coordinator_child(opts: dict) -> None:
    """The --coordinator mode's child (tenure imported from the tree under test): a GroupRuntime over an in-memory
    `__consumer_offsets` of 50 partitions on uvloop, --groups groups of --members static members formed through
    it (expect_group, JoinGroup, SyncGroup); then, per API, decoded requests handed to `GroupRuntime.handle` in
    turn for --seconds (heartbeat: each member's Heartbeat v4; commit: one member per group commits
    --commit-partitions partitions, OffsetCommit v8; mixed: the heartbeats with every 100th replaced by its group's
    first member's commit, as members that commit now and then); the thread's CPU time per request printed as JSON.
    --fsync: the policy the runtime's writes wait for (never: none)."""
    import uvloop
    from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest

    from tenure.broker.topics import TopicRegistry
    from tenure.coordinator import GroupShard
    from tenure.coordinator.group_runtime import GroupRuntime
    from tenure.protocol.apis import SUPPORTED
    from tenure.protocol.codec import Request
    from tenure.protocol.context import RequestContext
    from tenure.protocol.internal_topics import OFFSETS_TOPIC
    from tenure.storage.durability import Durability
    args = argparse.Namespace(**opts)

    def request(body, version: int) -> Request:
        return Request(body.API_KEY, version, 1, "hot", body, SUPPORTED[body.API_KEY])

    async def run() -> list[dict]:
        topic = TopicRegistry().create(OFFSETS_TOPIC, 50, internal=True, configs={"cleanup.policy": "compact"})
        rt = GroupRuntime(lambda p: GroupShard(partition=p), topic, durability=Durability(opts.get("fsync", "never")))
        P = JoinGroupRequest.JoinGroupRequestProtocol
        members = []
        for g in range(args.groups):
            gid = f"hp-{g}"
            rt.expect_group(gid, args.members)
            ctx = RequestContext(0, 9, "hot", "/127.0.0.1", 0, api_key=11)
            joins = await asyncio.gather(*(rt.handle(request(JoinGroupRequest(
                group_id=gid, session_timeout_ms=1_800_000, rebalance_timeout_ms=30000, member_id="",
                group_instance_id=f"{gid}-i{i}", protocol_type="consumer", protocols=[P(name="range", metadata=b"")],
                reason=None), 9), ctx) for i in range(args.members)))
            ctx = RequestContext(0, 5, "hot", "/127.0.0.1", 0, api_key=14)
            await asyncio.gather(*(rt.handle(request(SyncGroupRequest(
                group_id=gid, generation_id=j.generation_id, member_id=j.member_id, group_instance_id=f"{gid}-i{i}",
                protocol_type="consumer", protocol_name="range", assignments=[]), 5), ctx)
                for i, j in enumerate(joins)))
            members.append([(gid, j.member_id, f"{gid}-i{i}", j.generation_id) for i, j in enumerate(joins)])
        out = []
        T = OffsetCommitRequest.OffsetCommitRequestTopic

        def commit(g: str, m: str, i: str, gen: int) -> Request:
            return request(OffsetCommitRequest(
                group_id=g, generation_id_or_member_epoch=gen, member_id=m, group_instance_id=i,
                topics=[T(name="hp-commits", partitions=[T.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")
                    for p in range(args.commit_partitions)])]), 8)
        for api in args.apis.split(","):
            if api in ("heartbeat", "mixed"):
                reqs = [request(HeartbeatRequest(group_id=g, generation_id=gen, member_id=m, group_instance_id=i), 4)
                        for grp in members for g, m, i, gen in grp]
                if api == "mixed":
                    for k in range(0, len(reqs), 100):
                        reqs[k] = commit(*members[(k // 100) % len(members)][0])
            elif api == "commit":
                reqs = [commit(*grp[0]) for grp in members]
            else:
                raise SystemExit(f"--coordinator measures heartbeat, commit and mixed, not {api}")
            ctxs = {r.api_key: RequestContext(0, r.api_version, "hot", "/127.0.0.1", 0, api_key=r.api_key) for r in reqs}
            errors: dict[int, int] = {}
            n, stop_at = 0, time.perf_counter() + args.seconds
            c0, t0 = time.thread_time(), time.perf_counter()
            while time.perf_counter() < stop_at:
                for r in reqs:
                    answer = await rt.handle(r, ctxs[r.api_key])
                    code = answer.error_code if r.api_key == 12 else answer.topics[0].partitions[0].error_code
                    errors[code] = errors.get(code, 0) + 1
                n += len(reqs)
                await asyncio.sleep(0)
            cpu, wall = time.thread_time() - c0, time.perf_counter() - t0
            out.append({"api": api, "n": n, "per_s": n / wall, "server_us": cpu / max(1, n) * 1e6, "errors": errors})
        rt.close()
        return out
    print("RESULT " + json.dumps(uvloop.run(run())), flush=True)


def run_in_process(tree: Path, args, entry: str = "in_process_child") -> list[dict]:
    """The in-process mode (or, with `entry` "coordinator_child", the --coordinator mode) against `tree`: a child
    interpreter with tenure from that tree."""
    code = (f"sys.path[:0] = [{str(Path(__file__).resolve().parent)!r}, {str(REPO)!r}]\n"
            f"import hot_path\nhot_path.{entry}({vars(args)!r})\n")
    child = subprocess.Popen(python_argv(tree, code), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spy = None
    if args.pyspy:                           # the whole child: its set-up too (keep --groups small)
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(child.pid),
                                "--rate", "200", "--nonblocking", "--format", "raw", "--output",
                                f"{args.pyspy}.{tree_label(tree)}.txt"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    stdout, stderr = child.communicate(timeout=600)
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    if spy is not None:
        spy.wait(60)
        print_profile(f"{args.pyspy}.{tree_label(tree)}.txt")
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"the in-process child failed:\n{proc.stdout}\n{proc.stderr}")
    if args.profile:                         # the child's cProfile of each API: kept per tree, the top printed
        import pstats
        for api in args.apis.split(","):
            path = Path(f"{args.profile}.{tree_label(tree)}.{api}")
            Path(f"{args.profile}.{api}").replace(path)
            print(f"cProfile of the loop thread, {api}, tree {tree_label(tree)} ({path}):")
            stats = pstats.Stats(str(path))
            stats.sort_stats("tottime").print_stats(25)
            print_split(stats, api, tree_label(tree))
    rows = json.loads(line[len("RESULT "):])
    for r in rows:
        r.update(p50=0.0, p99=0.0, max=0.0, conns=1, client_us=0.0)
        if entry == "split_child":
            print(f"  {r['api']:<45} {r['server_us']:6.1f} us per heartbeat (CPU, loop thread)", flush=True)
            continue
        where = ("the coordinator runtime alone" if entry == "coordinator_child"
                 else "in process, one connection, no socket")
        print(f"  {r['api']:<10} {where}: {r['per_s']:>9,.0f}/s  server loop thread "
              f"{r['server_us']:6.1f} us/req  errors {r['errors']}", flush=True)
    return rows


def run_tree(tree: Path, args) -> list[dict]:
    """Spawn `tenure serve` from the source tree `tree` and run every API of --apis against it."""
    from tests.support.procs import TenureProcess
    from tests.support.wire import WireClient, build_batch, create_topic, produce_request

    with tempfile.TemporaryDirectory() as d:
        srv = TenureProcess(Path(d) / "data")
        plain = srv.argv
        if args.profile:
            srv.argv = lambda port=None: [sys.executable, "-m", "cProfile", "-o", args.profile,  # type: ignore
                                          *plain(port)[1:]]
        else:
            srv.argv = lambda port=None: serve_argv(tree, *plain(port)[3:])  # type: ignore
        srv.start()
        rows: list[dict] = []
        try:
            host, port = srv.bootstrap.rsplit(":", 1)
            pid = srv.proc.pid
            w = WireClient.to(srv.bootstrap)
            create_topic(w, "hp-commits", args.commit_partitions)
            create_topic(w, "hp-data", args.connections)
            for p in range(args.connections):
                w.call(produce_request("hp-data", p, build_batch([(None, b"x" * 100)] * 10), acks=1), 9)
            w.sock.close()
            apis = args.apis.split(",")
            expect = lambda g, n: admin_post(f"{srv.admin_url}/groups/{g}/expect", {"members": n})  # noqa: E731
            groups = asyncio.run(form_groups(srv.bootstrap, expect, args.groups, args.members)) \
                if {"heartbeat", "commit"} & set(apis) else []
            for api in apis:
                sets, error_at = frames_for(api, groups, args)
                spy = sample(pid, f"{args.pyspy}.{api}.txt", args.seconds) if args.pyspy else None
                s0, c0 = cpu_s(pid), cpu_s()
                r = asyncio.run(pump(host, int(port), sets, error_at, args.seconds))
                s1, c1 = cpu_s(pid), cpu_s()
                if spy is not None:
                    spy.wait(60)
                r.update(api=api, conns=len(sets), server_us=(s1 - s0) / r["n"] * 1e6,
                         client_us=(c1 - c0) / r["n"] * 1e6)
                rows.append(r)
                print(f"  {api:<10} {r['conns']:>4} conns  {r['per_s']:>9,.0f}/s  p50 {r['p50']:6.2f} ms  "
                      f"p99 {r['p99']:6.2f} ms  max {r['max']:7.1f} ms  server {r['server_us']:6.1f} us/req  "
                      f"client {r['client_us']:5.1f} us/req  errors {r['errors']}", flush=True)
                if spy is not None:
                    print_profile(f"{args.pyspy}.{api}.txt")
        finally:
            srv.terminate()
    return rows


if __name__ == "__main__":
    main()
