"""What the server counts, as plain data: `Metrics`, a set of counters the server, the coordinator runtime
and the log update as things happen. A leaf module every layer may import; tests read the counters directly
(`server.metrics.rebalances`) and tenure/control/metrics.py renders them for `GET /metrics`. One `Metrics`
lives as long as the process's server, across in-process restarts (`ServerThread.restart`), like a JVM's
metrics across a broker's reload.
"""
from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter

# request latency buckets (seconds) and fsync latency buckets
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Histogram:
    """Cumulative-bucket histogram as Prometheus wants it: a count per bucket (the last one past every bound: +Inf)
    and the sum of the values; how many were observed is the counts' sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, buckets=LATENCY_BUCKETS) -> None:
        self.bounds = tuple(buckets)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1      # the first bound >= value; past them all: +Inf
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        out, acc = [], 0
        for b, c in zip(self.bounds, self.counts, strict=False):     # counts has the +Inf bucket too
            acc += c
            out.append((repr(float(b)), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out


class Metrics:
    def __init__(self) -> None:
        self.started = time.time()
        self.connections_open = 0
        self.connections_total = 0
        # api -> (error name -> responses, latency): what every response updates, found with one lookup (the
        # responses by (api, error) are read as `requests`)
        self._responses: dict[str, tuple[dict[str, int], Histogram]] = {}
        self.request_seconds: dict[str, Histogram] = {}               # api -> latency
        self.closed_connections: Counter[str] = Counter()             # reason -> connections we closed
        self.accept_errors = 0                                        # accept() failures (EMFILE, ...)
        self.faults: Counter[tuple[str, str]] = Counter()             # (api, action) -> injected
        self.rebalances: Counter[tuple[str, str]] = Counter()         # (group, cause) -> rebalances started
        self.static_events: Counter[tuple[str, str]] = Counter()      # (group, cause) -> events
        self.fenced: Counter[str] = Counter()                         # group -> fenced attempts
        self.fsync_seconds = Histogram()
        # (listener, SASL mechanism, outcome: authenticated | reauthenticated | failed) -> SASL exchanges ended
        self.authentications: Counter[tuple[str, str, str]] = Counter()

    # ------------------------------------------------------------------ updates
    def request(self, api: str, error: str, seconds: float) -> None:
        """One response sent (every request's: one dict increment and one bucket found by bisection)."""
        per = self._responses.get(api)
        if per is None:
            per = self._responses[api] = ({}, self.request_seconds.setdefault(api, Histogram()))
        by_error, h = per
        try:
            by_error[error] += 1
        except KeyError:
            by_error[error] = 1
        h.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1      # Histogram.observe, in line
        h.sum += seconds

    def rebalance(self, group: str, cause: str) -> None:
        self.rebalances[(group, cause)] += 1

    def static_event(self, group: str, cause: str) -> None:
        self.static_events[(group, cause)] += 1
        if cause == "fenced":
            self.fenced[group] += 1

    # ------------------------------------------------------------------ reads
    @property
    def requests(self) -> Counter[tuple[str, str]]:
        """Responses sent by (api, error name), read now (from any thread)."""
        return Counter({(api, error): n for api, (by_error, _) in list(self._responses.items())
                        for error, n in list(by_error.items())})

    def rebalance_count(self, group: str) -> int:
        return sum(n for (g, _), n in self.rebalances.items() if g == group)

    def rebalance_causes(self, group: str) -> dict[str, int]:
        return {c: n for (g, c), n in sorted(self.rebalances.items()) if g == group}
