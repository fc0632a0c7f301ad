"""What the server counts, as plain data, and its Prometheus rendering (`GET /metrics`).

`Metrics` is a set of plain counters the server, the runtime and the log update as things happen; tests
read them directly (`server.metrics.rebalances`), the admin endpoint renders them in Prometheus' text
format with prometheus_client (a collector of our own over a registry of our own, so several servers in
one process do not share a global registry). One `Metrics` lives as long as the process's server, across
in-process restarts (`ServerThread.restart`), like a JVM's metrics across a broker's reload.
"""
from __future__ import annotations

import time
from collections import Counter, deque

# request latency buckets (seconds) and fsync latency buckets
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
REBALANCE_HISTORY = 1000          # rebalances kept per group for inspection


class Histogram:
    """Cumulative-bucket histogram as Prometheus wants it."""

    def __init__(self, buckets=LATENCY_BUCKETS) -> None:
        self.bounds = tuple(buckets)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for i, b in enumerate(self.bounds):
            if value <= b:
                self.counts[i] += 1
                return
        self.counts[-1] += 1

    def cumulative(self) -> list[tuple[str, int]]:
        out, acc = [], 0
        for b, c in zip(self.bounds, self.counts):
            acc += c
            out.append((repr(float(b)), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out


class Metrics:
    def __init__(self) -> None:
        self.started = time.time()
        self.connections_open = 0
        self.connections_total = 0
        self.requests: Counter[tuple[str, str]] = Counter()          # (api, error name) -> responses
        self.request_seconds: dict[str, Histogram] = {}               # api -> latency
        self.closed_connections: Counter[str] = Counter()             # reason -> connections we closed
        self.faults: Counter[tuple[str, str]] = Counter()             # (api, action) -> injected
        self.rebalances: Counter[tuple[str, str]] = Counter()         # (group, cause) -> rebalances started
        self.rebalance_log: dict[str, deque] = {}                     # group -> (time ms, cause)
        self.static_events: Counter[tuple[str, str]] = Counter()      # (group, cause) -> events
        self.fenced: Counter[str] = Counter()                         # group -> fenced attempts
        self.fsync_seconds = Histogram()

    # ------------------------------------------------------------------ updates
    def request(self, api: str, error: str, seconds: float) -> None:
        self.requests[(api, error)] += 1
        h = self.request_seconds.get(api)
        if h is None:
            h = self.request_seconds[api] = Histogram()
        h.observe(seconds)

    def rebalance(self, group: str, cause: str, now_ms: int) -> None:
        self.rebalances[(group, cause)] += 1
        log = self.rebalance_log.get(group)
        if log is None:
            log = self.rebalance_log[group] = deque(maxlen=REBALANCE_HISTORY)
        log.append((now_ms, cause))

    def static_event(self, group: str, cause: str) -> None:
        self.static_events[(group, cause)] += 1
        if cause == "fenced":
            self.fenced[group] += 1

    # ------------------------------------------------------------------ reads
    def rebalance_count(self, group: str) -> int:
        return sum(n for (g, _), n in self.rebalances.items() if g == group)

    def rebalance_causes(self, group: str) -> dict[str, int]:
        return {c: n for (g, c), n in sorted(self.rebalances.items()) if g == group}


def render(server) -> bytes:
    """The Prometheus text exposition of a server's metrics (and its logs' sizes, read now)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    m: Metrics = server.metrics

    class Collector:
        def collect(self):
            g = GaugeMetricFamily("tenure_connections", "Client connections open now")
            g.add_metric([], m.connections_open)
            yield g
            c = CounterMetricFamily("tenure_connections_accepted", "Client connections accepted")
            c.add_metric([], m.connections_total)
            yield c
            c = CounterMetricFamily("tenure_connections_closed_by_server",
                                    "Connections the server closed (bad input, injected faults)", labels=["reason"])
            for reason, n in sorted(m.closed_connections.items()):
                c.add_metric([reason], n)
            yield c
            c = CounterMetricFamily("tenure_requests", "Responses sent, by API and the first non-zero error "
                                    "code in them (NONE if none)", labels=["api", "error"])
            for (api, err), n in sorted(m.requests.items()):
                c.add_metric([api, err], n)
            yield c
            h = HistogramMetricFamily("tenure_request_seconds", "Time from a request's decoding to its response "
                                      "(parked JoinGroup/SyncGroup included)", labels=["api"])
            for api, hist in sorted(m.request_seconds.items()):
                h.add_metric([api], hist.cumulative(), hist.sum)
            yield h
            c = CounterMetricFamily("tenure_faults_injected", "Requests an injected fault applied to",
                                    labels=["api", "action"])
            for (api, action), n in sorted(m.faults.items()):
                c.add_metric([api, action], n)
            yield c
            c = CounterMetricFamily("tenure_rebalances", "Rebalances started, by group and cause",
                                    labels=["group", "cause"])
            for (grp, cause), n in sorted(m.rebalances.items()):
                c.add_metric([grp, cause], n)
            yield c
            c = CounterMetricFamily("tenure_static_member_events", "Static-member events written, by group and "
                                    "cause", labels=["group", "cause"])
            for (grp, cause), n in sorted(m.static_events.items()):
                c.add_metric([grp, cause], n)
            yield c
            c = CounterMetricFamily("tenure_fenced_instances", "Requests answered FENCED_INSTANCE_ID (82) or "
                                    "parked requests of a replaced static member, by group", labels=["group"])
            for grp, n in sorted(m.fenced.items()):
                c.add_metric([grp], n)
            yield c
            gs = GaugeMetricFamily("tenure_groups", "Groups by state", labels=["state"])
            states = Counter(g.state for g in server.coordinator.groups.values())
            for state, n in sorted(states.items()):
                gs.add_metric([state], n)
            yield gs
            gm = GaugeMetricFamily("tenure_group_members", "Members of each group (static ones too)",
                                   labels=["group", "kind"])
            for gid, grp in sorted(server.coordinator.groups.items()):
                static = sum(1 for mem in grp.members.values() if mem.group_instance_id is not None)
                gm.add_metric([gid, "static"], static)
                gm.add_metric([gid, "dynamic"], len(grp.members) - static)
            yield gm
            ls = GaugeMetricFamily("tenure_log_size_bytes", "Bytes in each partition's log",
                                   labels=["topic", "partition"])
            le = GaugeMetricFamily("tenure_log_end_offset", "Each partition's log end offset",
                                   labels=["topic", "partition"])
            for topic in server.topics.all():
                for i, plog in enumerate(topic.partitions):
                    ls.add_metric([topic.name, str(i)], getattr(plog, "size_bytes", 0))
                    le.add_metric([topic.name, str(i)], plog.log_end_offset)
            yield ls
            yield le
            f = HistogramMetricFamily("tenure_fsync_seconds", "Duration of each fsync (group commit) of the "
                                      "data dir's logs")
            f.add_metric([], m.fsync_seconds.cumulative(), m.fsync_seconds.sum)
            yield f
            up = GaugeMetricFamily("tenure_start_time_seconds", "When this server process started (unix time)")
            up.add_metric([], m.started)
            yield up

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return generate_latest(registry)
