"""The Prometheus rendering of what the server counts (`GET /metrics`): the counters themselves
(`tenure.counters.Metrics`) in Prometheus' text format with prometheus_client (a collector of our own over a
registry of our own, so several servers in one process do not share a global registry)."""
from __future__ import annotations

from collections import Counter

from tenure.counters import Metrics


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
            # each group as its kind describes it (tenure/inspection.py GroupInfo), whatever the kind
            infos = [server.runtime.group_info(gid) for gid in server.runtime.group_ids()]
            groups = {i.group_id: i for i in infos if i is not None}
            yield family(GaugeMetricFamily, "tenure_groups", "Groups by state", ["state"],
                         keyed(Counter(g.state for g in groups.values())))
            members = []
            for gid, grp in sorted(groups.items()):
                static = sum(1 for mem in grp.members if mem.is_static)
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
