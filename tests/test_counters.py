"""tenure/counters.py: the latency histogram's buckets."""
from __future__ import annotations

from tenure.counters import LATENCY_BUCKETS, Histogram


def test_each_value_lands_in_the_first_bucket_whose_bound_is_at_least_it():
    h = Histogram()
    values = [0.0, 0.0005, 0.00051, 0.001, 0.003, 0.25, 0.2500001, 10.0, 10.5, 1e9]
    for v in values:
        h.observe(v)
    expected = [0] * (len(LATENCY_BUCKETS) + 1)
    for v in values:
        expected[next((i for i, b in enumerate(LATENCY_BUCKETS) if v <= b), len(LATENCY_BUCKETS))] += 1
    assert h.counts == expected and h.count == len(values) and h.sum == sum(values)
    assert h.cumulative()[-1] == ("+Inf", len(values))
    assert dict(h.cumulative())["0.0005"] == 2 and dict(h.cumulative())["10.0"] == 8


def test_a_response_is_counted_by_api_and_error_and_its_latency_in_its_apis_histogram():
    """`Metrics.request` (every response's) counts by (api, error name) - read as the Counter `requests` - and puts
    the latency in the API's histogram, as `Histogram.observe` would."""
    from tenure.counters import Metrics
    m = Metrics()
    calls = [("Heartbeat", "NONE", 0.0004), ("Heartbeat", "NONE", 0.002), ("Heartbeat", "REBALANCE_IN_PROGRESS", 0.3),
             ("Fetch", "NONE", 12.0), ("Heartbeat", "NONE", 0.0005)]
    for api, error, seconds in calls:
        m.request(api, error, seconds)
    assert m.requests == {("Heartbeat", "NONE"): 3, ("Heartbeat", "REBALANCE_IN_PROGRESS"): 1, ("Fetch", "NONE"): 1}
    assert m.requests[("JoinGroup", "NONE")] == 0            # a Counter: what was never answered reads 0
    for api in ("Heartbeat", "Fetch"):
        h = Histogram()
        for a, _, seconds in calls:
            if a == api:
                h.observe(seconds)
        got = m.request_seconds[api]
        assert (got.counts, got.sum, got.count, got.cumulative()) == (h.counts, h.sum, h.count, h.cumulative())
    assert sorted(m.request_seconds) == ["Fetch", "Heartbeat"]


def test_the_responses_are_read_from_another_thread_while_new_apis_and_errors_are_counted():
    import threading

    from tenure.counters import Metrics
    m = Metrics()
    stop = threading.Event()
    reads: list[int] = []

    def read() -> None:
        while not stop.is_set():
            reads.append(sum(m.requests.values()))
    t = threading.Thread(target=read)
    t.start()
    try:
        for i in range(20_000):
            m.request(f"api-{i % 97}", f"error-{i % 13}", 0.001)
    finally:
        stop.set()
        t.join()
    assert sum(m.requests.values()) == 20_000 and reads == sorted(reads) and len(m.requests) == 97 * 13
