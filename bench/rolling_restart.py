"""A rolling restart of N static members on tenure: the classic protocol against the consumer protocol
(KIP-848, `group.protocol=consumer`) - time and group epoch bumps (figures, never assertions).

For each protocol, one `tenure serve` process (its own defaults, `--initial-rebalance-delay-ms` as given) and
N confluent-kafka consumers (librdkafka), each with its own `group.instance.id`, polled in turn by this one
thread, subscribe to one topic of --partitions partitions. Once the group has settled, each member in turn is
closed (the classic protocol: no LeaveGroup for a static member; the consumer protocol: a heartbeat with epoch
-2) and replaced by a new consumer with the same instance id. A restart lasts from the close until the group
has settled again: the server's view (the admin endpoint) Stable with all N members, every partition held
exactly once, the restarted instance holding the partitions it held before, and each client's own view
(its assign/revoke callbacks) equal to the server's. The group epoch (the classic generation) is read from
the server before and after; after the last restart the script watches --watch-s more for a late bump.
A restart that does not settle within --restart-timeout-s ends that protocol's run (printed as such).

    .venv/bin/python bench/rolling_restart.py [--members 50] [--partitions 50] [--protocols classic,consumer]
        [--initial-delay-ms 1000] [--consumer-heartbeat-interval-ms 5000] [--restart-timeout-s 60]
        [--watch-s 5]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchcommon import tree_version, wait_ready_line  # noqa: E402

TOPIC = "rolling"


class Tenure:
    def __init__(self, partitions: int, initial_delay_ms: int, *extra: str) -> None:
        self.ready = Path(f"/tmp/tenure-rolling-{os.getpid()}.json")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tenure", "serve", "--port", "0", "--admin-port", "0", "--log-level", "WARNING",
             "--default-partitions", str(partitions), "--initial-rebalance-delay-ms", str(initial_delay_ms),
             "--ready-file", str(self.ready), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.bootstrap, out = wait_ready_line(self.proc, 60)
        if self.bootstrap is None:
            self.close()
            raise RuntimeError(f"tenure did not start: {out[-500:]!r}")
        self.admin = json.loads(self.ready.read_text())["admin"]

    def group(self, gid: str) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://{self.admin}/groups/{gid}", timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Member:
    def __init__(self, bootstrap: str, group: str, instance: str, protocol: str) -> None:
        from confluent_kafka import Consumer
        self.instance = instance
        self.owned: set[int] = set()
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
                "client.id": instance, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "log_level": 3}
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:        # Kafka's defaults but a 10 s session, so a member the coordinator waits for costs little
            conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 10000})
        self.c = Consumer(conf)
        self.c.subscribe([TOPIC], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)

    def _assign(self, consumer, parts) -> None:
        self.owned |= {p.partition for p in parts}

    def _revoke(self, consumer, parts) -> None:
        self.owned -= {p.partition for p in parts}

    def poll(self) -> None:
        self.c.poll(0)

    def close(self) -> None:
        self.c.close()


def settled(server: Tenure, gid: str, members: list[Member], partitions: int, expect: dict | None) -> dict | None:
    """{instance: partitions} if the group has settled (see the module doc), else None."""
    v = server.group(gid)
    if v is None or v["state"] != "Stable" or len(v["members"]) != len(members):
        return None
    served = {m["group_instance_id"]: sorted((m["assignment"] or {}).get(TOPIC, [])) for m in v["members"]}
    if sorted(p for ps in served.values() for p in ps) != list(range(partitions)):
        return None
    if any(sorted(m.owned) != served.get(m.instance) for m in members):
        return None
    if expect is not None and served != expect:
        return None
    return served


def wait_settled(server, gid, members, partitions, expect, timeout: float) -> dict | None:
    end = time.monotonic() + timeout
    last_check = 0.0
    while time.monotonic() < end:
        for m in members:
            m.poll()
        if time.monotonic() - last_check >= 0.05:
            last_check = time.monotonic()
            got = settled(server, gid, members, partitions, expect)
            if got is not None:
                return got
        time.sleep(0.002)
    return None


def run(protocol: str, a) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic
    extra = ["--consumer-heartbeat-interval-ms", str(a.consumer_heartbeat_interval_ms)] if protocol == "consumer" else []
    server = Tenure(a.partitions, a.initial_delay_ms, *extra)
    members: list[Member] = []
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.create_topics([NewTopic(TOPIC, a.partitions)])[TOPIC].result(30)
        del admin
        gid = f"rolling-{protocol}"
        t0 = time.monotonic()
        members = [Member(server.bootstrap, gid, f"i{n}", protocol) for n in range(a.members)]
        before = wait_settled(server, gid, members, a.partitions, None, 180)
        out = {"protocol": protocol, "formed_s": time.monotonic() - t0, "formed": before is not None}
        if before is None:
            return out
        epoch0 = server.group(gid)["generation"]
        times = []
        for n in range(a.members):
            old = members[n]
            t = time.monotonic()
            old.close()
            members[n] = Member(server.bootstrap, gid, old.instance, protocol)
            if wait_settled(server, gid, members, a.partitions, before, a.restart_timeout_s) is None:
                out["stuck_at"] = n
                break
            times.append(time.monotonic() - t)
        epoch1 = server.group(gid)["generation"]
        end = time.monotonic() + a.watch_s
        while time.monotonic() < end:
            for m in members:
                m.poll()
            time.sleep(0.01)
        v = server.group(gid)
        out.update(restarted=len(times), rolling_s=sum(times),
                   median_s=statistics.median(times) if times else float("nan"),
                   max_s=max(times, default=float("nan")), epoch_before=epoch0, epoch_after=epoch1,
                   epoch_after_watch=v["generation"], state_after_watch=v["state"])
        return out
    finally:
        for m in members:
            try:
                m.close()
            except Exception:           # noqa: BLE001 - a member that failed already; the others still close
                pass
        server.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--members", type=int, default=50)
    p.add_argument("--partitions", type=int, default=50)
    p.add_argument("--protocols", default="classic,consumer")
    p.add_argument("--initial-delay-ms", type=int, default=1000)
    p.add_argument("--consumer-heartbeat-interval-ms", type=int, default=5000)
    p.add_argument("--restart-timeout-s", type=float, default=60)
    p.add_argument("--watch-s", type=float, default=5)
    a = p.parse_args()
    import confluent_kafka
    print(f"tree {tree_version()}; python {sys.version.split()[0]}; confluent-kafka {confluent_kafka.__version__} / "
          f"librdkafka {confluent_kafka.libversion()[0]}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{a.members} static members, one topic of {a.partitions} partitions; initial rebalance delay "
          f"{a.initial_delay_ms} ms, consumer heartbeat interval {a.consumer_heartbeat_interval_ms} ms")
    for protocol in re.split(r"\s*,\s*", a.protocols):
        try:
            r = run(protocol, a)
        except RuntimeError as exc:      # e.g. a tenure without the consumer protocol's settings
            print(f"{protocol:8s}: {exc}")
            continue
        if not r["formed"]:
            print(f"{protocol:8s}: the group did not form within 180 s")
            continue
        stuck = f"; restart {r['stuck_at']} did not settle within {a.restart_timeout_s:.0f} s" if "stuck_at" in r else ""
        print(f"{protocol:8s}: formed in {r['formed_s']:.1f} s; {r['restarted']}/{a.members} restarts in "
              f"{r['rolling_s']:.1f} s (median {r['median_s']:.2f} s, max {r['max_s']:.2f} s); group epoch "
              f"{r['epoch_before']} -> {r['epoch_after']} ({r['epoch_after'] - r['epoch_before']} bumps), "
              f"{r['epoch_after_watch']} after {a.watch_s:.0f} s more ({r['state_after_watch']}){stuck}")


if __name__ == "__main__":
    main()
