"""Share-consume throughput (KIP-932) on one partition with 1, 4 and 16 share consumers: tenure against
librdkafka's mock cluster, with the same confluent-kafka ShareConsumer in the same run (figures, never
assertions).

Per target and consumer count: N ShareConsumers (implicit acknowledgement: a poll's records are accepted by
the next poll) subscribe to a new one-partition topic and are warmed up (one record consumed), then R records
are produced and the clock runs until every one of them has been delivered. The warm-up lasts until every
consumer has received a record, or 3 s after the first did. Printed: records/s over that
window, how the records spread over the consumers, redeliveries (a record delivered twice), and the p50/p99
delivery latency (a record's consume time minus its produce timestamp, which includes the acknowledgement
of the poll before it). First, the share coordinator's replay time per in-flight record.

    .venv/bin/python bench/share_consume.py [--records 20000] [--consumers 1,4,16] [--targets tenure,mock]
                                            [--explicit]

With --explicit each poll's records are acknowledged (accept) and sent with commit_sync, whose round trip is the
acknowledgement latency printed (p50/p99).

tenure runs as `tenure serve` in its own process (--share-heartbeat-interval-ms 200); the mock runs inside
this process (librdkafka's `test.mock.num.brokers=1`).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.benchcommon import tree_version, wait_ready_line  # noqa: E402

TIMEOUT_S = 90


class Sharer(threading.Thread):
    def __init__(self, bootstrap: str, group: str, topic: str, name: str, explicit: bool = False) -> None:
        super().__init__(daemon=True, name=name)
        from confluent_kafka import ShareConsumer
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, "log_level": 3}
        if explicit:
            conf["share.acknowledgement.mode"] = "explicit"
        self.c = ShareConsumer(conf)
        self.c.subscribe([topic])
        self.explicit = explicit
        self.got: list[tuple[int, float]] = []        # (offset, latency s)
        self.acks: list[float] = []                   # explicit: each commit_sync's round trip (s)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            msgs = self.c.poll(0.1)
            for m in msgs:
                if m.error() is None:
                    now = time.time()
                    self.got.append((m.offset(), now - m.timestamp()[1] / 1000.0))
                    if self.explicit:
                        self.c.acknowledge(m)
            if self.explicit and len(msgs):
                t0 = time.perf_counter()
                self.c.commit_sync()
                self.acks.append(time.perf_counter() - t0)

    def close(self) -> None:
        self.stop.set()
        self.join(10)
        self.c.close()


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 100, "log_level": 3})
    for i in range(start, start + n):
        p.produce(topic, value=b"x" * 100, key=str(i).encode(), partition=0)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(30)


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)


def run(bootstrap: str, label: str, consumers: int, records: int, explicit: bool = False) -> dict:
    topic, group = f"sq-{label}-{consumers}-{time.monotonic_ns()}", f"g-{label}-{consumers}-{time.monotonic_ns()}"
    if label == "mock":                   # the mock creates a topic on first use (one partition)
        produce(bootstrap, topic, 0)
        from confluent_kafka import Producer
        Producer({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(topic, timeout=10)
    else:
        create_topic(bootstrap, topic)
    sharers = [Sharer(bootstrap, group, topic, f"c{i}", explicit) for i in range(consumers)]
    for s in sharers:
        s.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        warm = 0
        settle = None                  # warm-up: until every consumer received, or 3 s after the first did
        while time.monotonic() < deadline and not all(s.got for s in sharers) and (
                settle is None or time.monotonic() < settle):
            produce(bootstrap, topic, consumers)
            warm += consumers
            time.sleep(0.3)
            if settle is None and any(s.got for s in sharers):
                settle = time.monotonic() + 3
        deadline = time.monotonic() + TIMEOUT_S
        base = {id(s): len(s.got) for s in sharers}
        t0 = time.monotonic()
        produce(bootstrap, topic, records, warm)
        wanted = set(range(warm, warm + records))

        def delivered() -> set[int]:
            return {o for s in sharers for o, _ in s.got[base[id(s)]:]}
        while time.monotonic() < deadline and not wanted <= delivered():
            time.sleep(0.02)
        seconds = time.monotonic() - t0
        got = [(o, lat) for s in sharers for o, lat in s.got[base[id(s)]:] if o in wanted]
        lat = sorted(x for _, x in got)
        per = sorted((sum(1 for o, _ in s.got[base[id(s)]:] if o in wanted) for s in sharers), reverse=True)
        acks = sorted(a for s in sharers for a in s.acks)
        return {"ack_p50": statistics.median(acks) * 1000 if acks else float("nan"),
                "ack_p99": acks[max(int(len(acks) * 0.99) - 1, 0)] * 1000 if acks else float("nan"),"rate": len({o for o, _ in got}) / seconds, "seconds": seconds, "complete": wanted <= delivered(),
                "redelivered": len(got) - len({o for o, _ in got}), "per": per,
                "p50": statistics.median(lat) * 1000 if lat else float("nan"),
                "p99": lat[int(len(lat) * 0.99) - 1] * 1000 if lat else float("nan")}
    finally:
        for s in sharers:
            s.close()


def replay_figure(partitions: int = 50, in_flight: int = 2000) -> str:
    """The share coordinator's load: decoding and replaying one snapshot and one update naming every record (the
    loader replays every record after the latest snapshots, in log order) of `partitions` share partitions, each with `in_flight` records in flight, alternating in
    state so that every record is its own state batch (the worst case)."""
    import uuid

    from tenure.coordinator.share_state import ShareStateShard
    from tenure.protocol import share_state_records as ssr
    batches = tuple((o, o, 0 if o % 2 else 2, 1 + o % 5) for o in range(in_flight))
    raw = []
    for p in range(partitions):
        for snapshot in (True, False):
            raw.append(ssr.encode(ssr.ShareStateRecord("g", uuid.UUID(int=p), p, snapshot, 0, 0, 0, 0, batches)))
    shard = ShareStateShard()
    t0 = time.perf_counter()
    for k, v in raw:
        shard.replay(ssr.decode(k, v))
    seconds = time.perf_counter() - t0
    n = partitions * in_flight
    return (f"replay: {len(raw)} records ({n:,} in-flight records, one batch each, twice) in {seconds * 1000:.0f} ms "
            f"= {seconds / (2 * n) * 1e6:.2f} us per in-flight record per record read")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--consumers", default="1,4,16")
    ap.add_argument("--targets", default="tenure,mock")
    ap.add_argument("--explicit", action="store_true",
                    help="explicit acknowledgement: each poll's records accepted by commit_sync, whose round trip "
                         "is measured (p50/p99)")
    args = ap.parse_args()
    counts = [int(x) for x in args.consumers.split(",")]
    print(f"share_consume: {args.records:,} records of 100 B, consumers {counts}; python {sys.version.split()[0]}, "
          f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}; tree {tree_version()}", flush=True)
    print(replay_figure(), flush=True)
    server = holder = None
    try:
        for target in args.targets.split(","):
            if target == "tenure":
                server = subprocess.Popen([str(REPO / ".venv/bin/tenure"), "serve", "--port", "0", "--no-admin",
                                           "--share-heartbeat-interval-ms", "200"],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                bootstrap, _ = wait_ready_line(server, 30)
                assert bootstrap, "tenure did not start"
            else:
                from confluent_kafka import Producer
                holder = Producer({"test.mock.num.brokers": 1, "log_level": 3})
                b = next(iter(holder.list_topics(timeout=10).brokers.values()))
                bootstrap = f"{b.host}:{b.port}"
            for n in counts:
                try:
                    r = run(bootstrap, target, n, args.records, args.explicit)
                except Exception as exc:       # a target that does not serve share groups says so
                    print(f"{target:<7} {n:>2} consumer(s): failed: {type(exc).__name__}: {exc}", flush=True)
                    continue
                print(f"{target:<7} {n:>2} consumer(s): {r['rate']:>9,.0f} rec/s ({r['seconds']:.2f} s"
                      f"{'' if r['complete'] else ', INCOMPLETE'}), redelivered {r['redelivered']}, "
                      f"latency p50 {r['p50']:.0f} ms p99 {r['p99']:.0f} ms, "
                      + (f"commit_sync p50 {r['ack_p50']:.1f} ms p99 {r['ack_p99']:.1f} ms, " if args.explicit else "")
                      + f"per consumer {r['per']}", flush=True)
            if server is not None:
                server.terminate()
                server.wait(10)
                server = None
    finally:
        if server is not None:
            server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
