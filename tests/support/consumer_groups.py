"""N consumer-protocol (KIP-848, `group.protocol=consumer`) members of one group, started together the way a test
starts them, with every rebalance callback they get recorded: Java kafka-clients 4.3 (tests/java/GroupStart.java,
N consumers on N threads of ONE JVM) or confluent-kafka (one thread per member). Used by the tests of
`expect_group` on consumer groups and by bench/settle_time.py and bench/expect_group.py."""
from __future__ import annotations

import json
import subprocess
import threading
import time


class Tracker:
    """Each member's partitions from its (incremental) callbacks, every callback, and when the last one came."""

    def __init__(self, n: int) -> None:
        self.owned: list[set[int]] = [set() for _ in range(n)]
        self.callbacks: list[tuple[int, str, frozenset[int]]] = []     # (member, assigned|revoked, partitions)
        self.last = 0.0
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def event(self, member: int, kind: str, parts, at: float) -> None:
        with self.lock:
            if kind == "assigned":
                self.owned[member] |= set(parts)
            else:
                self.owned[member] -= set(parts)
            self.callbacks.append((member, kind, frozenset(parts)))
            self.last = max(self.last, at)

    def view(self) -> tuple[list[frozenset[int]], float, int]:
        with self.lock:
            return [frozenset(o) for o in self.owned], self.last, len(self.callbacks)

    def revocations(self) -> list[tuple[int, frozenset[int]]]:
        """Every revoke (or lost) callback that took partitions away: (member, partitions)."""
        with self.lock:
            return [(m, ps) for m, kind, ps in self.callbacks if kind == "revoked" and ps]

    def assigned_partitions(self) -> list[int]:
        """Every partition of every assign callback, in order (a partition assigned twice appears twice)."""
        with self.lock:
            return [p for _, kind, ps in self.callbacks if kind == "assigned" for p in ps]


class JavaGroup:
    def __init__(self, bootstrap: str, group: str, topic: str, n: int, tracker: Tracker, *conf: str) -> None:
        from tests.support.java import _tool, compile_java
        self.tracker = tracker
        self.proc = subprocess.Popen(
            [_tool("java"), "-cp", compile_java(), "GroupStart", bootstrap, group, topic, str(n),
             "group.protocol=consumer", *conf],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            ev = json.loads(line)
            at = ev.get("ts", 0) / 1000
            if ev["type"] in ("assigned", "revoked"):
                self.tracker.event(ev["member"], ev["type"], ev["partitions"], at)
            elif ev["type"] == "error":
                self.tracker.errors.append(ev.get("exception", "?"))

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class ConfluentGroup:
    def __init__(self, bootstrap: str, group: str, topic: str, n: int, tracker: Tracker, first: int = 0) -> None:
        """Members `first` .. `first + n - 1` of the tracker."""
        self.tracker, self.stop_flag = tracker, threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(bootstrap, group, topic, i), daemon=True)
                        for i in range(first, first + n)]
        for t in self.threads:
            t.start()

    def _run(self, bootstrap: str, group: str, topic: str, i: int) -> None:
        from confluent_kafka import Consumer
        tr = self.tracker
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                      "client.id": f"c-{i}", "enable.auto.commit": False,
                      "error_cb": lambda e: tr.errors.append(str(e)) if e.fatal() else None})
        c.subscribe([topic], on_assign=lambda _c, ps: tr.event(i, "assigned", [p.partition for p in ps], time.time()),
                    on_revoke=lambda _c, ps: tr.event(i, "revoked", [p.partition for p in ps], time.time()),
                    on_lost=lambda _c, ps: tr.event(i, "revoked", [p.partition for p in ps], time.time()))
        try:
            while not self.stop_flag.is_set():
                c.poll(0.05)
        finally:
            c.close()

    def stop(self) -> None:
        self.stop_flag.set()
        for t in self.threads:
            t.join(60)


def start(client: str, bootstrap: str, group: str, topic: str, n: int, tracker: Tracker):
    """N members of `client` ("java" or "confluent")."""
    return (JavaGroup if client == "java" else ConfluentGroup)(bootstrap, group, topic, n, tracker)


def holds_shares(srv, group: str, n: int, owned: list[frozenset[int]], partitions: int) -> bool:
    """The server's group is Stable with n members, every partition owned once, each member its share (as
    the callbacks say), and the server's assignment is the members' own."""
    share = partitions // n
    if sorted(p for o in owned for p in o) != list(range(partitions)):
        return False
    if any(len(o) not in (share, share + 1) for o in owned):
        return False
    v = srv.group(group)
    if v is None or v.state != "Stable" or len(v.members) != n:
        return False
    served = {frozenset(p for ps in (m.assignment or {}).values() for p in ps) for m in v.members}
    return served == set(owned)
