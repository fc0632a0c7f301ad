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

Targets (`--targets`), one after another for each (client, N):

  tenure   tenure as it is: every member that joins bumps the group epoch and the target is computed again
  expect   tenure with `expect_group(G, N)` set first: the target is computed once, when the N-th member joined
  mock     librdkafka's mock cluster (confluent-kafka `test.mock.num.brokers=1`, in this process; confluent-kafka
           only): the peer. It cannot create topics, so its topic has the 4 partitions it auto-creates, and the
           server side (the group's state, when all N joined) is not seen: it is settled by the callbacks alone

Each run prints two times: from the first member's start to the last callback before the quiet second (`start`,
what a test waits; it includes the clients' start-up) and, on tenure, from the moment the server had all N
members (`settle`); the revoke callbacks that took partitions away (`rev`) and the group epoch then (`eN`).

One in-process tenure server per interval (initial rebalance delay 1000 ms, the default, which bounds an
expectation that is not met); every group and topic is new. A run gets --budget-s to settle.

    .venv/bin/python bench/settle_time.py [--clients java,confluent] [--members 2,10]
        [--intervals 5000,2000,1000,500,250] [--targets tenure,expect,mock] [--repeat 1] [--budget-s 60]
"""
from __future__ import annotations

import argparse
import os
import statistics
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


def _mock_partitions(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    return len(admin.list_topics(topic, timeout=15).topics[topic].partitions)     # auto-created


def measure(srv, mock: str | None, target: str, client: str, n: int, interval: int, run: int,
            budget_s: float) -> dict:
    """One group of n members of `client` on `target` (srv: the tenure ServerThread; mock: the mock's bootstrap)."""
    group = topic = f"{target}-{client}-n{n}-h{interval}-r{run}"
    on_tenure = target != "mock"
    if on_tenure:
        srv.call(srv.server.topics.create, topic, PARTITIONS)
        partitions, bootstrap = PARTITIONS, srv.bootstrap
        if target == "expect":
            srv.expect_group(group, n)
    else:
        assert mock is not None
        partitions, bootstrap = _mock_partitions(mock, topic), mock
    tracker = Tracker(n)
    t0 = time.time()
    members = start(client, bootstrap, group, topic, n, tracker)
    out = {"settled": False, "start": None, "seconds": None, "epoch": None, "callbacks": 0, "revocations": 0,
           "errors": tracker.errors}
    joined: float | None = None          # when the server first had all N members

    def holds(owned) -> bool:
        if on_tenure:
            return holds_shares(srv, group, n, owned, partitions)
        share = partitions // n
        return sorted(p for o in owned for p in o) == list(range(partitions)) and \
            all(len(o) in (share, share + 1) for o in owned)

    try:
        deadline = time.monotonic() + budget_s
        while time.monotonic() < deadline and not tracker.errors:
            owned, last, count = tracker.view()
            if joined is None and on_tenure:
                v = srv.group(group)
                if v is not None and len(v.members) == n:
                    joined = time.time()
            if (joined is not None or not on_tenure) and holds(owned):
                time.sleep(QUIET_S)
                owned2, last2, count2 = tracker.view()
                if count2 == count and owned2 == owned and holds(owned):
                    out.update(settled=True, start=last - t0, callbacks=count,
                               revocations=len(tracker.revocations()))
                    if on_tenure:
                        assert joined is not None
                        out.update(seconds=max(0.0, last - joined), epoch=srv.group(group).generation)
                    break
            time.sleep(0.02)
    finally:
        members.stop()
    return out


def cell(r: dict) -> str:
    if not r["settled"]:
        return f">budget{' ' + r['errors'][0] if r['errors'] else ''}"
    settle = f" settle {r['seconds']:.1f}s e{r['epoch']}" if r["seconds"] is not None else ""
    return f"start {r['start']:.1f}s{settle} rev {r['revocations']}"


def _median(rs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rs if r["settled"] and r[key] is not None]
    return statistics.median(vals) if vals and len(vals) == len(rs) else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="java,confluent")
    ap.add_argument("--members", default="2,10")
    ap.add_argument("--intervals", default="5000,2000,1000,500,250")
    ap.add_argument("--targets", default="tenure")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=60.0)
    args = ap.parse_args()
    from tenure.config import ServerConfig
    from tenure.server import ServerThread
    clients, targets = args.clients.split(","), args.targets.split(",")
    sizes = [int(x) for x in args.members.split(",")]
    intervals = [int(x) for x in args.intervals.split(",")]
    print(f"tenure {tree_version()}; cpus {os.cpu_count()}; load average {os.getloadavg()}; {PARTITIONS} "
          f"partitions, group.protocol=consumer, settled = every member its share (and on tenure the group Stable), "
          f"no callback for {QUIET_S:g} s; {args.repeat} run(s) per combination", flush=True)
    holder = mock = None
    if "mock" in targets:
        from confluent_kafka import Producer
        holder = Producer({"test.mock.num.brokers": 1, "log_level": 3})
        b = next(iter(holder.list_topics(timeout=10).brokers.values()))
        mock = f"{b.host}:{b.port}"
    results: dict[tuple[str, str, int, int], list[dict]] = {}
    for interval in intervals:
        with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=interval)) as srv:
            for run in range(args.repeat):
                for client in clients:
                    for n in sizes:
                        for target in targets:
                            if target == "mock" and client != "confluent":
                                continue
                            r = measure(srv, mock, target, client, n, interval, run, args.budget_s)
                            results.setdefault((target, client, n, interval), []).append(r)
                            print(f"  heartbeat {interval:>5} ms  run {run}  {target:<6} {client:<10} N={n:<3} "
                                  f"{cell(r)} ({r['callbacks']} callbacks; load {os.getloadavg()[0]:.2f})",
                                  flush=True)
    print("\nmedian over the runs: start = first member started -> last callback; settle = the server had all N "
          "-> last callback (tenure only); rev = revoke callbacks that took partitions away; eN = the group epoch; "
          "'>budget': not settled in time")
    for interval in intervals:
        print(f"\nheartbeat interval {interval} ms (the mock uses its own)")
        head = f"{'client':<10} {'N':>3} | " + " | ".join(f"{t:<26}" for t in targets) + \
            " | expect/tenure start, settle | expect/mock start"
        print(head)
        print("-" * len(head))
        for client in clients:
            for n in sizes:
                cells = []
                for t in targets:
                    rs = results.get((t, client, n, interval), [])
                    cells.append(" / ".join(cell(r) for r in rs) if rs else "-")
                def m(t: str, key: str, client=client, n=n, interval=interval) -> float | None:
                    return _median(results.get((t, client, n, interval), []), key)
                ratios = []
                for a, b, key in (("expect", "tenure", "start"), ("expect", "tenure", "seconds"),
                                  ("expect", "mock", "start")):
                    x, y = m(a, key), m(b, key)
                    ratios.append(f"{x / y:.2f}x" if x is not None and y else "-")
                print(f"{client:<10} {n:>3} | " + " | ".join(f"{c:<26}" for c in cells)
                      + f" | {ratios[0]}, {ratios[1]:<18} | {ratios[2]}")
    ok = [h for h in intervals if all(r["settled"] and not r["errors"] for (_, _, _, hh), rs in results.items()
                                      if hh == h for r in rs)]
    print(f"intervals at which every run of every client settled: {', '.join(map(str, sorted(ok))) or 'none'}")
    del holder


if __name__ == "__main__":
    main()
