"""Network faults between the clients and the brokers, applied by each connection to the bytes it reads
and writes (tenure/server/connection.py), so clients see what a bad network shows them: silence and
timeouts, answers that never come, slow links, reset connections.

    server.network.partition(client_id="worker-1")            # no bytes either way, until healed
    server.network.partition(client_id="worker-1", broker=0)  # ... between that client and broker 0 only
    server.network.loss("out", port=53412)                    # answers to that source port are lost
    server.network.delay(200, broker=1)                       # every byte to and from broker 1 is 200 ms late
    server.network.bandwidth(64 * 1024, client_id="slow")     # 64 KiB/s each way
    server.network.reset(after_bytes=10000, client_id="c")    # each connection reset (RST) after 10000 bytes
    server.network.heal()                                     # every rule gone; held bytes flow again
    with server.network.partition(client_id="worker-1"): ... # healed at the end of the block

A rule matches a connection by the client id of its requests (`client_id`), its source port (`port`) and
the broker (node id) whose listener took it (`broker`); all given must match, none given matches every
connection. The faults act on whole requests and answers as they pass the connection:

- partition: nothing is read from or written to a matched connection; what the client sent waits, as
  bytes wait in the kernel on a real partition, and flows when the rule is healed (or never, if the
  client gave up and closed the connection first). A new connection is accepted (the kernel does that)
  but its first request waits too.
- loss (`direction` "in" or "out"): requests from the client are dropped unserved (in), or the server's
  answers are dropped after the request was handled (out): the client waits for them until its request
  timeout.
- delay: each request waits `ms` before it is served (in), each answer `ms` before it is written (out),
  or both (`direction` "both", the default: a round trip is 2 x ms longer).
- bandwidth: bytes pass at most at `bytes_per_s` in each matched direction.
- reset: a matched connection is reset (TCP RST; the client sees ECONNRESET) once `after_bytes` bytes
  have passed it in the matched directions since the rule was set; `count` connections at most (None:
  every matched one).

Rules are plain data, set from any thread; `rules()` lists them; the admin endpoint offers the same
(`GET/POST/DELETE /network`).
"""
from __future__ import annotations

import asyncio
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

FAULTS = ("partition", "loss", "delay", "bandwidth", "reset")
DIRECTIONS = ("in", "out", "both")
MAX_RULES = 1000
MAX_DELAY_MS = 2**31 - 1
MAX_TRACKED = 10000                    # connections a reset or bandwidth rule keeps counts for
POLL_S = 0.01                          # how often a partitioned connection looks whether it is healed
SPEC_FIELDS = {"fault", "client_id", "port", "broker", "direction", "ms", "bytes_per_s", "after_bytes", "count"}


class NetworkReset(Exception):
    """Reset this connection now, after writing `partial` (the part of an answer that got through)."""

    def __init__(self, partial: bytes = b"") -> None:
        super().__init__("connection reset by a network fault")
        self.partial = partial


class Drained(Exception):
    """The server is stopping while a connection waited behind a partition: end it."""


def _whole(value, name: str, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise ValueError(f"{name}: want a whole number from {least} to {most}, not {value!r}")
    return value


@dataclass(eq=False)
class NetRule:
    """One network fault: what it does, to which connections (direction, client id, port, broker) and how often."""
    id: int
    fault: str
    direction: str = "both"
    client_id: str | None = None
    port: int | None = None
    broker: int | None = None
    ms: int = 0
    bytes_per_s: int = 0
    after_bytes: int = 0
    count: int | None = None
    applied: int = 0                   # requests/answers it acted on (connections reset, for reset)
    owner: Any = field(default=None, repr=False)
    _passed: dict = field(default_factory=dict, repr=False)      # reset: bytes per connection id
    _free_at: dict = field(default_factory=dict, repr=False)     # bandwidth: (conn id, direction) -> time

    def matches(self, conn, direction: str) -> bool:
        if self.direction != "both" and self.direction != direction:
            return False
        if self.client_id is not None and conn.client_id != self.client_id:
            return False
        peer = conn.peer
        if self.broker is not None and peer.broker_id != self.broker:
            return False
        if self.port is not None:
            address = peer.address
            if not (isinstance(address, tuple) and len(address) >= 2 and address[1] == self.port):
                return False
        return True

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"id": self.id, "fault": self.fault, "direction": self.direction, "applied": self.applied}
        for name in ("client_id", "port", "broker"):
            if getattr(self, name) is not None:
                d[name] = getattr(self, name)
        extra = {"delay": ("ms",), "bandwidth": ("bytes_per_s",), "reset": ("after_bytes", "count")}
        for name in extra.get(self.fault, ()):
            d[name] = getattr(self, name)
        return d

    def heal(self) -> None:
        """Remove this rule."""
        if self.owner is not None:
            self.owner.heal(self)

    def __enter__(self) -> NetRule:
        return self

    def __exit__(self, *exc) -> None:
        self.heal()


class Network:
    """The network fault rules of one server (kept across restarts, as the fault rules are)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: tuple[NetRule, ...] = ()
        self._ids = itertools.count(1)
        self.active = False            # a fast check for every connection's reads and writes

    # ------------------------------------------------------------------ the rules
    def _add(self, fault: str, direction: str, client_id, port, broker, **kw) -> NetRule:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction: want one of {', '.join(DIRECTIONS)}, not {direction!r}")
        if client_id is not None and not isinstance(client_id, str):
            raise ValueError(f"client_id: want a string, not {client_id!r}")
        if port is not None:
            _whole(port, "port", 1, 65535)
        if broker is not None:
            _whole(broker, "broker", 0, 2**31 - 1)
        rule = NetRule(0, fault, direction, client_id, port, broker, owner=self, **kw)
        with self._lock:
            if len(self._rules) >= MAX_RULES:
                raise ValueError(f"{MAX_RULES} network rules are set already; heal some first")
            rule.id = next(self._ids)
            self._rules = (*self._rules, rule)
            self.active = True
        return rule

    def partition(self, *, client_id: str | None = None, port: int | None = None,
                  broker: int | None = None) -> NetRule:
        """No bytes either way between the matched clients and brokers until healed."""
        return self._add("partition", "both", client_id, port, broker)

    def loss(self, direction: str, *, client_id: str | None = None, port: int | None = None,
             broker: int | None = None) -> NetRule:
        """One-way loss: requests (`"in"`) or answers (`"out"`) of the matched connections are dropped."""
        if direction not in ("in", "out"):
            raise ValueError(f"direction: a loss is one-way: want in or out, not {direction!r}")
        return self._add("loss", direction, client_id, port, broker)

    def delay(self, ms: int, *, direction: str = "both", client_id: str | None = None, port: int | None = None,
              broker: int | None = None) -> NetRule:
        """`ms` of added latency on each matched direction."""
        return self._add("delay", direction, client_id, port, broker, ms=_whole(ms, "ms", 0, MAX_DELAY_MS))

    def bandwidth(self, bytes_per_s: int, *, direction: str = "both", client_id: str | None = None,
                  port: int | None = None, broker: int | None = None) -> NetRule:
        """At most `bytes_per_s` bytes a second on each matched direction of each matched connection."""
        return self._add("bandwidth", direction, client_id, port, broker,
                         bytes_per_s=_whole(bytes_per_s, "bytes_per_s", 1, 2**40))

    def reset(self, after_bytes: int, *, count: int | None = None, direction: str = "both",
              client_id: str | None = None, port: int | None = None, broker: int | None = None) -> NetRule:
        """Reset each matched connection (at most `count` of them) once `after_bytes` bytes passed it."""
        if count is not None:
            _whole(count, "count", 1, 2**31 - 1)
        return self._add("reset", direction, client_id, port, broker,
                         after_bytes=_whole(after_bytes, "after_bytes", 0, 2**62), count=count)

    def add(self, spec: dict) -> NetRule:
        """A rule from plain data (the admin endpoint's JSON): {"fault", "client_id"?, "port"?, "broker"?,
        "direction"?, "ms" (delay), "bytes_per_s" (bandwidth), "after_bytes" and "count"? (reset)}."""
        unknown = sorted(set(spec) - SPEC_FIELDS)
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(map(repr, unknown))}; a network rule has "
                             f"{', '.join(sorted(SPEC_FIELDS))}")
        fault = spec.get("fault")
        if fault not in FAULTS:
            raise ValueError(f"fault: want one of {', '.join(FAULTS)}, not {fault!r}")
        own = {"partition": (), "loss": ("direction",), "delay": ("ms", "direction"),
               "bandwidth": ("bytes_per_s", "direction"), "reset": ("after_bytes", "count", "direction")}[fault]
        required = {"loss": ("direction",), "delay": ("ms",), "bandwidth": ("bytes_per_s",),
                    "reset": ("after_bytes",)}.get(fault, ())
        for name in required:
            if name not in spec:
                raise ValueError(f"{name}: required for a {fault} rule")
        for name in SPEC_FIELDS - {"fault", "client_id", "port", "broker"} - set(own):
            if name in spec:
                raise ValueError(f"{name}: not a field of a {fault} rule")
        where: dict[str, Any] = {k: spec.get(k) for k in ("client_id", "port", "broker")}
        args: dict[str, Any] = {k: spec[k] for k in own if k in spec}
        return getattr(self, fault)(**args, **where)

    def heal(self, rule: NetRule | int | None = None) -> int:
        """Remove one rule (a NetRule or its id) or every rule; returns how many were removed."""
        with self._lock:
            rid = rule.id if isinstance(rule, NetRule) else rule
            keep = tuple(r for r in self._rules if rid is not None and r.id != rid)
            n = len(self._rules) - len(keep)
            self._rules = keep
            self.active = bool(keep)
        return n

    def rules(self) -> list[NetRule]:
        return list(self._rules)

    # ------------------------------------------------------------------ applied by a connection
    def _matching(self, conn, direction: str) -> list[NetRule]:
        return [r for r in self._rules if r.matches(conn, direction)]

    async def _hold(self, conn, direction: str) -> None:
        """Wait while a partition separates `conn` from its client."""
        counted = False
        while any(r.fault == "partition" for r in self._matching(conn, direction)):
            if not counted:
                for r in self._matching(conn, direction):
                    if r.fault == "partition":
                        r.applied += 1
                counted = True
            if conn.draining:
                raise Drained()
            await asyncio.sleep(POLL_S)

    async def _pace(self, conn, rules: list[NetRule], direction: str, size: int) -> None:
        wait = 0.0
        now = time.monotonic()
        for r in rules:
            if r.fault == "delay" and r.ms:
                r.applied += 1
                wait = max(wait, r.ms / 1000)
            elif r.fault == "bandwidth":
                r.applied += 1
                key = (conn.peer.conn_id, direction)
                if len(r._free_at) > MAX_TRACKED:        # connections long gone: their pacing is over
                    r._free_at = {k: t for k, t in r._free_at.items() if t > now}
                start = max(now, r._free_at.get(key, now))
                r._free_at[key] = start + size / r.bytes_per_s
                wait = max(wait, r._free_at[key] - now)
        if wait > 0:
            await asyncio.sleep(wait)

    def _reset_at(self, conn, rules: list[NetRule], size: int) -> int | None:
        """How many of the next `size` bytes pass before a reset rule resets `conn` (None: no reset)."""
        cut = None
        for r in rules:
            if r.fault != "reset":
                continue
            cid = conn.peer.conn_id
            passed = r._passed.get(cid)
            if passed is None:
                if r.count is not None and r.applied >= r.count:
                    continue
                if len(r._passed) >= MAX_TRACKED:        # keep the latest connections' counts
                    r._passed.pop(next(iter(r._passed)))
                passed = r._passed[cid] = 0
            if passed + size > r.after_bytes:
                r._passed.pop(cid, None)
                r.applied += 1
                left = max(0, r.after_bytes - passed)
                cut = left if cut is None else min(cut, left)
            else:
                r._passed[cid] = passed + size
        return cut

    async def inbound(self, conn, size: int) -> bool:
        """Before a request of `size` bytes (its frame) is served: False if it is lost."""
        await self._hold(conn, "in")
        rules = self._matching(conn, "in")
        if not rules:
            return True
        if self._reset_at(conn, rules, size) is not None:
            raise NetworkReset()
        for r in rules:
            if r.fault == "loss":
                r.applied += 1
                return False
        await self._pace(conn, rules, "in", size)
        return True

    async def outbound(self, conn, frame: bytes) -> bytes | None:
        """Before an answer is written: the bytes to write (None: it is lost)."""
        await self._hold(conn, "out")
        rules = self._matching(conn, "out")
        if not rules:
            return frame
        cut = self._reset_at(conn, rules, len(frame))
        if cut is not None:
            raise NetworkReset(frame[:cut])
        for r in rules:
            if r.fault == "loss":
                r.applied += 1
                return None
        await self._pace(conn, rules, "out", len(frame))
        return frame
