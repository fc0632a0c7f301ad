"""Limits: what half-sent requests and stalled connections cost a `tenure serve` process.

1. partial    --conns connections each send the 4-byte length of a 60 MiB request and then --mib MiB of
              it, and stall. Run twice: with `--max-buffered-request-bytes` at --budget-mib, and with it
              out of the way (1 TiB: what every tenure before the budget did). Printed: the growth of the
              server's peak RSS (VmHWM, /proc/PID/status) over its figure just before, the connections
              the server closed, and the growth per MiB sent.
2. idle       --stalled connections connect and send nothing (half of them a request's first bytes);
              the server runs with `--connections-max-idle-ms` --idle-ms. Printed: how many the server
              closed, and when the last one went (from the moment all were open).

    .venv/bin/python bench/limits.py [--conns 8] [--mib 16] [--budget-mib 24] [--stalled 300] [--idle-ms 500]

Linux only (/proc). Everything on 127.0.0.1, bounded by the arguments.
"""
from __future__ import annotations

import argparse
import selectors
import socket
import struct
import subprocess
import sys
import time

from benchcommon import REPO, tree_version, wait_ready_line

MiB = 1 << 20


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def serve(*flags: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--port", "0", "--log-level", "WARNING",
                             *flags], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    where, _ = wait_ready_line(proc, 60)
    if where is None:
        proc.kill()
        raise SystemExit("tenure serve did not start")
    return proc, int(where.rsplit(":", 1)[1])


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def partial(conns: int, mib: int, budget: int) -> tuple[float, int]:
    """(peak RSS growth in MiB, connections closed by the server)."""
    proc, port = serve("--max-frame-bytes", str(64 * MiB), "--max-buffered-request-bytes", str(budget))
    try:
        before = peak_rss_kib(proc.pid)
        chunk, socks, closed = b"\0" * MiB, [], 0
        for _ in range(conns):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            socks.append(s)
            try:
                s.sendall(struct.pack(">i", 60 * MiB))
                for _ in range(mib):
                    s.sendall(chunk)
            except OSError:
                closed += 1
        time.sleep(1.0)
        growth = (peak_rss_kib(proc.pid) - before) / 1024
        for s in socks:
            s.close()
        return growth, closed
    finally:
        stop(proc)


def idle(stalled: int, idle_ms: int) -> tuple[int, float]:
    """(connections the server closed within idle_ms + 10 s, seconds until the last one went)."""
    proc, port = serve("--connections-max-idle-ms", str(idle_ms))
    sel = selectors.DefaultSelector()
    try:
        for i in range(stalled):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(struct.pack(">i", 100) + b"\0" * 10)       # a request that never finishes
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        t0, closed, last = time.monotonic(), 0, 0.0
        deadline = t0 + idle_ms / 1000 + 10
        while closed < stalled and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.1):
                try:
                    data = key.fileobj.recv(1)
                except ConnectionError:
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
                    closed += 1
                    last = time.monotonic() - t0
        return closed, last
    finally:
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        stop(proc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--conns", type=int, default=8)
    p.add_argument("--mib", type=int, default=16, help="MiB each connection sends of its 60 MiB request")
    p.add_argument("--budget-mib", type=int, default=24)
    p.add_argument("--stalled", type=int, default=300)
    p.add_argument("--idle-ms", type=int, default=500)
    a = p.parse_args(argv)
    print(f"tree {tree_version()}; python {sys.version.split()[0]}")
    sent = a.conns * a.mib
    for label, budget in ((f"budget {a.budget_mib} MiB", a.budget_mib * MiB), ("no budget (1 TiB)", 1 << 40)):
        growth, closed = partial(a.conns, a.mib, budget)
        print(f"partial requests, {label}: {a.conns} connections x {a.mib} MiB = {sent} MiB sent; peak RSS "
              f"+{growth:.0f} MiB ({growth / sent:.2f} MiB per MiB sent); {closed} connection(s) closed by the server")
    closed, last = idle(a.stalled, a.idle_ms)
    print(f"idle: {closed}/{a.stalled} stalled connections closed by the server (connections.max.idle.ms "
          f"{a.idle_ms}); the last {last:.2f}s after all were open")
    return 0


if __name__ == "__main__":
    sys.exit(main())
