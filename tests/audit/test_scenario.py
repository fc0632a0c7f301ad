"""A scripted scenario against the real server (in-process, on a data dir) with real confluent-kafka static
consumers; the test records the ground truth from the server itself, then the audit's tables must match it
exactly.

Steps (group "g", topic "orders"): A and B join statically; C joins with a short session; A is restarted
(rolling restart: replaced), then B; a second process D starts with B's instance id (replaced, and the
running B is fenced); C is stopped without a LeaveGroup (a static member sends none) and its session
expires; A is stopped and removed by an admin (LeaveGroup v3+ naming inst-a with member id "", what
removeMembersFromConsumerGroup sends); a forced rebalance of the remaining static group.

The truth, none of it read from the log:
- `Truth.persisted`: the coordinator's own state (generation, state, leader, members, instance map) each
  time it persisted group "g" (an observer on the runtime's apply, on the server's loop), with the step
  running then and the server's clock. The generations and the member-map intervals follow from it.
- the server's metrics counters: static-member events per cause, fenced requests.
- the member ids and generations read from the server's state after each step, and the wall-clock
  bounds of each step.
"""
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer.group import LeaveGroupRequest

from tenure.audit import job
from tenure.config import ServerConfig
from tenure.protocol import records as rec
from tenure.server import ServerThread
from tests.support.groups import GroupMember, group_view, wait_for
from tests.support.wire import WireClient

G, TOPIC = "g", "orders"
# the generation each step starts, by the audit's trigger rule (the causes of the static events since
# the previous GroupMetadata record)
TRIGGER = {"join A, B": "joined", "join C": "joined", "expire C": "expired", "remove A": "removed",
           "force": "forced_rebalance"}


@dataclass
class Truth:
    persisted: list = field(default_factory=list)     # dicts: step, time, generation, state, leader, members, static
    steps: dict = field(default_factory=dict)          # step -> (wall ms at start, wall ms at end)
    ids: dict = field(default_factory=dict)            # a1, b1, ... -> member id
    step: str = ""
    events: dict = field(default_factory=dict)        # cause -> count (server metrics)
    fenced: int = 0
    final: tuple = ()


def observe(s, truth: Truth) -> None:
    """On the server's loop: wrap the runtime's apply; after every result that persists group G's
    GroupMetadata, record the coordinator's state of G."""
    rt = s.server.runtime
    inner = rt.apply

    def apply(result, **how):
        inner(result, **how)
        if any(isinstance(r, rec.GroupMetadataRecord) and r.group_id == G for r in result.records):
            g = rt.group(G)
            truth.persisted.append(dict(
                step=truth.step, time=rt.clock_ms(), generation=g.generation, state=g.state,
                leader=g.leader_id, members={mid: m.group_instance_id for mid, m in g.members.items()},
                static=dict(g.static_members)))
    rt.apply = apply


class Steps:
    def __init__(self, truth: Truth) -> None:
        self.truth = truth

    def __call__(self, name: str):
        self.name = name
        return self

    def __enter__(self):
        self.truth.step = self.name
        self.truth.steps[self.name] = (int(time.time() * 1000), None)
        return self

    def __exit__(self, *exc):
        self.truth.steps[self.name] = (self.truth.steps[self.name][0], int(time.time() * 1000))
        self.truth.step = f"after {self.name}"


def stable_with(s, static: set[str]) -> dict:
    """Wait until g is Stable with exactly these instance ids mapped; the group's view then."""
    def ok():
        v = group_view(s, G)
        return v if v and v["state"] == "Stable" and set(v["static"]) == static else None
    return wait_for(ok, 30, f"g stable with {sorted(static)}")


def member(s, iid: str, session_ms: int = 6000) -> GroupMember:
    return GroupMember("confluent", s.bootstrap, G, TOPIC, iid, name=iid, session_timeout_ms=session_ms,
                       heartbeat_interval_ms=200).start()


def scenario(data_dir) -> Truth:
    truth = Truth()
    step = Steps(truth)
    ids = truth.ids
    with ServerThread(ServerConfig(port=0, data_dir=str(data_dir), min_session_timeout_ms=1000)) as s:
        s.call(observe, s, truth)
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
        with step("join A, B"):
            a, b = member(s, "inst-a"), member(s, "inst-b")
            stable_with(s, {"inst-a", "inst-b"})
        with step("join C"):
            c = member(s, "inst-c", session_ms=1500)
            v = stable_with(s, {"inst-a", "inst-b", "inst-c"})
        ids["a1"], ids["b1"], ids["c1"] = v["static"]["inst-a"], v["static"]["inst-b"], v["static"]["inst-c"]
        # rolling restart of A, then of B: the new process joins with member id "" and replaces the old one
        with step("restart A"):
            a.stop()
            a = member(s, "inst-a")
            v = wait_for(lambda: (x := stable_with(s, {"inst-a", "inst-b", "inst-c"}))["static"]["inst-a"]
                         != ids["a1"] and x, 30, "A replaced")
        ids["a2"] = v["static"]["inst-a"]
        with step("restart B"):
            b.stop()
            b = member(s, "inst-b")
            v = wait_for(lambda: (x := stable_with(s, {"inst-a", "inst-b", "inst-c"}))["static"]["inst-b"]
                         != ids["b1"] and x, 30, "B replaced")
            b.wait_assigned()
        ids["b2"] = v["static"]["inst-b"]
        # a duplicate instance: D starts with B's instance id while B runs; B is fenced at its next request
        with step("duplicate D"):
            d = member(s, "inst-b")
            v = wait_for(lambda: (x := stable_with(s, {"inst-a", "inst-b", "inst-c"}))["static"]["inst-b"]
                         != ids["b2"] and x, 30, "D replacing B")
            wait_for(lambda: any("fenced" in str(e).lower() for e in b.errors), 30, "B to be fenced")
            b.stop()
        ids["d1"] = v["static"]["inst-b"]
        # session expiry: C's process goes away without a LeaveGroup (static), its 1.5 s session runs out
        with step("expire C"):
            c.stop()
            stable_with(s, {"inst-a", "inst-b"})
        # admin removal of inst-a (its process stopped first, so it does not rejoin)
        a.stop()
        with step("remove A"):
            M = LeaveGroupRequest.MemberIdentity
            with WireClient.to(s.bootstrap) as w:
                resp = w.call(LeaveGroupRequest(version=4, group_id=G, members=[
                    M(version=4, member_id="", group_instance_id="inst-a")]), 4)
            assert resp.error_code == 0 and [m.error_code for m in resp.members] == [0]
            v = stable_with(s, {"inst-b"})
        removed_gen = v["generation"]
        # a forced rebalance of the (all static) group
        with step("force"):
            s.force_rebalance(G)
            v = wait_for(lambda: (x := stable_with(s, {"inst-b"}))["generation"] > removed_gen and x,
                         30, "the forced rebalance")
        truth.final = (v["generation"], dict(v["static"]))
        d.stop()
        m = s.server.metrics
        truth.events = {cause: n for (g, cause), n in m.static_events.items() if g == G}
        truth.fenced = m.fenced[G]
    return truth


def generations_of(truth: Truth) -> list[dict]:
    """Each generation the coordinator persisted, at its first persisted state."""
    out = []
    for p in truth.persisted:
        if not out or p["generation"] != out[-1]["generation"]:
            out.append(p)
    return out


def intervals_of(truth: Truth) -> list[tuple]:
    """(instance, member id, from generation, to generation) of every pair in the persisted instance map,
    from the first persisted state holding it to the first not holding it (None: still held at the end)."""
    out, open_ = [], {}
    for p in truth.persisted:
        pairs = set(p["static"].items())
        for pair in sorted(set(open_) - pairs):
            out.append((*pair, open_.pop(pair), p["generation"]))
        for pair in sorted(pairs - set(open_)):
            open_[pair] = p["generation"]
    return sorted(out + [(*pair, gen, None) for pair, gen in open_.items()])


def test_the_audit_matches_the_scenarios_ground_truth(spark, tmp_path):
    truth = scenario(tmp_path / "data")
    t = truth.ids
    opts = job.Options(str(tmp_path / "data"), str(tmp_path / "out"), storm_k=1000)   # storms: test_anomalies
    code, summary = job.run(opts, spark=spark)
    assert code == 0 and summary["errors"] == 0
    out = tmp_path / "out"
    page = (out / "report.html").read_text(encoding="utf-8")
    for iid in ("inst-a", "inst-b", "inst-c"):                  # a timeline lane per instance id
        assert f'id="lane-{G}-{iid}"' in page and f'id="instance-{G}-{iid}"' in page
    read = lambda name: [r.asDict() for r in spark.read.parquet(str(out / name)).collect()]  # noqa: E731

    # ---- static events: exactly the server's counts per cause, with the member ids of each step
    events = sorted((e for e in read("static_events") if e["group"] == G), key=lambda e: e["log_offset"])
    by_cause: dict[str, list] = {}
    for e in events:
        by_cause.setdefault(e["cause"], []).append((e["instance_id"], e["old_member_id"], e["new_member_id"]))
    assert {c: len(v) for c, v in by_cause.items()} == truth.events
    assert sorted(by_cause["joined"]) == sorted([("inst-a", None, t["a1"]), ("inst-b", None, t["b1"]),
                                                 ("inst-c", None, t["c1"])])
    assert by_cause["replaced"] == [("inst-a", t["a1"], t["a2"]), ("inst-b", t["b1"], t["b2"]),
                                    ("inst-b", t["b2"], t["d1"])]
    assert by_cause["expired"] == [("inst-c", t["c1"], None)]
    assert by_cause["removed"] == [("inst-a", t["a2"], None)]
    assert by_cause["forced_rebalance"] == [("inst-b", t["d1"], t["d1"])]
    assert by_cause["fenced"] == [("inst-b", t["b2"], t["d1"])] * truth.fenced and truth.fenced >= 1
    assert set(by_cause) == {"joined", "replaced", "expired", "removed", "forced_rebalance", "fenced"}
    # each step's events happened during that step (server clock vs. the test's wall clock)
    step_of_cause = {"expired": "expire C", "removed": "remove A", "forced_rebalance": "force"}
    for e in events:
        step = step_of_cause.get(e["cause"])
        if e["cause"] == "replaced":
            step = {t["a2"]: "restart A", t["b2"]: "restart B", t["d1"]: "duplicate D"}[e["new_member_id"]]
        if step is not None:
            lo, hi = truth.steps[step]
            assert lo <= e["event_time"] <= hi, (e, step)
    assert [e["log_offset"] for e in events] == sorted({e["log_offset"] for e in events})

    # ---- generations: exactly the ones the coordinator persisted, with their members, leader and trigger
    gens = sorted((r for r in read("generations") if r["group"] == G), key=lambda r: r["log_offset"])
    expected = generations_of(truth)
    assert [r["generation"] for r in gens] == [p["generation"] for p in expected]
    for r, p in zip(gens, expected):
        assert {m["member_id"]: m["instance_id"] for m in r["members"]} == p["members"], r["generation"]
        assert (r["member_count"], r["leader"]) == (len(p["members"]), p["leader"])
        assert r["trigger"] == TRIGGER[p["step"]], (r["generation"], p["step"])
    assert [p["step"] for p in expected if p["step"] not in ("join A, B", "join C")] == [
        "expire C", "remove A", "force"]                  # restarts and the duplicate rebalance nothing
    last = gens[-1]
    assert (last["generation"], {m["instance_id"]: m["member_id"] for m in last["members"]}) == truth.final

    # ---- member_map_history: every interval with its causes and generations; offsets and times follow
    # the static events exactly
    history = sorted((r for r in read("member_map_history") if r["group"] == G),
                     key=lambda r: (r["instance_id"], r["valid_from_offset"]))
    got = sorted((r["instance_id"], r["member_id"], r["start_cause"], r["end_cause"], r["from_generation"],
                  r["to_generation"]) for r in history)
    causes = {t["a1"]: ("joined", "replaced"), t["a2"]: ("replaced", "removed"),
              t["b1"]: ("joined", "replaced"), t["b2"]: ("replaced", "replaced"), t["d1"]: ("replaced", None),
              t["c1"]: ("joined", "expired")}
    assert got == sorted((iid, mid, *causes[mid], fg, tg) for iid, mid, fg, tg in intervals_of(truth))
    start_ev = {e[2]: ev for e, ev in zip(
        [(x["instance_id"], x["old_member_id"], x["new_member_id"]) for x in events], events)
        if ev["cause"] in ("joined", "replaced")}
    end_ev = {ev["old_member_id"]: ev for ev in events
              if ev["cause"] in ("replaced", "expired", "removed")}
    for r in history:
        s_ev = start_ev[r["member_id"]]
        assert (r["valid_from_offset"], r["valid_from_time"]) == (s_ev["log_offset"], s_ev["event_time"])
        assert r["snapshot_from_offset"] > r["valid_from_offset"]
        if r["end_cause"] is None:
            assert r["valid_to_offset"] is r["valid_to_time"] is r["snapshot_to_offset"] is None
        else:
            e_ev = end_ev[r["member_id"]]
            assert (r["valid_to_offset"], r["valid_to_time"]) == (e_ev["log_offset"], e_ev["event_time"])
            assert r["valid_from_offset"] < r["valid_to_offset"] < r["snapshot_to_offset"]
            assert r["valid_from_time"] <= r["valid_to_time"]
    for iid in ("inst-a", "inst-b"):                      # one instance's intervals follow each other
        rows = [r for r in history if r["instance_id"] == iid]
        for prev, nxt in zip(rows, rows[1:]):
            assert prev["end_cause"] == nxt["start_cause"] == "replaced"
            assert prev["valid_to_offset"] == nxt["valid_from_offset"]            # the one replaced event
            assert prev["to_generation"] == nxt["from_generation"]
            assert prev["snapshot_to_offset"] == nxt["snapshot_from_offset"]

    # ---- anomalies: the fenced duplicate, counted as the server counted it; nothing else
    anomalies = [r for r in read("anomalies")]
    assert [(r["kind"], r["group"], r["instance_id"], r["count"]) for r in anomalies] == [
        ("fenced_duplicate_instance", G, "inst-b", truth.fenced)]

    # ---- the summary
    n_intervals = len(intervals_of(truth))
    ends = [c[1] for c in causes.values() if c[1] is not None]
    by = {}
    for c in [c[0] for c in causes.values()] + ends:
        by[c] = by.get(c, 0) + 1
    assert summary["groups"] == 1 and summary["instances"] == 3
    assert summary["member_ids"] == n_intervals == 6
    assert summary["changes_by_cause"] == by == {"joined": 3, "replaced": 6, "expired": 1, "removed": 1}
    assert summary["events_by_cause"] == truth.events           # the report's counts: the server's counters
    assert summary["generations"] == len(expected)
    assert summary["static_events"] == sum(truth.events.values())
    assert summary["anomalies"] == {"fenced_duplicate_instance": 1}
    assert summary["errors"] == 0 and summary["errors_by_kind"] == {}
