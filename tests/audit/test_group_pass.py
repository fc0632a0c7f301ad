"""The per-group pass's anomaly rules (`tenure.audit.fold.group_anomalies`), without Spark, against their
definitions written the slow way: every pair of intervals for `concurrent_member_ids` (the sweep over
intervals sorted by start must find exactly the pairs that overlap), every generation's window for
`rebalance_storm`, and the --since/--until window's edges."""
from __future__ import annotations

import random

from tenure.audit import fold
from tenure.protocol import records as rec

H = {n: i for i, n in enumerate(fold.HISTORY_FIELDS)}


def interval(iid, mid, start, end, cause, *, part=0, last_seen=None, t=None):
    row = dict.fromkeys(fold.HISTORY_FIELDS)
    row.update(group="g", instance_id=iid, member_id=mid, log_partition=part, valid_from_offset=start,
               valid_from_time=1000 * start if t is None else t, valid_to_offset=end, end_cause=cause,
               valid_to_time=None if end is None else 1000 * end, start_cause=rec.JOINED,
               last_seen_offset=start if last_seen is None else last_seen)
    return tuple(row[f] for f in fold.HISTORY_FIELDS)


def pairs_slowly(hist, checks):
    """The definition: two member ids of one instance in one partition, each certain over [from, end)
    (end: the end event's offset, else last_seen_offset + 1), whose stretches overlap."""
    def end(h):
        return h[H["valid_to_offset"]] if h[H["end_cause"]] in fold.END_CAUSES else h[H["last_seen_offset"]] + 1
    found = {}
    for a in hist:
        for b in hist:
            if (a[H["instance_id"]] != b[H["instance_id"]] or a[H["log_partition"]] != b[H["log_partition"]]
                    or not a[H["member_id"]] < b[H["member_id"]]):
                continue
            lo, hi = max(a[H["valid_from_offset"]], b[H["valid_from_offset"]]), min(end(a), end(b))
            t = max(a[H["valid_from_time"]], b[H["valid_from_time"]])
            if lo < hi and checks.keeps(t):
                found.setdefault(a[H["instance_id"]], []).append(
                    (t, f"{a[H['member_id']]}+{b[H['member_id']]} at offsets {lo}..{hi - 1}"))
    return {iid: (len(ps), min(t for t, _ in ps), max(t for t, _ in ps), sorted(p for _, p in ps))
            for iid, ps in found.items()}


def concurrent(hist, checks):
    return {a[2]: (a[3], a[4], a[5], a[6].removeprefix("member ids mapped at once: ").split("; "))
            for a in fold.group_anomalies("g", hist, [], [], checks) if a[0] == "concurrent_member_ids"}


def test_the_sweep_finds_exactly_the_overlapping_pairs():
    rnd = random.Random(7)
    causes = [rec.REPLACED, rec.EXPIRED, rec.LEFT, fold.UNKNOWN, fold.GROUP_DELETED, None]
    for trial in range(300):
        hist = []
        for _ in range(rnd.randint(0, 12)):
            start = rnd.randint(0, 40)
            cause = rnd.choice(causes)
            end = None if cause is None else start + rnd.randint(0, 15)
            hist.append(interval(rnd.choice("ab"), f"m{rnd.randint(0, 6)}", start, end, cause,
                                 part=rnd.randint(0, 1), last_seen=start + rnd.randint(0, 10)))
        checks = fold.Checks(since=rnd.choice([None, 10_000]), until=rnd.choice([None, 30_000]))
        assert concurrent(hist, checks) == pairs_slowly(hist, checks), (trial, hist)


def test_a_replacement_is_no_overlap_and_a_stale_member_id_is():
    replaced = [interval("i", "m1", 0, 5, rec.REPLACED), interval("i", "m2", 5, None, None, last_seen=9)]
    assert concurrent(replaced, fold.Checks()) == {}
    stale = [interval("i", "m1", 0, None, fold.UNKNOWN, last_seen=6), interval("i", "m2", 5, None, None, last_seen=9)]
    assert concurrent(stale, fold.Checks()) == {"i": (1, 5000, 5000, ["m1+m2 at offsets 5..6"])}


def storms_slowly(times, checks):
    ns = [(sum(1 for u in times if t - checks.storm_window_ms <= u <= t), t) for t in times]
    ns = [(n, t) for n, t in ns if n > checks.storm_k]
    return (max(n for n, _ in ns), min(t for _, t in ns), max(t for _, t in ns)) if ns else None


def test_storms_count_the_window_before_each_generation_and_its_peers():
    rnd = random.Random(11)
    for trial in range(200):
        times = [rnd.randint(0, 20) * 1000 for _ in range(rnd.randint(0, 15))]
        gens = [("g", n, t) + (None,) * 12 for n, t in enumerate(times)]
        gens.append(("g", None, 5000) + (None,) * 12)             # a deletion: no rebalance
        checks = fold.Checks(storm_k=rnd.randint(1, 5), storm_window_ms=rnd.choice([0, 3000, 10_000]))
        got = [a[3:6] for a in fold.group_anomalies("g", [], gens, [], checks) if a[0] == "rebalance_storm"]
        want = storms_slowly(times, checks)
        assert got == ([] if want is None else [want]), (trial, times, checks)


def test_the_window_keeps_open_intervals_and_those_ending_inside_it():
    checks = fold.Checks(since=10_000, until=20_000)
    assert checks.keeps_interval(interval("i", "m", 1, None, None))            # open: still mapped at --since
    assert checks.keeps_interval(interval("i", "m", 1, 10, rec.LEFT))          # ends at --since
    assert not checks.keeps_interval(interval("i", "m", 1, 9, rec.LEFT))       # ended before it
    assert not checks.keeps_interval(interval("i", "m", 20, None, None))       # starts at --until
    assert checks.keeps(10_000) and not checks.keeps(20_000) and not checks.keeps(None)
    assert fold.Checks().keeps(None)
