"""Rolling restart of N static members on tenure: the classic protocol vs the KIP-848 consumer protocol
(figures, never assertions).

N confluent-kafka (librdkafka) consumers with group.instance.id subscribe to one topic of 12 partitions,
once as a classic group (group.protocol=classic) and once as a consumer group (group.protocol=consumer), on
the same in-process tenure server. Each member in turn is closed and replaced by a new consumer with the
same instance id; one restart lasts from the close until the group is settled again: the server's group
Stable with N members, every partition held exactly once by the clients, each client's partitions the
server's. Printed per protocol: formation time, the rolling restart's total and median per member, and
the rebalances it caused (classic: generation steps; consumer: group epoch steps), and the partitions any
member revoked during the rolling restart.

    .venv/bin/python bench/consumer_protocol.py [--members 10,50] [--heartbeat-ms 300]

Client settings: classic members session.timeout.ms=10000, heartbeat.interval.ms=300; consumer members
take the server's heartbeat interval (--heartbeat-ms, the server's --consumer-heartbeat-interval-ms).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PARTITIONS = 12


class Member:
    def __init__(self, bootstrap: str, group: str, protocol: str, instance: str) -> None:
        self.instance = instance
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                     "group.instance.id": instance, "client.id": instance, "enable.auto.commit": False}
        if protocol == "classic":
            self.conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
                              "partition.assignment.strategy": "range"})
        self.incremental = protocol == "consumer"
        self.owned: set[int] = set()
        self.revoked = 0
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_assign(self, _c, parts) -> None:
        with self.lock:
            got = {p.partition for p in parts}
            self.owned = self.owned | got if self.incremental else got

    def on_revoke(self, _c, parts) -> None:
        with self.lock:
            gone = {p.partition for p in parts}
            self.revoked += len(gone)
            self.owned = self.owned - gone if self.incremental else set()

    def run(self) -> None:
        from confluent_kafka import Consumer
        c = Consumer(self.conf)
        c.subscribe(["t"], on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_revoke)
        while not self.stop_flag.is_set():
            c.poll(0.05)
        c.close()

    def start(self) -> Member:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(60)


def settled(server, group: str, members: list[Member], timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = server.group(group)
        if v is not None and v.state == "Stable" and len(v.members) == len(members):
            with_lock = []
            for m in members:
                with m.lock:
                    with_lock.append((m.instance, sorted(m.owned)))
            mine = dict(with_lock)
            if sorted(p for ps in mine.values() for p in ps) == list(range(PARTITIONS)):
                served = {k: (a or {}).get("t", []) for k, a in v.assignments.items()}
                if served == mine:
                    return v.generation
        time.sleep(0.02)
    raise RuntimeError(f"group {group} did not settle within {timeout}s: {server.group(group)}")


def run(server, protocol: str, n: int) -> dict:
    group = f"{protocol}-{n}"
    t0 = time.monotonic()
    members = [Member(server.bootstrap, group, protocol, f"{group}-i{k}").start() for k in range(n)]
    first = settled(server, group, members)
    formed = time.monotonic() - t0
    times = []
    revoked = 0          # partitions the members NOT being restarted revoked while another one restarted
    for k in range(n):
        others = {j: members[j].revoked for j in range(n) if j != k}
        t = time.monotonic()
        members[k].stop()
        members[k] = Member(server.bootstrap, group, protocol, members[k].instance).start()
        settled(server, group, members)
        times.append(time.monotonic() - t)
        revoked += sum(members[j].revoked - r for j, r in others.items())
    time.sleep(2)                                        # anything late still counts
    last = settled(server, group, members)
    for m in members:
        m.stop()
    return {"formed_s": formed, "restart_total_s": sum(times), "restart_median_s": statistics.median(times),
            "rebalances": last - first, "revoked_elsewhere": revoked}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", default="10", help="comma-separated group sizes (default 10)")
    ap.add_argument("--heartbeat-ms", type=int, default=300)
    args = ap.parse_args(argv)
    from tenure.config import ServerConfig
    from tenure.server import ServerThread
    config = ServerConfig(port=0, consumer_heartbeat_interval_ms=args.heartbeat_ms, min_session_timeout_ms=1000)
    with ServerThread(config) as server:
        server.call(lambda: server.server.topics.create("t", PARTITIONS))
        print(f"rolling restart of N static confluent-kafka members, {PARTITIONS} partitions, one tenure server "
              f"(consumer heartbeat interval {args.heartbeat_ms} ms)")
        print(f"{'N':>4} {'protocol':>9} {'formed s':>9} {'restart total s':>16} {'per member s':>13} "
              f"{'rebalances':>11} {'revoked':>8}")
        for n in (int(x) for x in args.members.split(",")):
            rows = {p: run(server, p, n) for p in ("classic", "consumer")}
            for p, r in rows.items():
                print(f"{n:>4} {p:>9} {r['formed_s']:>9.2f} {r['restart_total_s']:>16.2f} "
                      f"{r['restart_median_s']:>13.3f} {r['rebalances']:>11} {r['revoked_elsewhere']:>8}")
            ratio = rows["consumer"]["restart_total_s"] / rows["classic"]["restart_total_s"]
            print(f"{n:>4} consumer/classic rolling-restart time: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
