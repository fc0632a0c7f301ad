"""KIP-333 catch-up consumer vs a plain consumer after a crash, on tenure.

For each lag L: a one-partition topic gets L records (100 B values), then the group's commit is left at 0
with the mark of an instance that crashed (what a killed CatchUpConsumer leaves). While fresh records
arrive at --rate per second (produced by this process; each value carries its produce time), a consumer
recovers as the same static member, in a child process of its own:
- catch-up: tenure.catchup.CatchUpConsumer with enable.parallel.rebalance=true,
- plain: the same class with the option off (a plain confluent-kafka Consumer),
and polls until the lag [0, L) is fully delivered and a fresh record has come. Measured in the child,
from the consumer's creation (the recovery): time to the first fresh record (produced after the recovery
began), time until every offset of the lag was delivered (the lag closed), and the child's CPU time
(user + sys: the Python loop and librdkafka's threads; the catch-up figure minus the plain one is what
the second consumer costs). The server is `tenure serve` in its own process. Modes alternate per lag.

    .venv/bin/python bench/catchup.py [--lags 10000,100000,1000000] [--rate 200] [--budget 300]

Prints figures only, never asserts timings. A lag is skipped (and said so) once the run has used
--budget seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchcommon import REPO, tree_version, wait_ready_line  # noqa: E402


def child(bootstrap: str, topic: str, group: str, lag: int, on: bool) -> None:
    from tenure.catchup import CatchUpConsumer
    t0 = time.time()
    c = CatchUpConsumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": "bench-1",
                         "enable.parallel.rebalance": on, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    c.subscribe([topic])
    seen = bytearray(lag)
    missing, first_fresh, closed, n, extra = lag, None, None, 0, 0
    deadline = time.monotonic() + 600
    while (missing or first_fresh is None) and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is None or m.error() is not None:
            continue
        n += 1
        o = m.offset()
        if o < lag:
            if not seen[o]:
                seen[o] = 1
                missing -= 1
                if not missing:
                    closed = time.time() - t0
        elif first_fresh is None and float(m.value()) >= t0:
            first_fresh = time.time() - t0
        else:
            extra += 1
    ru = resource.getrusage(resource.RUSAGE_SELF)
    alive = c.child_consumer_is_alive()
    c.close()
    print(json.dumps({"first_fresh_s": first_fresh, "lag_closed_s": closed, "delivered": n, "missing": missing,
                      "cpu_s": ru.ru_utime + ru.ru_stime, "secondary_used": alive}), flush=True)


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 500000})
    value = b"0" * 100
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def crashed_commit(bootstrap: str, topic: str, group: str) -> None:
    """The commit a crashed CatchUpConsumer leaves: offset 0, its running mark."""
    from confluent_kafka import Consumer, TopicPartition

    from tenure.catchup import ranges
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 0, metadata=ranges.marker(ranges.RUNNING, "bench-1"))],
             asynchronous=False)
    c.close()


class Fresh(threading.Thread):
    """Fresh records at `rate` per second, each value its produce time."""

    def __init__(self, bootstrap: str, topic: str, rate: float):
        super().__init__(daemon=True)
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.topic, self.rate, self.stop = topic, rate, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1 / self.rate):
            self.p.produce(self.topic, value=repr(time.time()).encode(), partition=0)
            self.p.poll(0)
        self.p.flush(30)


def run_one(bootstrap: str, lag: int, on: bool, rate: float, seq: int) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic
    topic, group = f"lag-{lag}-{'cu' if on else 'plain'}-{seq}", f"bench-{lag}-{seq}-{on}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(bootstrap, topic, lag)
    crashed_commit(bootstrap, topic, group)
    fresh = Fresh(bootstrap, topic, rate)
    fresh.start()
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", bootstrap, topic, group,
                              str(lag), "on" if on else "off"], capture_output=True, text=True, timeout=900,
                             cwd=str(REPO))
    finally:
        fresh.stop.set()
        fresh.join(30)
    if out.returncode != 0:
        raise SystemExit(f"child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lags", default="10000,100000,1000000")
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--child", nargs=5)
    a = ap.parse_args(argv)
    if a.child:
        bootstrap, topic, group, lag, mode = a.child
        child(bootstrap, topic, group, int(lag), mode == "on")
        return 0
    print(f"tree {tree_version()}, load average {os.getloadavg()[0]:.2f}, fresh records at {a.rate:g}/s")
    server = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--port", "0", "--log-level", "WARNING"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=str(REPO))
    started = time.monotonic()
    try:
        bootstrap, _ = wait_ready_line(server, 60)
        assert bootstrap, "tenure serve did not start"
        print(f"{'lag':>9} {'mode':>8} {'first fresh':>12} {'lag closed':>11} {'CPU':>7} {'delivered':>10}")
        for i, lag in enumerate(int(x) for x in a.lags.split(",")):
            if time.monotonic() - started > a.budget:
                print(f"{lag:>9} skipped: the run has used its {a.budget:g} s budget")
                continue
            rows = {}
            for on in ((True, False) if i % 2 == 0 else (False, True)):
                r = rows[on] = run_one(bootstrap, lag, on, a.rate, i)
                assert r["missing"] == 0 and r["first_fresh_s"] is not None, r
                assert r["secondary_used"] == on, r
                print(f"{lag:>9} {'catch-up' if on else 'plain':>8} {r['first_fresh_s']:>11.3f}s "
                      f"{r['lag_closed_s']:>10.3f}s {r['cpu_s']:>6.2f}s {r['delivered']:>10}", flush=True)
            cu, pl = rows[True], rows[False]
            print(f"{lag:>9}    ratio  first fresh {cu['first_fresh_s'] / pl['first_fresh_s']:.4f}  "
                  f"lag closed {cu['lag_closed_s'] / pl['lag_closed_s']:.2f}  CPU {cu['cpu_s'] / pl['cpu_s']:.2f} "
                  f"(second consumer + wrapper: {cu['cpu_s'] - pl['cpu_s']:+.2f} s)", flush=True)
    finally:
        server.terminate()
        server.wait(30)
    print(f"total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
