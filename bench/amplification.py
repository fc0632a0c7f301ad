"""Amplification: what one large request of small elements costs the server, and everyone else meanwhile.

For each API that amplified (issue 11, finding 4), one request of tiny elements is sent to a fresh
`tenure serve` (a subprocess of the Python running this script, so `/work/main/.venv/bin/python
bench/amplification.py` measures main's code), while 3 other connections keep doing small Metadata round
trips. Printed per request: the outcome (answered - with an OffsetCommit v2's error codes - or connection closed) and how long it took, the
server's peak RSS growth (VmHWM, reset before the request) in MiB and per MiB of request, and the other
connections' round-trip p50/p99/max over the time the request was in the server.

Two sizes per API: `--mib` MiB of elements (default 2), and exactly `--elements` array elements in all
(default 100000, tenure's default --max-request-elements: the largest request it still answers). The last
shape repeats the id of an existing group whose one member has 20 KB of metadata and assignment: main
answers every copy (a 0.05 MiB request makes a 190 MiB answer), so run it there with small sizes
(`--only "20 KB" --mib 0.05 --elements 10000`).

    .venv/bin/python bench/amplification.py [--mib 2] [--elements 100000] [--timeout 240]

Stalls (issue 30): `--stalls` runs, instead, the largest requests each API still accepts whose answers are
huge - a ConsumerGroupDescribe and a DescribeTransactions of `--elements` - 1 distinct ids that name no group
or transaction, an OffsetCommit of 23,000 partitions of a topic of 10,000 (about the largest whose batch
`__consumer_offsets` takes: one of 100,000 is refused, as Kafka refuses it), and a KIP-848 group of `--members` members each subscribing `--elements` - 1 topic names (the
last member's join is timed, then a ConsumerGroupDescribe of the group). The other connections are the
canary: their round-trip p99 while the request is in the server is the stall. Each `--server PY` (repeat it)
runs `PY -m tenure serve`, so a worktree of main's Python and this tree's run in the same script:

    .venv/bin/python bench/amplification.py --stalls --server ../base/.venv/bin/python --server .venv/bin/python

The servers load their modules' bytecode from a cache filled (compileall) before the first one starts, as an
installed tenure does (`--bytecode cached`, the default); `--bytecode env` runs them in the environment as inherited:
with PYTHONDONTWRITEBYTECODE set (this repository's sandbox) and no cache, what a server imports on first use (the
KIP-848 group kind at the first ConsumerGroupDescribe: ~50 ms compiled, ~14 ms loaded) is compiled on its loop.

Bounded: 12 requests (--stalls: 5 per server, and --members - 1 joins to set up), each given at most --timeout
seconds; the servers are killed at the end.
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchcommon import bytecode_env, tree_version, wait_ready_line  # noqa: E402


def _header(api_key: int, version: int, cid: int = 1, flexible: bool = False) -> bytes:
    """A request header (v1; v2 with its empty tagged fields for a flexible version)."""
    return struct.pack(">hhih", api_key, version, cid, 5) + b"bench" + (b"\x00" if flexible else b"")


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cstring(s: bytes) -> bytes:
    """A compact (flexible version) string."""
    return _uvarint(len(s) + 1) + s


def _string(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


# (name, api header, bytes per element, frame for n elements)
SHAPES = {
    "Metadata v1 (empty topic names)": lambda n: _header(3, 1) + struct.pack(">i", n) + b"\x00\x00" * n,
    "DescribeGroups v0 (empty group ids)": lambda n: _header(15, 0) + struct.pack(">i", n) + b"\x00\x00" * n,
    "OffsetFetch v1 (partition indexes of one topic)": lambda n: (
        _header(9, 1) + _string(b"g") + struct.pack(">i", 1) + _string(b"t") + struct.pack(">i", n)
        + b"".join(struct.pack(">i", i) for i in range(n))),
    "ListOffsets v1 (partitions of one topic)": lambda n: (
        _header(2, 1) + struct.pack(">ii", -1, 1) + _string(b"t") + struct.pack(">i", n)
        + b"".join(struct.pack(">iq", i, -1) for i in range(n))),
}
# the other APIs whose work grows with the partitions a request names (issue 30): one topic "t", n partitions
SHAPES["OffsetCommit v2 (partitions of one topic)"] = lambda n: (
    _header(8, 2) + _string(b"g") + struct.pack(">i", -1) + _string(b"") + struct.pack(">q", -1)
    + struct.pack(">i", 1) + _string(b"t") + struct.pack(">i", n)
    + b"".join(struct.pack(">iqh", i, 1, 0) for i in range(n)))
# a commit the coordinator writes: the partitions of an existing topic of 10,000 (the default cap per topic), in turn
SHAPES["OffsetCommit v2 (partitions of an existing topic: one write)"] = lambda n: (
    _header(8, 2) + _string(b"g") + struct.pack(">i", -1) + _string(b"") + struct.pack(">q", -1)
    + struct.pack(">i", 1) + _string(b"w") + struct.pack(">i", n)
    + b"".join(struct.pack(">iqh", i % 10000, 1, 0) for i in range(n)))
SHAPES["OffsetFetch v8 (one group, partition indexes of one topic)"] = lambda n: (
    _header(9, 8, flexible=True) + b"\x02" + _cstring(b"g") + b"\x02" + _cstring(b"t") + _uvarint(n + 1)
    + b"".join(struct.pack(">i", i) for i in range(n)) + b"\x00" + b"\x00" + b"\x00" + b"\x00")
SHAPES["OffsetForLeaderEpoch v2 (partitions of one topic)"] = lambda n: (
    _header(23, 2) + struct.pack(">i", 1) + _string(b"t") + struct.pack(">i", n)
    + b"".join(struct.pack(">iii", i, -1, 0) for i in range(n)))
SHAPES["DeleteRecords v0 (partitions of one topic)"] = lambda n: (
    _header(21, 0) + struct.pack(">i", 1) + _string(b"t") + struct.pack(">i", n)
    + b"".join(struct.pack(">iq", i, 0) for i in range(n)) + struct.pack(">i", 30000))
SHAPES["DescribeProducers v0 (partition indexes of one topic)"] = lambda n: (
    _header(61, 0, flexible=True) + b"\x02" + _cstring(b"t") + _uvarint(n + 1)
    + b"".join(struct.pack(">i", i) for i in range(n)) + b"\x00" + b"\x00")
SHAPES["DescribeGroups v0 (distinct 5-character ids)"] = lambda n: (
    _header(15, 0) + struct.pack(">i", n) + b"".join(_string(b"%05x" % i) for i in range(n)))
SHAPES["DescribeGroups v0 (id of a group with a 20 KB member, repeated)"] = lambda n: (
    _header(15, 0) + struct.pack(">i", n) + _string(b"big") * n)


def _call(sock: socket.socket, req, version: int):
    """One request (kafka-python's classes) on a raw socket; the decoded answer."""
    req.API_VERSION = version
    req.with_header(correlation_id=1, client_id="bench")
    sock.sendall(bytes(req.encode(header=True, framed=True)))
    size = struct.unpack(">i", _recv_exact(sock, 4))[0]
    payload = _recv_exact(sock, size)
    from kafka.protocol.api_header import ResponseClassRegistry
    resp_cls = ResponseClassRegistry._response_class_registry[req.API_KEY]
    return resp_cls.decode(struct.pack(">i", size) + payload, version=version, header=True, framed=True)


def _big_group(host: str, port: int) -> socket.socket:
    """A Stable group "big" of one static member with 10 KB of metadata and 10 KB of assignment."""
    from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest
    sock = socket.create_connection((host, port), timeout=60)
    P = JoinGroupRequest.JoinGroupRequestProtocol
    j = _call(sock, JoinGroupRequest(group_id="big", session_timeout_ms=60000, rebalance_timeout_ms=60000,
                                     member_id="", group_instance_id="i1", protocol_type="consumer",
                                     protocols=[P(name="range", metadata=b"m" * 10000)]), 5)
    A = SyncGroupRequest.SyncGroupRequestAssignment
    r = _call(sock, SyncGroupRequest(group_id="big", generation_id=j.generation_id, member_id=j.member_id,
                                     group_instance_id="i1", assignments=[A(member_id=j.member_id,
                                                                             assignment=b"a" * 10000)]), 3)
    assert r.error_code == 0, r
    return sock


def _wide_topic(host: str, port: int) -> socket.socket:
    """Topic "w" of 10,000 partitions."""
    from kafka.protocol.admin import CreateTopicsRequest
    sock = socket.create_connection((host, port), timeout=120)
    T = CreateTopicsRequest.CreatableTopic
    r = _call(sock, CreateTopicsRequest(topics=[T(name="w", num_partitions=10000, replication_factor=1, assignments=[],
                                                  configs=[])], timeout_ms=60000, validate_only=False), 4)
    assert r.topics[0].error_code == 0, r
    return sock


SETUP = {"DescribeGroups v0 (id of a group with a 20 KB member, repeated)": _big_group,
         "OffsetCommit v2 (partitions of an existing topic: one write)": _wide_topic}
# array elements outside the repeated one (the one topic the partitions belong to)
OUTER = {"OffsetFetch v1 (partition indexes of one topic)": 1, "ListOffsets v1 (partitions of one topic)": 1,
         "OffsetFetch v8 (one group, partition indexes of one topic)": 2,
         "OffsetCommit v2 (partitions of one topic)": 1, "OffsetCommit v2 (partitions of an existing topic: one write)": 1,
         "OffsetForLeaderEpoch v2 (partitions of one topic)": 1,
         "DeleteRecords v0 (partitions of one topic)": 1, "DescribeProducers v0 (partition indexes of one topic)": 1}
ELEMENT_BYTES = {"DescribeGroups v0 (id of a group with a 20 KB member, repeated)": 5,
                 "DescribeGroups v0 (distinct 5-character ids)": 7,
                 "Metadata v1 (empty topic names)": 2, "DescribeGroups v0 (empty group ids)": 2,
                 "OffsetFetch v1 (partition indexes of one topic)": 4, "ListOffsets v1 (partitions of one topic)": 12,
                 "OffsetFetch v8 (one group, partition indexes of one topic)": 4,
                 "OffsetCommit v2 (partitions of one topic)": 14,
                 "OffsetCommit v2 (partitions of an existing topic: one write)": 14, "OffsetForLeaderEpoch v2 (partitions of one topic)": 12,
                 "DeleteRecords v0 (partitions of one topic)": 12,
                 "DescribeProducers v0 (partition indexes of one topic)": 4}


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")      # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class Bystander(threading.Thread):
    """Small Metadata v1 round trips (no topics) on its own connection, timed, until stopped."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection((host, port), timeout=600)
        self.calls: list[tuple[float, float]] = []        # (start, end)
        self.stop = threading.Event()
        self.failed: str | None = None

    def run(self) -> None:
        cid = 0
        while not self.stop.is_set():
            cid += 1
            payload = _header(3, 1, cid) + struct.pack(">i", 0)
            t0 = time.perf_counter()
            try:
                self.sock.sendall(struct.pack(">i", len(payload)) + payload)
                size = _recv_exact(self.sock, 4)
                if size is None or _recv_exact(self.sock, struct.unpack(">i", size)[0]) is None:
                    self.failed = "closed"
                    return
            except OSError as exc:
                self.failed = repr(exc)
                return
            self.calls.append((t0, time.perf_counter()))
            time.sleep(0.005)


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def _kafka_frame(req, version: int) -> bytes:
    """A whole request frame encoded with kafka-python's classes."""
    req.API_VERSION = version
    req.with_header(correlation_id=1, client_id="bench")
    return bytes(req.encode(header=True, framed=True))


def _names(n: int, prefix: str) -> list[str]:
    return [f"{prefix}{i:05d}" for i in range(n)]


def _describe_groups_frame(ids: list[str]) -> bytes:
    from tenure.protocol.consumer_group import ConsumerGroupDescribeRequest
    return _kafka_frame(ConsumerGroupDescribeRequest(group_ids=ids, include_authorized_operations=False), 0)


def _describe_txns_frame(ids: list[str]) -> bytes:
    from kafka.protocol.admin import DescribeTransactionsRequest
    return _kafka_frame(DescribeTransactionsRequest(transactional_ids=ids), 0)


def _join_frame(member: int, names: list[str]) -> bytes:
    """A KIP-848 member's first ConsumerGroupHeartbeat (v1: the client names its member id) to group "wide"."""
    from tenure.protocol.consumer_group import ConsumerGroupHeartbeatRequest
    return _kafka_frame(ConsumerGroupHeartbeatRequest(
        group_id="wide", member_id=f"member-{member:016d}", member_epoch=0, rebalance_timeout_ms=60000,
        subscribed_topic_names=names, topic_partitions=[]), 1)


def _answer(sock: socket.socket, frame: bytes) -> str:
    """Send one frame, read its answer: "answered (N MiB)", "closed" or "timeout"."""
    sock.sendall(frame)
    try:
        size = _recv_exact(sock, 4)
        if size is None:
            return "closed"
        body = _recv_exact(sock, struct.unpack(">i", size)[0])
        if body is None:
            return "closed"
        return f"answered ({len(body) / 2**20:.1f} MiB{_commit_codes(frame, body)})"
    except (TimeoutError, ConnectionError) as exc:
        return "closed" if isinstance(exc, ConnectionError) else "timeout"


def _commit_codes(frame: bytes, body: bytes) -> str:
    """For an OffsetCommit v2 (the shapes' version): ", error codes {...}" of its answer's partitions."""
    api, version = struct.unpack(">hh", frame[4:8])
    if api != 8 or version != 2:
        return ""
    codes, at = set(), 4                                  # after the correlation id
    (topics,) = struct.unpack_from(">i", body, at)
    at += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", body, at)
        (parts,) = struct.unpack_from(">i", body, at + 2 + name_len)
        at += 6 + name_len
        for _ in range(parts):
            codes.add(struct.unpack_from(">h", body, at + 4)[0])
            at += 6
    return f", error codes {sorted(codes)}"


# the largest OffsetCommit of the shape's names whose batch __consumer_offsets takes (1 MiB: ~45 bytes a record)
COMMIT_PARTITIONS = 23_000


def _framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


# --stalls: (name, elements, setup(host, port, n, members) -> held sockets, [(label, frame)])
def _stall_shapes(n: int, members: int) -> list[tuple]:
    names = _names(n, "topic-")
    def wide_group(host: str, port: int, count: int) -> list[socket.socket]:
        held = []
        for m in range(count):
            sock = socket.create_connection((host, port), timeout=600)
            outcome = _answer(sock, _join_frame(m, names))
            if not outcome.startswith("answered"):
                raise RuntimeError(f"member {m} of the group was not answered: {outcome}")
            held.append(sock)
        return held
    return [
        ("ConsumerGroupDescribe v0 (distinct ids, no such group)", n, None,
         [("", _describe_groups_frame(_names(n, "group-")))]),
        ("DescribeTransactions v0 (distinct ids, none exist)", n, None,
         [("", _describe_txns_frame(_names(n, "txn-")))]),
        (f"OffsetCommit v2 of {COMMIT_PARTITIONS:,} partitions of topic w (about the largest batch accepted)",
         COMMIT_PARTITIONS, lambda host, port: [_wide_topic(host, port)],
         [("", _framed(SHAPES["OffsetCommit v2 (partitions of an existing topic: one write)"](COMMIT_PARTITIONS)))]),
        (f"KIP-848 group of {members} members, each subscribing {n:,} names", n,
         lambda host, port: wide_group(host, port, members - 1),
         [(f"member {members}'s join", _join_frame(members - 1, names)),
          ("then ConsumerGroupDescribe of the group", _describe_groups_frame(["wide"]))]),
    ]


_ENVS: dict[str, dict[str, str]] = {}        # python -> the environment its servers run in (--bytecode)


def measure(python: str, frames: list[tuple[str, bytes]], timeout: float, setup=None,
            extra: tuple[str, ...] = (), bytecode: str = "cached") -> list[dict]:
    """One fresh server run by `python`; `setup(host, port)` first, then each frame in turn while the
    bystanders (the canary) keep going; one row per frame."""
    biggest = max(len(f) for _, f in frames)
    env = _ENVS.get(python)
    if env is None:
        env = _ENVS[python] = bytecode_env(python, bytecode)
    proc = subprocess.Popen([python, "-m", "tenure", "serve", "--port", "0", "--max-frame-bytes",
                             str(biggest + 1024), "--no-auto-create-topics", "--log-level", "CRITICAL", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir(), env=env)
    rows = []
    try:
        bootstrap, _ = wait_ready_line(proc, 60)
        if bootstrap is None:
            raise RuntimeError("the server did not start")
        host, port = bootstrap.rsplit(":", 1)
        rss_start = _status(proc.pid, "VmRSS")
        t_setup = time.perf_counter()
        keep = setup(host, int(port)) if setup is not None else None   # noqa: F841 (held open)
        setup_s = time.perf_counter() - t_setup
        for label, frame in frames:
            others = [Bystander(host, int(port)) for _ in range(3)]
            for b in others:
                b.start()
            time.sleep(1.0)                                   # warm: every connection served a few times
            rss0 = _status(proc.pid, "VmRSS")
            peak_reset = _reset_peak(proc.pid)
            hwm0 = _status(proc.pid, "VmHWM") if peak_reset else rss0
            big = socket.create_connection((host, int(port)), timeout=timeout)
            load = os.getloadavg()[0]
            t_send = time.perf_counter()
            outcome = _answer(big, frame)
            t_done = time.perf_counter()
            time.sleep(0.3)
            for b in others:
                b.stop.set()
            for b in others:
                b.join(timeout + 5)
                b.sock.close()
            hwm1 = _status(proc.pid, "VmHWM")
            lat = [(e - s) * 1000 for b in others for s, e in b.calls if s < t_done and e > t_send]
            stuck = [b.failed for b in others if b.failed]
            rows.append({"label": label, "mib": len(frame) / 2**20, "outcome": outcome, "seconds": t_done - t_send,
                         "growth_mib": max(0, hwm1 - hwm0) / 2**20, "p50": _percentile(lat, 0.5),
                         "p99": _percentile(lat, 0.99), "max": max(lat) if lat else float("nan"),
                         "calls": len(lat), "stuck": stuck, "peak_reset": peak_reset, "load": load,
                         "rss_start": rss_start / 2**20, "rss_before": rss0 / 2**20,
                         "rss_after": _status(proc.pid, "VmRSS") / 2**20, "setup_s": setup_s})
            big.close()
        return rows
    finally:
        proc.kill()
        proc.wait(10)


def _tree_of(python: str) -> str:
    """The name of the tree whose tenure `python` runs."""
    return Path(subprocess.run([python, "-c", "import tenure, os; print(os.path.dirname(os.path.dirname("
                                "tenure.__file__)))"], capture_output=True, text=True,
                               cwd=tempfile.gettempdir()).stdout.strip()).name


def stalls(args) -> None:
    """The --stalls table: each server (--server) against each shape, rows side by side in one run."""
    print("| server | request | elements | MiB | outcome | s | canary p50 / p99 / max ms (calls) | "
          "RSS MiB: start / before / after | peak growth MiB | load |")
    print("|---|---|---:|---:|---|---:|---|---|---:|---:|")
    for name, n, setup, frames in _stall_shapes(args.elements - 1, args.members):
        if args.only and args.only not in name:
            continue
        for python in [os.path.abspath(p) for p in args.server or [sys.executable]]:
            tree = _tree_of(python)
            rows = measure(python, frames, args.timeout, setup,
                           (("--consumer-session-timeout-ms", "600000") if setup is not None else ())
                           + tuple(args.serve_arg), args.bytecode)
            for r in rows:
                note = f" (their connections: {r['stuck']})" if r["stuck"] else ""
                what = f"{name}: {r['label']}" if r["label"] else name
                if r["setup_s"] > 0.5 and r is rows[0]:
                    what += f" (set-up {r['setup_s']:.1f} s)"
                print(f"| {tree} | {what} | {n:,} | {r['mib']:.2f} | {r['outcome']} | "
                      f"{r['seconds']:.2f} | {r['p50']:.0f} / {r['p99']:.0f} / {r['max']:.0f} ({r['calls']}){note} | "
                      f"{r['rss_start']:.0f} / {r['rss_before']:.0f} / {r['rss_after']:.0f} | "
                      f"{r['growth_mib']:.0f} | {r['load']:.1f} |", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=2.0)
    ap.add_argument("--elements", type=int, default=100_000)
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--only", default=None, help="run the APIs whose name contains this")
    ap.add_argument("--stalls", action="store_true", help="the largest accepted requests with huge answers")
    ap.add_argument("--members", type=int, default=21, help="--stalls: members of the KIP-848 group")
    ap.add_argument("--server", action="append", help="the Python whose tenure serves (repeatable)")
    ap.add_argument("--serve-arg", action="append", default=[],
                    help="--stalls: one more `tenure serve` argument (repeatable), e.g. --serve-arg=--capture-requests=0")
    ap.add_argument("--bytecode", choices=("cached", "env"), default="cached",
                    help="cached (the default): the servers load their modules' bytecode from a cache filled first, "
                         "as an installed tenure does; env: the environment as inherited (PYTHONDONTWRITEBYTECODE "
                         "with no cache compiles what a server imports on first use on its loop)")
    args = ap.parse_args()
    import kafka
    served = subprocess.run([sys.executable, "-c", "import tenure; print(tenure.__file__)"], capture_output=True,
                            text=True, cwd=tempfile.gettempdir()).stdout.strip()
    print(f"bench tree {tree_version()}; server: {served} (python {sys.executable}), "
          f"kafka-python {kafka.__version__}; bytecode {args.bytecode}; load {os.getloadavg()}")
    if args.stalls:
        stalls(args)
        return 0
    print("| server | request | elements | MiB | outcome | s | peak RSS growth MiB | per MiB of request | "
          "others p50 / p99 / max ms (calls) | load |")
    print("|---|---|---:|---:|---|---:|---:|---:|---|---:|")
    for name in SHAPES:
        if args.only and args.only not in name:
            continue
        for n in (int(args.mib * 2**20 / ELEMENT_BYTES[name]), args.elements - OUTER.get(name, 0)):
            frame = SHAPES[name](n)
            setup = (lambda h, p, f=SETUP[name]: f(h, p)) if name in SETUP else None
            for python in [os.path.abspath(p) for p in args.server or [sys.executable]]:
                r = dict(measure(python, [("", struct.pack(">i", len(frame)) + frame)], args.timeout,
                                 setup, bytecode=args.bytecode)[0], name=name, n=n)
                note = f" (their connections: {r['stuck']})" if r["stuck"] else ""
                print(f"| {_tree_of(python)} | {r['name']} | {r['n'] + OUTER.get(name, 0):,} | {r['mib']:.2f} | "
                      f"{r['outcome']} | {r['seconds']:.2f} | "
                      f"{r['growth_mib']:.0f} | {r['growth_mib'] / r['mib']:.0f} | "
                      f"{r['p50']:.0f} / {r['p99']:.0f} / {r['max']:.0f} ({r['calls']}){note} | {r['load']:.1f} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
