"""How many generations does a group need to form, by initial rebalance delay (figures, never assertions).

For each real client - Java kafka-clients 4.3 (tests/java/GroupStart.java: N consumers on N threads of
ONE JVM, started in a loop), confluent-kafka, kafka-python and aiokafka (tests/support/groups.py's
GroupMember, one thread per member, started in a loop as the integration tests do) - for each group
size N and each `--initial-rebalance-delay-ms` D, the script starts N dynamic consumers of one new group
on one topic of N partitions and reads the group through tenure's admin endpoint until it is Stable with
all N members. Per run it prints G/J: G the generation at that moment (1 = the group formed in one
generation) and J how many of those rebalances members joining caused (the admin endpoint's rebalance
causes; J = 1: the delay took every member into the first generation, which is what the delay decides -
other causes, such as kafka-python's leader rejoining on its own, are the client's), the time from the
first member's start, and whether another rebalance began within a further --settle-s. It ends with the
smallest delay at which every run had G = 1, and the smallest at which every run had J = 1. One tenure
process per delay; every group and topic is new.

--repeat R runs each combination R times (each with a new group). A combination gets --budget-s to form
(N=50 gets --budget-50-s); one that does not form in time is printed as `>budget` with the generation and
member count reached, and the script moves on.

    .venv/bin/python bench/initial_delay.py [--clients java,confluent,kafka-python,aiokafka]
        [--members 2,10,50] [--delays 0,100,300,500,1000,3000] [--repeat 1] [--budget-s 60] [--budget-50-s 120]

Members use session.timeout.ms=10000, heartbeat.interval.ms=1000 and max.poll.interval.ms (the
rebalance timeout) 30000, so a member the coordinator waits for costs at most 30 s.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchcommon import tree_version  # noqa: E402

SESSION_MS, HEARTBEAT_MS, REBALANCE_MS = 10000, 1000, 30000
POLL_S = 0.05


class JavaGroup:
    """N Java consumers in one JVM (tests/java/GroupStart.java); closing stdin closes them. Their assignments are
    read from GroupStart's JSON lines (`assignments()`, bench/expect_group.py)."""

    def __init__(self, bootstrap: str, group: str, topic: str, n: int) -> None:
        from tests.support.java import _tool, compile_java
        self.assignment: dict[int, frozenset[int]] = {}
        self.proc = subprocess.Popen(
            [_tool("java"), "-cp", compile_java(), "GroupStart", bootstrap, group, topic, str(n),
             f"session.timeout.ms={SESSION_MS}", f"heartbeat.interval.ms={HEARTBEAT_MS}",
             f"max.poll.interval.ms={REBALANCE_MS}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("type") == "assigned":
                self.assignment[ev["member"]] = frozenset(ev["partitions"])

    def assignments(self) -> list[frozenset[int] | None]:
        """Each member's partitions after its latest assignment (members not assigned yet are not listed)."""
        return list(self.assignment.values())

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class PythonGroup:
    """N members of one Python client library, each on its own thread, started in a loop."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, n: int) -> None:
        from tests.support.groups import GroupMember
        self.members = [GroupMember(client, bootstrap, group, topic, name=f"{client}-{i}",
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                                    rebalance_timeout_ms=REBALANCE_MS).start() for i in range(n)]

    def assignments(self) -> list[frozenset[int] | None]:
        """Each member's partitions after its latest callback; None until its latest callback is an assignment."""
        out: list[frozenset[int] | None] = []
        for m in self.members:
            events = m.events_copy()
            out.append(events[-1][1] if events and events[-1][0] == "assign" else None)
        return out

    def stop(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(len(self.members)) as ex:     # all close at once
            list(ex.map(lambda m: m.stop(60), self.members))


def read_group(admin_url: str, group: str) -> dict | None:
    """The group's view from the admin endpoint (None before the group exists)."""
    try:
        with urllib.request.urlopen(f"{admin_url}/groups/{group}", timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def measure(srv, client: str, n: int, delay: int, run: int, budget_s: float, settle_s: float) -> dict:
    from tests.support.wire import WireClient, create_topic
    group = topic = f"{client}-n{n}-d{delay}-r{run}"
    w = WireClient.to(srv.bootstrap)
    try:
        create_topic(w, topic, partitions=n)
    finally:
        w.sock.close()
    admin_url = srv.admin_url
    t0 = time.monotonic()
    members = JavaGroup(srv.bootstrap, group, topic, n) if client == "java" else \
        PythonGroup(client, srv.bootstrap, group, topic, n)
    out = {"formed": False, "generation": None, "seconds": None, "settled": None, "members": 0, "causes": {}}
    try:
        deadline = t0 + budget_s
        while time.monotonic() < deadline:
            g = read_group(admin_url, group)
            if g is not None:
                out["generation"], out["members"] = g["generation"], len(g["members"])
                out["causes"] = g["rebalance_causes"]
                if g["state"] == "Stable" and len(g["members"]) == n:
                    out["formed"], out["seconds"] = True, time.monotonic() - t0
                    break
            time.sleep(POLL_S)
        if out["formed"]:
            time.sleep(settle_s)
            g = read_group(admin_url, group)
            out["settled"] = f"{g['generation']}{'' if g['state'] == 'Stable' else ' ' + g['state']}"
            out["settled_causes"] = g["rebalance_causes"]
    finally:
        members.stop()
    return out


def cell(r: dict) -> str:
    if not r["formed"]:
        return f">budget (gen {r['generation']}, {r['members']} in)"
    return (f"{r['generation']} ({r['seconds']:.1f}s; rebalance causes {r['causes']}; "
            f"{r['settled']} later: {r['settled_causes']})")


def joins(r: dict) -> int:
    """Rebalances members joining caused before the group was Stable with all N (1: the delay took all N
    into the first generation). Other causes (e.g. `leader_rejoined`: a client rejoining on its own) are
    the client's, not the delay's."""
    return r["causes"].get("member_joined", 0)


def summary(runs: list[dict]) -> str:
    """Per run G/J: the generation the group formed in / the rebalances members joining caused until then
    ('*': a further rebalance began within --settle-s; '>G': over budget, at generation G), and the slowest
    formation."""
    if not runs:
        return "skipped"
    gens = " ".join((f"{r['generation']}/{joins(r)}" + ("*" if r["settled"] != str(r["generation"]) else ""))
                    if r["formed"] else f">{r['generation']}" for r in runs)
    formed = [r["seconds"] for r in runs if r["formed"]]
    return f"{gens} ({max(formed):.1f}s)" if formed else gens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="java,confluent,kafka-python,aiokafka")
    ap.add_argument("--members", default="2,10,50")
    ap.add_argument("--delays", default="0,100,300,500,1000,3000")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each combination")
    ap.add_argument("--budget-s", type=float, default=60.0, help="time a group of < 50 members gets to form")
    ap.add_argument("--budget-50-s", type=float, default=120.0, help="time a group of >= 50 members gets")
    ap.add_argument("--settle-s", type=float, default=2.0, help="watch this long after forming")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)       # the clients' own rebalance chatter
    clients = args.clients.split(",")
    sizes = [int(x) for x in args.members.split(",")]
    delays = [int(x) for x in args.delays.split(",")]
    from tests.support.procs import TenureProcess

    print(f"tenure {tree_version()}; members: session {SESSION_MS} ms, heartbeat {HEARTBEAT_MS} ms, "
          f"rebalance timeout {REBALANCE_MS} ms; {args.repeat} run(s) per combination", flush=True)
    print(f"progress lines: generation when Stable with all N (time from the first start, "
          f"generation {args.settle_s:g}s later)", flush=True)
    results: dict[tuple[str, int, int], list[dict]] = {}
    for delay in delays:
        with tempfile.TemporaryDirectory() as d:
            srv = TenureProcess(Path(d) / "data", extra=("--initial-rebalance-delay-ms", str(delay),
                                                         "--admin-port", "0"))
            srv.start()
            try:
                for run in range(args.repeat):
                    for client in clients:
                        for n in sizes:
                            budget = args.budget_50_s if n >= 50 else args.budget_s
                            r = measure(srv, client, n, delay, run, budget, args.settle_s)
                            results.setdefault((client, n, delay), []).append(r)
                            print(f"  delay {delay:>5} ms  run {run}  {client:<13} N={n:<3} {cell(r)}", flush=True)
            finally:
                srv.terminate()
    print("\nper run G/J: G = the generation the group was first Stable with all N members in (1 = one "
          "generation),\nJ = how many of those rebalances members joining caused (the rest: clients rejoining "
          "on their own, e.g. kafka-python's leader);\n(the slowest formation, from the first member's start); '*' = a further rebalance began within --settle-s of forming, "
          "'>G' = not formed within the budget (at generation G)")
    width = max(14, 5 * args.repeat + 9)
    head = f"{'client':<13} {'N':>3} | " + " | ".join(f"{str(dl) + ' ms':<{width}}" for dl in delays)
    print(head)
    print("-" * len(head))
    for client in clients:
        for n in sizes:
            print(f"{client:<13} {n:>3} | " + " | ".join(f"{summary(results.get((client, n, dl), [])):<{width}}"
                                                     for dl in delays))
    for label, ok in (("formed in one generation", lambda r: r["generation"] == 1),
                      ("took every member into its first generation (J = 1)", lambda r: joins(r) == 1)):
        good = [dl for dl in delays if all(r["formed"] and ok(r)
                                           for c in clients for n in sizes for r in results[(c, n, dl)])]
        print(f"smallest delay at which every run of every group {label}: "
              f"{str(min(good)) + ' ms' if good else 'none of those measured'}")


if __name__ == "__main__":
    main()
