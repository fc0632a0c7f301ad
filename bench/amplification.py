"""Amplification: what one large request of small elements costs the server, and everyone else meanwhile.

For each API that amplified (issue 11, finding 4), one request of tiny elements is sent to a fresh
`tenure serve` (a subprocess of the Python running this script, so `/work/main/.venv/bin/python
bench/amplification.py` measures main's code), while 3 other connections keep doing small Metadata round
trips. Printed per request: the outcome (answered or connection closed) and how long it took, the
server's peak RSS growth (VmHWM, reset before the request) in MiB and per MiB of request, and the other
connections' round-trip p50/p99/max over the time the request was in the server.

Two sizes per API: `--mib` MiB of elements (default 2), and exactly `--elements` array elements in all
(default 100000, tenure's default --max-request-elements: the largest request it still answers). The last
shape repeats the id of an existing group whose one member has 20 KB of metadata and assignment: main
answers every copy (a 0.05 MiB request makes a 190 MiB answer), so run it there with small sizes
(`--only "20 KB" --mib 0.05 --elements 10000`).

    .venv/bin/python bench/amplification.py [--mib 2] [--elements 100000] [--timeout 240]

Bounded: 12 requests, each given at most --timeout seconds; the servers are killed at the end.
"""
from __future__ import annotations

import argparse
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchcommon import tree_version, wait_ready_line  # noqa: E402


def _header(api_key: int, version: int, cid: int = 1) -> bytes:
    return struct.pack(">hhih", api_key, version, cid, 5) + b"bench"


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


SETUP = {"DescribeGroups v0 (id of a group with a 20 KB member, repeated)": _big_group}
# array elements outside the repeated one (the one topic the partitions belong to)
OUTER = {"OffsetFetch v1 (partition indexes of one topic)": 1, "ListOffsets v1 (partitions of one topic)": 1}
ELEMENT_BYTES = {"DescribeGroups v0 (id of a group with a 20 KB member, repeated)": 5,
                 "DescribeGroups v0 (distinct 5-character ids)": 7,
                 "Metadata v1 (empty topic names)": 2, "DescribeGroups v0 (empty group ids)": 2,
                 "OffsetFetch v1 (partition indexes of one topic)": 4, "ListOffsets v1 (partitions of one topic)": 12}


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


def measure(name: str, n: int, timeout: float) -> dict:
    frame = SHAPES[name](n)
    proc = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--port", "0", "--max-frame-bytes",
                             str(len(frame) + 1024), "--no-auto-create-topics", "--log-level", "CRITICAL"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    try:
        bootstrap, _ = wait_ready_line(proc, 60)
        if bootstrap is None:
            raise RuntimeError("the server did not start")
        host, port = bootstrap.rsplit(":", 1)
        keep = SETUP[name](host, int(port)) if name in SETUP else None   # noqa: F841 (held open)
        others = [Bystander(host, int(port)) for _ in range(3)]
        for b in others:
            b.start()
        time.sleep(1.0)                                   # warm: every connection served a few times
        rss0 = _status(proc.pid, "VmRSS")
        peak_reset = _reset_peak(proc.pid)
        hwm0 = _status(proc.pid, "VmHWM") if peak_reset else rss0
        big = socket.create_connection((host, int(port)), timeout=timeout)
        t_send = time.perf_counter()
        big.sendall(struct.pack(">i", len(frame)) + frame)
        outcome = "timeout"
        try:
            size = _recv_exact(big, 4)
            if size is None:
                outcome = "closed"
            else:
                body = _recv_exact(big, struct.unpack(">i", size)[0])
                outcome = "closed" if body is None else f"answered ({len(body) / 2**20:.1f} MiB)"
        except (socket.timeout, ConnectionError) as exc:
            outcome = "closed" if isinstance(exc, ConnectionError) else "timeout"
        t_done = time.perf_counter()
        time.sleep(0.3)
        for b in others:
            b.stop.set()
        for b in others:
            b.join(timeout + 5)
        hwm1 = _status(proc.pid, "VmHWM")
        lat = [(e - s) * 1000 for b in others for s, e in b.calls if s < t_done and e > t_send]
        stuck = [b.failed for b in others if b.failed]
        return {"name": name, "n": n, "mib": len(frame) / 2**20, "outcome": outcome, "seconds": t_done - t_send,
                "growth_mib": max(0, hwm1 - hwm0) / 2**20, "p50": _percentile(lat, 0.5), "p99": _percentile(lat, 0.99),
                "max": max(lat) if lat else float("nan"), "calls": len(lat), "stuck": stuck,
                "peak_reset": peak_reset}
    finally:
        proc.kill()
        proc.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=2.0)
    ap.add_argument("--elements", type=int, default=100_000)
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--only", default=None, help="run the APIs whose name contains this")
    args = ap.parse_args()
    import kafka
    served = subprocess.run([sys.executable, "-c", "import tenure; print(tenure.__file__)"], capture_output=True,
                            text=True, cwd=tempfile.gettempdir()).stdout.strip()
    print(f"bench tree {tree_version()}; server: {served} (python {sys.executable}), "
          f"kafka-python {kafka.__version__}")
    print("| request | elements | MiB | outcome | s | peak RSS growth MiB | per MiB of request | "
          "others p50 / p99 / max ms (calls) |")
    print("|---|---:|---:|---|---:|---:|---:|---|")
    for name in SHAPES:
        if args.only and args.only not in name:
            continue
        for n in (int(args.mib * 2**20 / ELEMENT_BYTES[name]), args.elements - OUTER.get(name, 0)):
            r = measure(name, n, args.timeout)
            note = f" (their connections: {r['stuck']})" if r["stuck"] else ""
            print(f"| {r['name']} | {r['n'] + OUTER.get(name, 0):,} | {r['mib']:.2f} | {r['outcome']} | "
                  f"{r['seconds']:.2f} | "
                  f"{r['growth_mib']:.0f} | {r['growth_mib'] / r['mib']:.0f} | "
                  f"{r['p50']:.0f} / {r['p99']:.0f} / {r['max']:.0f} ({r['calls']}){note} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
