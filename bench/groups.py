"""Static-membership group benchmarks (figures, never assertions).

1. formation + rolling restart: N confluent-kafka (librdkafka) static members (group.instance.id)
   subscribe to one topic; we time start -> every member has its assignment, then restart each member
   in turn (close, new consumer with the same instance id) and time the whole rolling restart, counting
   the rebalances the OTHER members saw (assign/revoke callbacks). Run against tenure and against
   librdkafka's own mock cluster (`test.mock.num.brokers=1`) in the same script, same settings.
2. heartbeats: 1,000 static members in 100 groups (raw wire clients, one connection per group; a
   30-minute session so members set up first do not expire while the rest are set up) send
   Heartbeat v4 back to back for a fixed time; prints throughput and latency percentiles.

    .venv/bin/python bench/groups.py [--members 6,50] [--restart-budget-s 90] [--hb-seconds 10]

Both targets get session.timeout.ms=10000 and max.poll.interval.ms=10000 (the rebalance timeout), so a
member the coordinator waits for costs at most ~10 s. Each restart on a target is bounded
(--restart-timeout-s); a rolling restart stops when --restart-budget-s is spent, and the output says
how many members it got through.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PARTITIONS = 12
SESSION_MS = 1800000      # the broker's maximum: no member expires while the others are set up


def start_tenure(*extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--port", "0", "--log-level", "WARNING",
                             "--default-partitions", str(PARTITIONS), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.match(r"tenure listening on (\S+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"tenure did not start: {line!r}")
    return proc, m.group(1)


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, name: str, log: list):
        from confluent_kafka import Consumer
        self.name = name
        self.log = log
        self.assignment: list[int] | None = None
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": name,
                           "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                           "max.poll.interval.ms": 10000, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "log_level": 3})
        self.c.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer, parts):
        self.assignment = sorted(p.partition for p in parts)
        self.log.append(("assign", self.name, time.monotonic()))

    def _revoke(self, consumer, parts):
        self.log.append(("revoke", self.name, time.monotonic()))

    def poll(self):
        self.c.poll(0)

    def close(self):
        self.c.close()


def poll_until(members, cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if cond():
            return True
        time.sleep(0.005)
    return False


def formation_and_restart(bootstrap: str, n: int, restart_timeout: float, budget: float) -> dict:
    from confluent_kafka import Producer
    topic, group = f"bench-{n}", f"bench-group-{n}"
    p = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    p.produce(topic, b"x")   # auto-creates the topic through Metadata on both targets
    p.flush(10)
    log: list = []
    t0 = time.monotonic()
    members = [Member(bootstrap, group, topic, f"m{i}", log) for i in range(n)]

    def formed():
        return (all(m.assignment is not None for m in members)
                and sum(len(m.assignment) for m in members) >= min(PARTITIONS, 4))
    ok = poll_until(members, formed, 60)
    formation = time.monotonic() - t0
    # let the group settle: no assignment change for 2 s
    poll_until(members, lambda: False, 2)
    before = {m.name: m.assignment for m in members}
    restarted, restart_times, mismatched, others = 0, [], 0, 0
    log.clear()
    t1 = time.monotonic()
    for i in range(n):
        if time.monotonic() - t1 > budget:
            break
        old = members[i]
        old.close()
        ts = time.monotonic()
        new = Member(bootstrap, group, topic, old.name, log)
        members[i] = new
        if not poll_until(members, lambda: new.assignment is not None, restart_timeout):
            break
        poll_until(members, lambda: False, 0.3)   # callbacks a rebalance would cause elsewhere
        restart_times.append(time.monotonic() - ts)
        restarted += 1
        others += sum(1 for _, name, _ in log if name != old.name)
        log.clear()
        if new.assignment != before[old.name]:
            mismatched += 1
    rolling = time.monotonic() - t1
    for m in members:
        m.close()
    return {"formed": ok, "formation_s": formation, "restarted": restarted, "rolling_s": rolling,
            "per_restart_median_s": statistics.median(restart_times) if restart_times else float("nan"),
            "callbacks_on_others": others, "assignment_changed": mismatched}


async def heartbeat_bench(bootstrap: str, groups: int, per_group: int, seconds: float) -> dict:
    from kafka.protocol.consumer.group import (
        HeartbeatRequest, JoinGroupRequest, SyncGroupRequest,
    )
    from tests.support.wire import AsyncWireClient
    P = JoinGroupRequest.JoinGroupRequestProtocol

    async def one_group(g: int):
        gid = f"hb-{g}"
        conns = [await AsyncWireClient.connect(bootstrap) for _ in range(per_group)]

        def join(i: int, member_id: str = ""):
            return conns[i].call(JoinGroupRequest(
                group_id=gid, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=5000, member_id=member_id,
                group_instance_id=f"{gid}-i{i}", protocol_type="consumer",
                protocols=[P(name="range", metadata=b"")]), 5)
        # everyone joins at once; until one generation holds all of them, rejoin with the member ids
        # they were given (a known member's rejoin completes the rebalance as soon as all are in)
        ids = [""] * per_group
        while True:
            joins = await asyncio.gather(*(join(i, ids[i]) for i in range(per_group)))
            ids = [j.member_id or ids[i] for i, j in enumerate(joins)]
            if len({j.generation_id for j in joins}) == 1 and not any(j.error_code for j in joins):
                break
        gen = joins[0].generation_id
        await asyncio.gather(*(c.call(SyncGroupRequest(
            group_id=gid, generation_id=gen, member_id=j.member_id, group_instance_id=f"{gid}-i{i}",
            assignments=[]), 3) for i, (c, j) in enumerate(zip(conns, joins))))
        for c in conns[1:]:
            await c.close()
        return conns[0], [(j.member_id, f"{gid}-i{i}") for i, j in enumerate(joins)], gen, gid

    t_setup = time.monotonic()
    setups = [await one_group(g) for g in range(groups)]
    setup_s = time.monotonic() - t_setup
    lat: list[float] = []
    errors = 0
    codes: dict[int, int] = {}
    stop = time.monotonic() + seconds

    async def pump(conn, members, gen, gid):
        nonlocal errors
        i = 0
        while time.monotonic() < stop:
            mid, iid = members[i % len(members)]
            t = time.perf_counter()
            r = await conn.call(HeartbeatRequest(group_id=gid, generation_id=gen, member_id=mid,
                                                 group_instance_id=iid), 4)
            lat.append(time.perf_counter() - t)
            errors += r.error_code != 0
            codes[r.error_code] = codes.get(r.error_code, 0) + 1
            i += 1

    t0 = time.monotonic()
    await asyncio.gather(*(pump(*s) for s in setups))
    elapsed = time.monotonic() - t0
    for s in setups:
        await s[0].close()
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000
    return {"heartbeats": len(lat), "per_s": len(lat) / elapsed, "p50_ms": pct(0.5), "p99_ms": pct(0.99),
            "max_ms": lat[-1] * 1000, "errors": errors, "codes": codes, "setup_s": setup_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", default="6,50")
    ap.add_argument("--targets", default="tenure,mock")
    ap.add_argument("--restart-timeout-s", type=float, default=30)
    ap.add_argument("--restart-budget-s", type=float, default=90)
    ap.add_argument("--hb-groups", type=int, default=100)
    ap.add_argument("--hb-per-group", type=int, default=10)
    ap.add_argument("--hb-seconds", type=float, default=10)
    args = ap.parse_args()
    from confluent_kafka import Producer, version, libversion
    print(f"confluent-kafka {version()[0]}, librdkafka {libversion()[0]}, {os.cpu_count()} cpus")
    rows = []
    for n in [int(x) for x in args.members.split(",") if x.strip() and int(x) > 0]:
        for target in args.targets.split(","):
            proc = holder = None
            try:
                if target == "tenure":
                    proc, bs = start_tenure()
                else:
                    holder = Producer({"test.mock.num.brokers": 1, "log_level": 3})
                    b = next(iter(holder.list_topics(timeout=10).brokers.values()))
                    bs = f"{b.host}:{b.port}"
                r = formation_and_restart(bs, n, args.restart_timeout_s, args.restart_budget_s)
                rows.append((n, target, r))
                print(f"N={n:<3} {target:<7} formed={r['formed']} formation={r['formation_s']:.2f}s "
                      f"rolling restart: {r['restarted']}/{n} members in {r['rolling_s']:.2f}s "
                      f"(median {r['per_restart_median_s']:.2f}s each), callbacks on other members="
                      f"{r['callbacks_on_others']}, restarted members whose partitions changed="
                      f"{r['assignment_changed']}", flush=True)
            finally:
                if proc is not None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(15)
                del holder
    for n in sorted({r[0] for r in rows}):
        t = next((r for nn, tt, r in rows if nn == n and tt == "tenure"), None)
        m = next((r for nn, tt, r in rows if nn == n and tt == "mock"), None)
        if t and m and t["restarted"] and m["restarted"]:
            print(f"N={n}: formation ratio tenure/mock = {t['formation_s'] / m['formation_s']:.2f}; "
                  f"per-restart ratio tenure/mock = {t['per_restart_median_s'] / m['per_restart_median_s']:.2f}")
    if "tenure" in args.targets:
        # a short initial delay lets each group's ten concurrent first joins form one generation
        proc, bs = start_tenure("--initial-rebalance-delay-ms", "200")
        try:
            r = asyncio.run(heartbeat_bench(bs, args.hb_groups, args.hb_per_group, args.hb_seconds))
            print(f"heartbeats: {args.hb_groups * args.hb_per_group} static members in {args.hb_groups} groups, "
                  f"{r['heartbeats']} heartbeats in {args.hb_seconds:.0f}s = {r['per_s']:.0f}/s, "
                  f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, max {r['max_ms']:.1f} ms, "
                  f"errors {r['errors']} (by code {r['codes']}); groups formed in {r['setup_s']:.1f}s")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
    return 0


if __name__ == "__main__":
    sys.exit(main())
