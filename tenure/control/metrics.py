"""What the server counts, as plain data, and its Prometheus rendering (`GET /metrics`).

`Metrics` is a set of plain counters the server, the runtime and the log update as things happen; tests
read them directly (`server.metrics.rebalances`), the admin endpoint renders them in Prometheus' text
format with prometheus_client (a collector of our own over a registry of our own, so several servers in
one process do not share a global registry). One `Metrics` lives as long as the process's server, across
in-process restarts (`ServerThread.restart`), like a JVM's metrics across a broker's reload.
"""
from __future__ import annotations

import time
from collections import Counter

# request latency buckets (seconds) and fsync latency buckets
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


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
        self.accept_errors = 0                                        # accept() failures (EMFILE, ...)
        self.faults: Counter[tuple[str, str]] = Counter()             # (api, action) -> injected
        self.rebalances: Counter[tuple[str, str]] = Counter()         # (group, cause) -> rebalances started
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

    def rebalance(self, group: str, cause: str) -> None:
        self.rebalances[(group, cause)] += 1

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

    def family(cls, name: str, doc: str, labels: list[str], rows) -> object:
        """A metric family from (label values, value) rows."""
        fam = cls(name, doc, labels=labels)
        for values, v in rows:
            fam.add_metric(list(values), v)
        return fam

    def histograms(name: str, doc: str, labels: list[str], rows) -> object:
        fam = HistogramMetricFamily(name, doc, labels=labels)
        for values, hist in rows:
            fam.add_metric(list(values), hist.cumulative(), hist.sum)
        return fam

    def keyed(counter) -> list:
        return [(k if isinstance(k, tuple) else (k,), n) for k, n in sorted(counter.items())]

    class Collector:
        def collect(self):
            yield family(GaugeMetricFamily, "tenure_connections", "Client connections open now", [],
                         [((), m.connections_open)])
            yield family(CounterMetricFamily, "tenure_connections_accepted", "Client connections accepted", [],
                         [((), m.connections_total)])
            yield family(CounterMetricFamily, "tenure_connections_closed_by_server",
                         "Connections the server closed (bad input, limits, idle, injected faults)", ["reason"],
                         keyed(m.closed_connections))
            yield family(CounterMetricFamily, "tenure_accept_errors", "accept() calls that failed for want of "
                         "descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)", [], [((), m.accept_errors)])
            yield family(CounterMetricFamily, "tenure_requests", "Responses sent, by API and the first non-zero "
                         "error code in them (NONE if none)", ["api", "error"], keyed(m.requests))
            yield histograms("tenure_request_seconds", "Time from a request's decoding to its response (parked "
                             "JoinGroup/SyncGroup included)", ["api"],
                             [((api,), h) for api, h in sorted(m.request_seconds.items())])
            yield family(CounterMetricFamily, "tenure_faults_injected", "Requests an injected fault applied to",
                         ["api", "action"], keyed(m.faults))
            yield family(CounterMetricFamily, "tenure_rebalances", "Rebalances started, by group and cause",
                         ["group", "cause"], keyed(m.rebalances))
            yield family(CounterMetricFamily, "tenure_static_member_events", "Static-member events written, by "
                         "group and cause", ["group", "cause"], keyed(m.static_events))
            yield family(CounterMetricFamily, "tenure_fenced_instances", "Requests answered FENCED_INSTANCE_ID "
                         "(82) or parked requests of a replaced static member, by group", ["group"], keyed(m.fenced))
            groups = {gid: server.runtime.group(gid) for gid in server.runtime.group_ids()}
            yield family(GaugeMetricFamily, "tenure_groups", "Groups by state", ["state"],
                         keyed(Counter(g.state for g in groups.values())))
            members = []
            for gid, grp in sorted(groups.items()):
                static = sum(1 for mem in grp.members.values() if mem.group_instance_id is not None)
                members += [((gid, "static"), static), ((gid, "dynamic"), len(grp.members) - static)]
            yield family(GaugeMetricFamily, "tenure_group_members", "Members of each group", ["group", "kind"],
                         members)
            logs = [(topic.name, str(i), plog) for topic in server.topics.all()
                    for i, plog in enumerate(topic.partitions)]
            yield family(GaugeMetricFamily, "tenure_log_size_bytes", "Bytes in each partition's log",
                         ["topic", "partition"], [((t, p), lg.size_bytes) for t, p, lg in logs])
            yield family(GaugeMetricFamily, "tenure_log_end_offset", "Each partition's log end offset",
                         ["topic", "partition"], [((t, p), lg.log_end_offset) for t, p, lg in logs])
            yield histograms("tenure_fsync_seconds", "Duration of each fsync (group commit) of the data dir's "
                             "logs", [], [((), m.fsync_seconds)])
            yield family(GaugeMetricFamily, "tenure_start_time_seconds", "When this server process started "
                         "(unix time)", [], [((), m.started)])

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return generate_latest(registry)
