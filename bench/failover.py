"""Coordinator failover benchmarks (figures, never assertions).

1. real clients: --groups (default 10) static groups of --members (default 3) confluent-kafka consumers
   (group.instance.id set) on one 12-partition topic of a 3-broker cluster, every group coordinated by the
   same broker. Each member commits asynchronously every 100 ms (its assigned partitions, offset 0) and
   records every commit acknowledged. Then the coordinating broker is stopped. Measured, from the stop:
   - clients: when every member of every group has had a commit acknowledged again (a commit is only
     acknowledged by the group's coordinator, with the member's generation);
   - tenure also: when every group is Stable on its new coordinator (the server's own view);
   - rebalances: steps of the newest generation any member has seen (librdkafka's consumer group
     metadata, as bench/groups.py counts them), and assign/revoke/lost callbacks after the stop.
   Against tenure (`ServerThread(brokers=3)`, in this process, `stop_broker(coordinator_of(group))`) and
   against librdkafka's mock cluster with 3 brokers (its C API through ctypes, on the library
   confluent-kafka ships): every group is put on broker 1 with `rd_kafka_mock_coordinator_set`, and the
   event is `rd_kafka_mock_broker_set_down(1)` plus `rd_kafka_mock_coordinator_set(group, 2)` for every
   group - the mock never moves a coordinator by itself, so this is what a real cluster's controller
   does for it. After the groups are back, the script watches a session timeout more, so a rebalance
   that comes late is counted too. Then, the old coordinator still down, the first member of every group
   restarts (close(), a new consumer with the same group.instance.id): the time until every member's
   commit is acknowledged again, the rebalances, and the callbacks on the members that did not restart.
2. synthetic: `tenure log synth` writes --synth-records records of --synth-groups static groups into one
   `__consumer_offsets` partition; a 3-broker tenure opens that data dir, and the broker leading that
   partition is stopped: the time `stop_broker` takes (it returns when the new coordinator has loaded the
   partition and serves it), every group's state on the new coordinator afterwards, and the load time per
   record.

    .venv/bin/python bench/failover.py [--targets tenure,mock,synth] [--groups 10] [--members 3]
                                       [--synth-groups 10000] [--synth-records 1000000] [--keep DIR]

Client settings on both targets: session.timeout.ms 10000, heartbeat.interval.ms 1000,
max.poll.interval.ms 10000. Bounded: every wait has a timeout (--timeout-s) and prints what it saw.
"""
from __future__ import annotations

import argparse
import ctypes
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchcommon import REPO, tree_version  # noqa: E402
from groups import PARTITIONS, MockCluster, generation_of  # noqa: E402

SESSION_MS = 10000
COMMIT_EVERY_S = 0.1


class CommitMember:
    """A static confluent-kafka consumer that commits asynchronously every COMMIT_EVERY_S and records its
    callbacks (with the generation) and every acknowledged commit, on one shared log:
    ("assign"|"revoke"|"lost", group, name, monotonic, generation) and ("ack", group, name, monotonic, None)."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, log: list) -> None:
        from confluent_kafka import Consumer
        self.group, self.name, self.topic, self.log = group, name, topic, log
        self.assignment: list[int] | None = None
        self.last_commit = 0.0
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": name,
                           "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 1000,
                           "max.poll.interval.ms": 10000, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "log_level": 0,
                           "on_commit": self._committed})
        self.c.subscribe([topic], on_assign=self._cb("assign"), on_revoke=self._cb("revoke"),
                         on_lost=self._cb("lost"))

    def _cb(self, kind: str):
        def cb(consumer, parts):
            self.assignment = sorted(p.partition for p in parts) if kind == "assign" else None
            self.log.append((kind, self.group, self.name, time.monotonic(), generation_of(consumer)))
        return cb

    def _committed(self, err, parts) -> None:
        if err is None and all(p.error is None for p in parts):
            self.log.append(("ack", self.group, self.name, time.monotonic(), None))

    def poll(self) -> None:
        from confluent_kafka import KafkaException, TopicPartition
        self.c.poll(0)
        now = time.monotonic()
        if self.assignment and now - self.last_commit >= COMMIT_EVERY_S:
            self.last_commit = now
            try:
                self.c.commit(offsets=[TopicPartition(self.topic, p, 0) for p in self.assignment],
                              asynchronous=True)
            except KafkaException:
                pass            # e.g. no coordinator known right now: the next round tries again

    def generation(self) -> int:
        return generation_of(self.c)

    def close(self) -> None:
        self.c.close()


def poll_until(members, pred, timeout: float):
    """Poll every member until pred() is true (returns monotonic time) or timeout (returns None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if pred():
            return time.monotonic()
        time.sleep(0.005)
    return None


def formed(members, groups) -> bool:
    for g in groups:
        ms = [m for m in members if m.group == g]
        if any(m.assignment is None for m in ms):
            return False
        if sorted(p for m in ms for p in m.assignment) != list(range(PARTITIONS)):
            return False
    return True


def all_acked_since(members, log, t0: float) -> bool:
    acked = {(e[1], e[2]) for e in log if e[0] == "ack" and e[3] > t0}
    return all((m.group, m.name) in acked for m in members)


def newest_generation(members, log, group: str) -> int:
    seen = [e[4] for e in log if e[0] == "assign" and e[1] == group]
    seen += [m.generation() for m in members if m.group == group]
    return max(seen, default=-1)


def count_callbacks(events, skip=lambda e: False) -> dict[str, int]:
    return {k: sum(1 for e in events if e[0] == k and not skip(e)) for k in ("assign", "revoke", "lost")}


def real_clients(target: str, n_groups: int, n_members: int, timeout: float) -> dict:
    from confluent_kafka import Producer
    topic = "failover-bench"
    mock = st = None
    log: list = []
    members: list[CommitMember] = []
    try:
        if target == "mock":
            mock = MockCluster(topic, PARTITIONS, 3000, brokers=3)
            lib = mock.lib
            lib.rd_kafka_mock_broker_set_down.argtypes = [ctypes.c_void_p, ctypes.c_int32]
            lib.rd_kafka_mock_coordinator_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                                          ctypes.c_int32]
            groups = [f"fo-{i}" for i in range(n_groups)]
            for g in groups:
                assert lib.rd_kafka_mock_coordinator_set(mock.mc, b"group", g.encode(), 1) == 0
            bootstrap, old = mock.bootstrap, 1
        else:
            from tenure.config import ServerConfig
            from tenure.server import ServerThread
            st = ServerThread(ServerConfig(port=0, brokers=3, default_partitions=PARTITIONS)).start()
            st.create_topics({topic: PARTITIONS})
            bootstrap = st.bootstrap
            # n_groups names the same broker coordinates (the one coordinating fo-0)
            old = st.coordinator_of("fo-0")
            groups, i = [], 0
            while len(groups) < n_groups:
                if st.coordinator_of(f"fo-{i}") == old:
                    groups.append(f"fo-{i}")
                i += 1
        p = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
        p.produce(topic, b"x")
        p.flush(10)
        del p
        t_start = time.monotonic()
        members = [CommitMember(bootstrap, g, topic, f"{g}-m{j}", log) for g in groups for j in range(n_members)]
        if poll_until(members, lambda: formed(members, groups) and all_acked_since(members, log, t_start),
                      timeout) is None:
            return {"error": f"groups did not form within {timeout}s"}
        formed_s = time.monotonic() - t_start
        poll_until(members, lambda: False, 1.0)             # settle: every member has committed more than once
        gens = {g: newest_generation(members, log, g) for g in groups}
        mark = len(log)
        t0 = time.monotonic()
        if target == "mock":
            assert lib.rd_kafka_mock_broker_set_down(mock.mc, old) == 0
            for g in groups:
                assert lib.rd_kafka_mock_coordinator_set(mock.mc, b"group", g.encode(), 2) == 0
            server_s = None
        else:
            st.stop_broker(old)
            t_stopped = time.monotonic()
            server_stable = poll_until(members, lambda: all(
                st.coordinator_of(g) != old and getattr(st.group(g), "state", None) == "Stable"
                for g in groups), timeout)
            server_s = None if server_stable is None else server_stable - t0
        t_acked = poll_until(members, lambda: formed(members, groups) and all_acked_since(members, log, t0),
                             timeout)
        acked_s = None if t_acked is None else t_acked - t0
        poll_until(members, lambda: False, SESSION_MS / 1000 + 3)   # a late rebalance is counted too
        after = log[mark:]
        rebalances = {g: newest_generation(members, log, g) - gens[g] for g in groups}
        out = {"formed_s": formed_s, "acked_s": acked_s, "server_stable_s": server_s,
               "stop_call_s": (t_stopped - t0) if target == "tenure" else None,
               "rebalances": sum(rebalances.values()),
               "groups_rebalanced": sum(1 for v in rebalances.values() if v),
               "callbacks": count_callbacks(after), "members": len(members)}
        # then, with the old coordinator still down, the first member of every group restarts
        gens = {g: newest_generation(members, log, g) for g in groups}
        mark = len(log)
        t1 = time.monotonic()
        for i, m in enumerate(members):
            if m.name.endswith("-m0"):
                m.close()
                members[i] = CommitMember(bootstrap, m.group, topic, m.name, log)
        t_back = poll_until(members, lambda: formed(members, groups) and all_acked_since(members, log, t1), timeout)
        poll_until(members, lambda: False, SESSION_MS / 1000 + 3)
        rebalances = {g: newest_generation(members, log, g) - gens[g] for g in groups}
        out.update(restart_s=None if t_back is None else t_back - t1, restart_rebalances=sum(rebalances.values()),
                   restart_callbacks=count_callbacks(log[mark:], skip=lambda e: e[2].endswith("-m0")))
        return out
    finally:
        for m in members:
            m.close()
        if st is not None:
            st.stop()
        if mock is not None:
            mock.close()


def synthetic(n_groups: int, n_records: int, keep: str | None, timeout: float) -> dict:
    from tenure.config import ServerConfig
    from tenure.protocol.internal_topics import OFFSETS_TOPIC
    from tenure.server import ServerThread
    d = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="failover-bench-"))
    try:
        if not (d / f"{OFFSETS_TOPIC}-0").is_dir():
            t = time.monotonic()
            subprocess.run([sys.executable, "-m", "tenure", "log", "synth", str(d), "--records", str(n_records),
                            "--groups", str(n_groups), "--offsets-partitions", "1"], check=True, cwd=REPO,
                           stdout=subprocess.DEVNULL)
            print(f"  synth: {n_records} records, {n_groups} groups in {time.monotonic() - t:.1f}s", flush=True)
        t = time.monotonic()
        st = ServerThread(ServerConfig(port=0, brokers=3, data_dir=str(d), offsets_partitions=1)).start(timeout)
        ready_s = time.monotonic() - t
        try:
            groups = [g.group_id for g in st.groups()]
            old = st.coordinator_of(groups[0])
            t0 = time.monotonic()
            st.stop_broker(old)
            stop_s = time.monotonic() - t0
            new = st.coordinator_of(groups[0])
            states: dict[str, int] = {}
            for v in st.groups():
                states[v.state] = states.get(v.state, 0) + 1
            records = n_records             # synth writes this many records, or a few more (see its doc)
            return {"ready_s": ready_s, "stop_s": stop_s, "old": old, "new": new, "groups": len(groups),
                    "states": states, "us_per_record": stop_s / records * 1e6, "records": records}
        finally:
            st.stop()
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)


def fmt(target: str, r: dict) -> str:
    if "error" in r:
        return f"{target}: {r['error']}"
    s = lambda v: "-" if v is None else f"{v:.2f}s"  # noqa: E731
    return (f"{target}: {r['members']} static members formed in {s(r['formed_s'])}; coordinator stopped -> "
            f"every member's commit acknowledged again after {s(r['acked_s'])}"
            + (f", every group Stable on the new coordinator after {s(r['server_stable_s'])}"
               f" (stop_broker returned after {s(r['stop_call_s'])})" if target == "tenure" else "")
            + f"; rebalances {r['rebalances']} ({r['groups_rebalanced']} groups), callbacks after the stop "
              f"{r['callbacks']}; then one static member per group restarted during the outage: every commit "
              f"acknowledged again after {s(r['restart_s'])}, rebalances {r['restart_rebalances']}, callbacks on "
              f"the members that did not restart {r['restart_callbacks']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="tenure,mock,synth")
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--synth-groups", type=int, default=10000)
    ap.add_argument("--synth-records", type=int, default=1000000)
    ap.add_argument("--keep", help="the synthetic data dir (made once, reused)")
    ap.add_argument("--timeout-s", type=float, default=120)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    import confluent_kafka
    print(f"confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]}, {os.cpu_count()} cpus, "
          f"tree {tree_version()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    targets = args.targets.split(",")
    for target in ("tenure", "mock"):
        if target in targets:
            print(fmt(target, real_clients(target, args.groups, args.members, args.timeout_s)), flush=True)
    if "synth" in targets:
        r = synthetic(args.synth_groups, args.synth_records, args.keep, args.timeout_s)
        print(f"synthetic: {r['groups']} groups, {r['records']} records in the moved partition; opened in "
              f"{r['ready_s']:.1f}s; stop_broker({r['old']}) -> loaded and serving on broker {r['new']} in "
              f"{r['stop_s']:.2f}s = {r['us_per_record']:.1f} us/record; group states after: {r['states']}",
              flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
