"""The anomaly kinds on crafted logs, each with a near miss that must not fire: concurrent member ids (over
time and in one snapshot), rebalance storms, repeated expiry, instance churn; and --since/--until."""
import pytest

from tenure.audit import job
from tenure.protocol import records as rec
from tenure.storage.compaction import CompactionPolicy, Compactor

from .logs import T0, Writer, ev, gm

K, WINDOW, EXPIRY_N, CHURN_N = 3, 1000, 3, 4
SPAN = 100_000                                   # each group's records in its own stretch of time


def opts(tmp, **kw):
    return job.Options(str(tmp), str(tmp / "out"), storm_k=K, storm_window_ms=WINDOW, expiry_n=EXPIRY_N,
                       churn_n=CHURN_N, **kw)


def write(w: Writer) -> dict:
    """Every case; returns the offsets the tests check against."""
    at: dict = {}

    def put(name, record, ts):
        at[name] = w.add(record, ts)

    # a second member id joins instance i while m1 is mapped; m1 expires only later
    g, t = "overlap-time", T0
    put("ot.j1", ev(g, "i", rec.JOINED, None, "m1", t), t)
    put("ot.s1", gm(g, 1, [("m1", "i")], t + 1), t + 1)
    put("ot.j2", ev(g, "i", rec.JOINED, None, "m2", t + 2), t + 2)
    put("ot.x1", ev(g, "i", rec.EXPIRED, "m1", None, t + 3), t + 3)
    put("ot.s2", gm(g, 2, [("m2", "i")], t + 4), t + 4)
    # a snapshot written after m2 joined still maps i to m1
    g, t = "overlap-stale", T0 + SPAN
    put("os.s1", gm(g, 1, [("m1", "i")], t), t)
    put("os.j2", ev(g, "i", rec.JOINED, None, "m2", t + 1), t + 1)
    put("os.s1b", gm(g, 1, [("m1", "i")], t + 2), t + 2)
    put("os.s2", gm(g, 2, [("m2", "i")], t + 3), t + 3)
    # one snapshot maps i to two member ids
    g, t = "overlap-snapshot", T0 + 2 * SPAN
    put("oo.s1", gm(g, 1, [("m1", "i"), ("m2", "i")], t), t)
    # near miss for all three and for churn/expiry: replacements, an expiry then a join, a leave - never
    # two ids at once; CHURN_N - 1 ids for i, EXPIRY_N - 2 expiries of i (a leave is not an expiry)
    g, t, d = "calm", T0 + 3 * SPAN, WINDOW                  # generations WINDOW apart: no storm either
    put("c.j1", ev(g, "i", rec.JOINED, None, "a1", t), t)
    put("c.s1", gm(g, 1, [("a1", "i"), ("b1", "k")], t + 1), t + 1)
    put("c.r2", ev(g, "i", rec.REPLACED, "a1", "a2", t + 2), t + 2)
    put("c.s2", gm(g, 1, [("a2", "i"), ("b1", "k")], t + 3), t + 3)
    put("c.x2", ev(g, "i", rec.EXPIRED, "a2", None, t + 4), t + 4)
    put("c.xk", ev(g, "k", rec.SYNC_EXPIRED, "b1", None, t + 5), t + 5)
    put("c.s3", gm(g, 2, [], t + d), t + d)
    put("c.j3", ev(g, "i", rec.JOINED, None, "a3", t + d + 1), t + d + 1)
    put("c.s4", gm(g, 3, [("a3", "i")], t + 2 * d), t + 2 * d)
    put("c.x3", ev(g, "i", rec.LEFT, "a3", None, t + 2 * d + 1), t + 2 * d + 1)
    put("c.s5", gm(g, 4, [], t + 3 * d), t + 3 * d)
    # churn: CHURN_N member ids for i by replacements, one interval each
    g, t = "churny", T0 + 4 * SPAN
    for n in range(1, CHURN_N + 1):
        put(f"ch.e{n}", ev(g, "i", rec.JOINED if n == 1 else rec.REPLACED, None if n == 1 else f"c{n - 1}",
                           f"c{n}", t + 2 * n), t + 2 * n)
        put(f"ch.s{n}", gm(g, 1, [(f"c{n}", "i")], t + 2 * n + 1), t + 2 * n + 1)
    # repeated expiry: i expires EXPIRY_N times (the three expiry causes); k once; j leaves/removed (not expiry)
    g, t, d = "expiring", T0 + 5 * SPAN, 2 * WINDOW          # EXPIRY_N ids < CHURN_N; no storm
    causes = [rec.EXPIRED, rec.SYNC_EXPIRED, rec.REGISTRATION_EXPIRED]
    for n in range(EXPIRY_N):
        put(f"x.j{n}", ev(g, "i", rec.JOINED, None, f"e{n}", t + d * n), t + d * n)
        put(f"x.s{n}", gm(g, 2 * n + 1, [(f"e{n}", "i")], t + d * n + 1), t + d * n + 1)
        put(f"x.x{n}", ev(g, "i", causes[n % 3], f"e{n}", None, t + d * n + 2), t + d * n + 2)
        put(f"x.t{n}", gm(g, 2 * n + 2, [], t + d * n + WINDOW), t + d * n + WINDOW)
    put("x.k", ev(g, "k", rec.EXPIRED, "f1", None, t + 50), t + 50)               # k expires once
    put("x.l", ev(g, "j", rec.LEFT, "h1", None, t + 51), t + 51)                  # j leaves ...
    put("x.r", ev(g, "j", rec.REMOVED, "h2", None, t + 52), t + 52)               # ... and is removed
    # a storm: K + 1 generations, the first and the last exactly WINDOW ms apart (the window is inclusive)
    g, t = "storm", T0 + 6 * SPAN
    for n, dt in enumerate([0, 250, 500, WINDOW]):
        put(f"st.{n}", gm(g, n + 1, [("s1", None)], t + dt), t + dt)
    # near miss: K + 1 generations over WINDOW + 1 ms (at most K in any window), and K in a burst
    g, t = "breeze", T0 + 7 * SPAN
    for n, dt in enumerate([0, 334, 667, WINDOW + 1]):
        put(f"br.{n}", gm(g, n + 1, [("b1", None)], t + dt), t + dt)
    for n, dt in enumerate([10 * WINDOW, 10 * WINDOW + 1, 10 * WINDOW + 2]):
        put(f"br.b{n}", gm(g, n + 5, [("b1", None)], t + dt), t + dt)
    return at


@pytest.fixture(scope="module")
def crafted(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("anomalies")
    w = Writer(tmp, 0)
    at = write(w)
    w.close()
    tables, _ = job.build(spark, opts(tmp))
    return tmp, at, tables


def by_kind(tables) -> dict:
    out: dict = {}
    for r in tables["anomalies"].collect():
        out.setdefault(r["kind"], {})[(r["group"], r["instance_id"])] = r.asDict()
    return out


def test_every_kind_fires_exactly_where_crafted(crafted):
    _, _, tables = crafted
    got = {k: sorted(v) for k, v in by_kind(tables).items()}
    assert got == {
        "concurrent_member_ids": [("overlap-snapshot", "i"), ("overlap-stale", "i"), ("overlap-time", "i")],
        "instance_churn": [("churny", "i")],
        "repeated_expiry": [("expiring", "i")],
        "rebalance_storm": [("storm", None)],
    }
    assert tables["errors"].count() == 0


def test_concurrent_member_ids_over_time_and_in_one_snapshot(crafted):
    _, at, tables = crafted
    a = by_kind(tables)["concurrent_member_ids"]
    assert a[("overlap-time", "i")]["count"] == 1
    assert a[("overlap-time", "i")]["detail"] == (
        f"member ids mapped at once: m1+m2 at offsets {at['ot.j2']}..{at['ot.x1'] - 1}")
    assert a[("overlap-time", "i")]["first_time"] == T0 + 2
    assert a[("overlap-stale", "i")]["detail"] == (
        f"member ids mapped at once: m1+m2 at offsets {at['os.j2']}..{at['os.s1b']}")
    assert a[("overlap-snapshot", "i")]["detail"] == (
        f"member ids mapped at once: m1+m2 at offsets {at['oo.s1']}..{at['oo.s1']}")
    # member_map_history shows both intervals of each overlap
    h = {(r["group"], r["member_id"]): r for r in tables["member_map_history"].collect()
         if r["group"].startswith("overlap")}
    m1, m2 = h[("overlap-time", "m1")], h[("overlap-time", "m2")]
    assert (m1["valid_from_offset"], m1["valid_to_offset"], m1["start_cause"], m1["end_cause"]) == (
        at["ot.j1"], at["ot.x1"], "joined", "expired")
    assert (m2["valid_from_offset"], m2["valid_to_offset"], m2["start_cause"], m2["end_cause"]) == (
        at["ot.j2"], None, "joined", None)
    s1, s2 = h[("overlap-snapshot", "m1")], h[("overlap-snapshot", "m2")]
    assert s1["valid_to_offset"] is None and s2["valid_to_offset"] is None
    assert s1["valid_from_offset"] == s2["valid_from_offset"] == at["oo.s1"]
    st1 = h[("overlap-stale", "m1")]
    assert (st1["last_seen_offset"], st1["valid_to_offset"], st1["end_cause"]) == (at["os.s1b"], at["os.s2"],
                                                                                      "unknown")


def test_storm_churn_and_expiry_counts(crafted):
    _, _, tables = crafted
    a = by_kind(tables)
    storm = a["rebalance_storm"][("storm", None)]
    assert (storm["count"], storm["first_time"], storm["last_time"]) == (K + 1, T0 + 6 * SPAN + WINDOW,
                                                                         T0 + 6 * SPAN + WINDOW)
    churn = a["instance_churn"][("churny", "i")]
    assert churn["count"] == CHURN_N
    expiry = a["repeated_expiry"][("expiring", "i")]
    assert (expiry["count"], expiry["first_time"], expiry["last_time"]) == (
        EXPIRY_N, T0 + 5 * SPAN + 2, T0 + 5 * SPAN + 2 * WINDOW * (EXPIRY_N - 1) + 2)


def test_compaction_makes_no_overlap(spark, tmp_path):
    """Rolling restarts, expiries and rejoins of four instances, the older half compacted (most events and
    snapshots superseded away, so many causes are unknown and snapshots stand in): no overlap is made up."""
    w = Writer(tmp_path, 0, segment_bytes=600)
    g, t, gen, ids = "rolling", T0, 0, {}
    written = 0
    for rnd in range(12):
        for n in range(4):
            iid, new = f"i{n}", f"i{n}-{rnd}"
            t += 100
            if rnd % 5 == 4 and n == 1:                   # i1 expires and comes back in the next snapshot
                w.add(ev(g, iid, rec.EXPIRED, ids.pop(iid), None, t), t)
                w.add(gm(g, gen := gen + 1, [(m, i) for i, m in sorted(ids.items())], t + 1), t + 1)
                w.add(ev(g, iid, rec.JOINED, None, new, t + 2), t + 2)
                written += 2
            else:
                w.add(ev(g, iid, rec.REPLACED if iid in ids else rec.JOINED, ids.get(iid), new, t), t)
                written += 1
            ids[iid] = new
            w.add(gm(g, gen := gen + 1, [(m, i) for i, m in sorted(ids.items())], t + 50), t + 50)
    end = t
    w.log.roll()
    st = Compactor(clock_ms=lambda: end).clean_fully(
        w.log, CompactionPolicy(delete_retention_ms=0, min_compaction_lag_ms=(end - T0) // 2))
    assert st.groups_cleaned
    w.close()
    tables, _ = job.build(spark, opts(tmp_path))
    assert 0 < tables["static_events"].count() < written            # events were compacted away
    h = tables["member_map_history"].collect()
    assert {r["start_cause"] for r in h} >= {"unknown", "replaced"}    # causes lost and kept
    assert len(h) > 4 * 6
    assert tables["anomalies"].filter("kind = 'concurrent_member_ids'").count() == 0
    # the fold still ends where the coordinator is
    assert {r["instance_id"]: r["member_id"] for r in h if r["valid_to_offset"] is None} == ids


def test_since_until_window_the_anomalies(crafted, spark):
    tmp, _, _ = crafted
    tables, _ = job.build(spark, opts(tmp, since=T0 + 4 * SPAN, until=T0 + 6 * SPAN))
    got = {k: sorted(v) for k, v in by_kind(tables).items()}
    assert got == {"instance_churn": [("churny", "i")], "repeated_expiry": [("expiring", "i")]}
    tables, _ = job.build(spark, opts(tmp, since=T0 + 6 * SPAN))
    assert {k: sorted(v) for k, v in by_kind(tables).items()} == {"rebalance_storm": [("storm", None)]}
    # the storm's first generation is before the window: within it there are only K
    tables, _ = job.build(spark, opts(tmp, since=T0 + 6 * SPAN + 1, until=T0 + 7 * SPAN))
    assert by_kind(tables) == {}
