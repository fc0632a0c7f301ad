"""How long a KIP-848 consumer group takes to settle, by heartbeat interval (figures, never assertions).

A consumer-protocol member learns that it must give partitions up only at its next heartbeat, so the server's
heartbeat interval (`--consumer-heartbeat-interval-ms`, Kafka's group.consumer.heartbeat.interval.ms, 5000)
paces how fast a group that forms together converges. For each real client that speaks the protocol - Java
kafka-clients 4.3 (tests/java/GroupStart.java: N consumers on N threads of ONE JVM) and confluent-kafka
(librdkafka; one thread per member) - for each group size N and each interval H, N members of a new group
with `group.protocol=consumer` are started together on a topic of 12 partitions. The group is settled when
the server's group is Stable with the N members, every member holds its share (12/N, one more for some) as
both the client's callbacks and the server say, and no callback came for 1 s; the settle time runs from the
moment the server first has all N members (the last one joined: the clients' own start-up - a JVM loading
its classes takes 2-4 s - is left out) to the last callback before that quiet second. kafka-python 3 and aiokafka
0.14 do not speak the consumer protocol (no ConsumerGroupHeartbeat): they are not measured.

One in-process tenure server per interval; every group and topic is new. A run gets --budget-s to settle.

    .venv/bin/python bench/settle_time.py [--clients java,confluent] [--members 2,10]
        [--intervals 5000,2000,1000,500,250] [--repeat 1] [--budget-s 60]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchcommon import tree_version  # noqa: E402

from tests.support.consumer_groups import Tracker, holds_shares, start  # noqa: E402

PARTITIONS = 12
QUIET_S = 1.0


def measure(srv, client: str, n: int, interval: int, run: int, budget_s: float) -> dict:
    group = topic = f"{client}-n{n}-h{interval}-r{run}"
    srv.call(srv.server.topics.create, topic, PARTITIONS)
    tracker = Tracker(n)
    members = start(client, srv.bootstrap, group, topic, n, tracker)
    out = {"settled": False, "seconds": None, "epoch": None, "callbacks": 0, "errors": tracker.errors}
    joined: float | None = None          # when the server first had all N members
    try:
        deadline = time.monotonic() + budget_s
        while time.monotonic() < deadline and not tracker.errors:
            owned, last, count = tracker.view()
            if joined is None:
                v = srv.group(group)
                if v is not None and len(v.members) == n:
                    joined = time.time()
            if joined is not None and holds_shares(srv, group, n, owned, PARTITIONS):
                time.sleep(QUIET_S)
                owned2, last2, count2 = tracker.view()
                if count2 == count and owned2 == owned and holds_shares(srv, group, n, owned, PARTITIONS):
                    out.update(settled=True, seconds=max(0.0, last - joined),
                               epoch=srv.group(group).generation, callbacks=count)
                    break
            time.sleep(0.02)
    finally:
        members.stop()
    return out


def cell(r: dict) -> str:
    if not r["settled"]:
        return f">budget{' ' + r['errors'][0] if r['errors'] else ''}"
    return f"{r['seconds']:.1f}s e{r['epoch']}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="java,confluent")
    ap.add_argument("--members", default="2,10")
    ap.add_argument("--intervals", default="5000,2000,1000,500,250")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=60.0)
    args = ap.parse_args()
    from tenure.config import ServerConfig
    from tenure.server import ServerThread
    clients = args.clients.split(",")
    sizes = [int(x) for x in args.members.split(",")]
    intervals = [int(x) for x in args.intervals.split(",")]
    print(f"tenure {tree_version()}; {PARTITIONS} partitions, group.protocol=consumer, settled = Stable, every "
          f"member its share, no callback for {QUIET_S:g} s; {args.repeat} run(s) per combination", flush=True)
    results: dict[tuple[str, int, int], list[dict]] = {}
    for interval in intervals:
        with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=interval,
                                       initial_rebalance_delay_ms=0)) as srv:
            for run in range(args.repeat):
                for client in clients:
                    for n in sizes:
                        r = measure(srv, client, n, interval, run, args.budget_s)
                        results.setdefault((client, n, interval), []).append(r)
                        print(f"  heartbeat {interval:>5} ms  run {run}  {client:<10} N={n:<3} {cell(r)} "
                              f"({r['callbacks']} callbacks)", flush=True)
    print("\nsettle time from the last member joining to the last callback (eN: the group epoch then); "
          "'>budget': not settled in time")
    head = f"{'client':<10} {'N':>3} | " + " | ".join(f"{str(h) + ' ms':<14}" for h in intervals)
    print(head)
    print("-" * len(head))
    for client in clients:
        for n in sizes:
            print(f"{client:<10} {n:>3} | " + " | ".join(
                f"{' '.join(cell(r) for r in results[(client, n, h)]):<14}" for h in intervals))
    ok = [h for h in intervals if all(r["settled"] and not r["errors"]
                                      for c in clients for n in sizes for r in results[(c, n, h)])]
    print(f"intervals at which every run of every client settled: {', '.join(map(str, sorted(ok))) or 'none'}")


if __name__ == "__main__":
    main()
