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
