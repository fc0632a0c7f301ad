"""How long a classic group takes to form, with and without `expect_group` (figures, never assertions).

For each real client - Java kafka-clients 4.3 (tests/java/GroupStart.java: N consumers on N threads of one JVM),
confluent-kafka, kafka-python and aiokafka (tests/support/groups.py's GroupMember, a thread each) - and each
group size N, the script starts N dynamic consumers of a new group on a topic of N partitions, in a loop as a
test starts them, and times from the first start until every member has been assigned and the assignments are
disjoint, balanced and cover every partition. Targets, one after another for each (client, N):

  expect   tenure with the group's expectation set to N first (POST /groups/G/expect): no initial delay
  tenure   tenure as it is by default (initial rebalance delay 1000 ms)
  mock     librdkafka's mock cluster (confluent-kafka `test.mock.num.brokers=1`, in this process): the peer;
           confluent-kafka only (its group coordinator is what is compared, so one client suffices); it has no
           controller to create topics, so its topic has the 4 partitions it auto-creates

For the tenure targets it also reads the generation the group formed in from the admin endpoint.
KIP-848 consumer groups (`group.protocol=consumer`, Java and confluent-kafka) with and without an expectation and
on the mock: bench/settle_time.py --targets tenure,expect,mock.
Members use session.timeout.ms=10000, heartbeat.interval.ms=1000, max.poll.interval.ms=30000.

    .venv/bin/python bench/expect_group.py [--clients java,confluent,kafka-python,aiokafka] [--members 2,10,50]
        [--targets expect,tenure,mock] [--repeat 1] [--budget-s 60]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchcommon import tree_version  # noqa: E402
from initial_delay import HEARTBEAT_MS, REBALANCE_MS, SESSION_MS, JavaGroup, PythonGroup  # noqa: E402  (its members)

POLL_S = 0.02


def formed(assignments: list[frozenset[int] | None], n: int, partitions: int) -> bool:
    """All n members assigned, disjointly, every partition owned, balanced (sizes differ by at most one)."""
    if len(assignments) != n or any(a is None for a in assignments):
        return False
    got = [a for a in assignments if a is not None]
    sizes = [len(a) for a in got]
    return sum(sizes) == partitions and frozenset().union(*got) == frozenset(range(partitions)) and \
        max(sizes) - min(sizes) <= 1


def create_topic(bootstrap: str, topic: str, n: int, mock: bool) -> int:
    """The topic's partition count: N on tenure (CreateTopics); on the mock, which has no controller to create
    topics, whatever it auto-creates on Metadata (4)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    if not mock:
        admin.create_topics([NewTopic(topic, n, 1)])[topic].result(30)
    return len(admin.list_topics(topic, timeout=15).topics[topic].partitions)


def admin_post(admin_url: str, path: str, body: dict) -> None:
    req = urllib.request.Request(admin_url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()


def generation(admin_url: str, group: str) -> int | None:
    with urllib.request.urlopen(f"{admin_url}/groups/{group}", timeout=10) as r:
        return json.loads(r.read())["generation"]


def measure(bootstrap: str, admin_url: str | None, target: str, client: str, n: int, run: int,
            budget_s: float) -> tuple[float | None, int | None]:
    group = topic = f"{target}-{client}-n{n}-r{run}"
    partitions = create_topic(bootstrap, topic, n, mock=target == "mock")
    if target == "expect":
        assert admin_url is not None
        admin_post(admin_url, f"/groups/{group}/expect", {"members": n})
    t0 = time.monotonic()
    members = JavaGroup(bootstrap, group, topic, n) if client == "java" else \
        PythonGroup(client, bootstrap, group, topic, n)
    took = gen = None
    try:
        while time.monotonic() < t0 + budget_s:
            if formed(members.assignments(), n, partitions):
                took = time.monotonic() - t0
                break
            time.sleep(POLL_S)
        if took is not None and admin_url is not None:
            gen = generation(admin_url, group)
    finally:
        members.stop()
    return took, gen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="java,confluent,kafka-python,aiokafka")
    ap.add_argument("--members", default="2,10,50")
    ap.add_argument("--targets", default="expect,tenure,mock")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=60.0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    clients, targets = args.clients.split(","), args.targets.split(",")
    sizes = [int(x) for x in args.members.split(",")]
    from tests.support.procs import TenureProcess

    print(f"tenure {tree_version()}; cpus {os.cpu_count()}; load average {os.getloadavg()}; members: session "
          f"{SESSION_MS} ms, heartbeat {HEARTBEAT_MS} ms, rebalance timeout {REBALANCE_MS} ms", flush=True)
    results: dict[tuple[str, str, int], list[tuple[float | None, int | None]]] = {}
    holder = mock_bootstrap = None
    if "mock" in targets:
        from confluent_kafka import Producer
        holder = Producer({"test.mock.num.brokers": 1, "log_level": 3})
        b = next(iter(holder.list_topics(timeout=10).brokers.values()))
        mock_bootstrap = f"{b.host}:{b.port}"
    with tempfile.TemporaryDirectory() as d:
        srv = TenureProcess(Path(d) / "data", extra=("--admin-port", "0"))
        srv.start()
        try:
            for run in range(args.repeat):
                for client in clients:
                    for n in sizes:
                        for target in targets:
                            if target == "mock":
                                if client != "confluent":
                                    continue
                                r = measure(mock_bootstrap, None, target, client, n, run, args.budget_s)
                            else:
                                r = measure(srv.bootstrap, srv.admin_url, target, client, n, run, args.budget_s)
                            results.setdefault((target, client, n), []).append(r)
                            took, gen = r
                            print(f"  run {run} {target:<6} {client:<13} N={n:<3} "
                                  + (f"{took * 1000:7.0f} ms" if took is not None else "  >budget")
                                  + (f"  generation {gen}" if gen is not None else ""), flush=True)
        finally:
            srv.terminate()
    print("\nmedian time to form (ms, first start -> every member assigned, all partitions owned); generations seen")
    head = f"{'client':<13} {'N':>3} | " + " | ".join(f"{t:<18}" for t in targets) + " | expect / tenure | expect / mock"
    print(head)
    print("-" * len(head))

    def med(key) -> float | None:
        took = [t for t, _ in results.get(key, []) if t is not None]
        return statistics.median(took) * 1000 if took and len(took) == len(results[key]) else None

    for client in clients:
        for n in sizes:
            cells = []
            for t in targets:
                rs = results.get((t, client, n), [])
                m = med((t, client, n))
                gens = ",".join(str(g) for _, g in rs if g is not None)
                cells.append("-" if not rs else (f"{m:6.0f}" if m is not None else ">budget") + (f" g{gens}" if gens else ""))
            e, w, k = med(("expect", client, n)), med(("tenure", client, n)), med(("mock", client, n))
            ratio = f"{e / w:.2f}x" if e and w else "-"
            ratio_mock = f"{e / k:.2f}x" if e and k else "-"
            print(f"{client:<13} {n:>3} | " + " | ".join(f"{c:<18}" for c in cells) + f" | {ratio:<15} | {ratio_mock}")
    del holder


if __name__ == "__main__":
    main()
