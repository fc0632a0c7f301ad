"""A scripted scenario against the real server (in-process, on a data dir) with real confluent-kafka static
consumers; the test records the ground truth from the server's own state after each step, then the audit's
tables must match it exactly.

Steps (group "g", topic "orders"): A and B join statically; C joins with a short session; A is restarted
(rolling restart: replaced), then B; a second process D starts with B's instance id (replaced, and the
running B is fenced); C is stopped without a LeaveGroup (a static member sends none) and its session
expires; A is stopped and removed by an admin (LeaveGroup v3+ naming inst-a with member id "", what
removeMembersFromConsumerGroup sends); a forced rebalance of the remaining static group.
"""
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer.group import LeaveGroupRequest

from tenure.audit import job
from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.groups import GroupMember, group_view, wait_for
from tests.support.wire import WireClient

G, TOPIC = "g", "orders"


def stable_with(s, static: set[str]) -> dict:
    """Wait until g is Stable with exactly these instance ids mapped; the group's view then."""
    def ok():
        v = group_view(s, G)
        return v if v and v["state"] == "Stable" and set(v["static"]) == static else None
    return wait_for(ok, 30, f"g stable with {sorted(static)}")


def member(s, iid: str, session_ms: int = 6000) -> GroupMember:
    return GroupMember("confluent", s.bootstrap, G, TOPIC, iid, name=iid, session_timeout_ms=session_ms,
                       heartbeat_interval_ms=200).start()


def scenario(data_dir) -> dict:
    truth: dict = {"gens": {}}
    with ServerThread(ServerConfig(port=0, data_dir=str(data_dir), min_session_timeout_ms=1000)) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(15)
        a, b = member(s, "inst-a"), member(s, "inst-b")
        v = stable_with(s, {"inst-a", "inst-b"})
        c = member(s, "inst-c", session_ms=1500)
        v = stable_with(s, {"inst-a", "inst-b", "inst-c"})
        truth["a1"], truth["b1"], truth["c1"] = v["static"]["inst-a"], v["static"]["inst-b"], v["static"]["inst-c"]
        # rolling restart of A, then of B: the new process joins with member id "" and replaces the old one
        a.stop()
        a = member(s, "inst-a")
        v = wait_for(lambda: (x := stable_with(s, {"inst-a", "inst-b", "inst-c"}))["static"]["inst-a"] != truth["a1"]
                     and x, 30, "A replaced")
        truth["a2"] = v["static"]["inst-a"]
        b.stop()
        b = member(s, "inst-b")
        v = wait_for(lambda: (x := stable_with(s, {"inst-a", "inst-b", "inst-c"}))["static"]["inst-b"] != truth["b1"]
                     and x, 30, "B replaced")
        truth["b2"] = v["static"]["inst-b"]
        b.wait_assigned()
        # a duplicate instance: D starts with B's instance id while B runs; B is fenced at its next request
        d = member(s, "inst-b")
        v = wait_for(lambda: (x := stable_with(s, {"inst-a", "inst-b", "inst-c"}))["static"]["inst-b"] != truth["b2"]
                     and x, 30, "D replacing B")
        truth["d1"] = v["static"]["inst-b"]
        wait_for(lambda: any("fenced" in str(e).lower() for e in b.errors), 30, "B to be fenced")
        b.stop()
        # session expiry: C's process goes away without a LeaveGroup (static), its 1.5 s session runs out
        c.stop()
        v = stable_with(s, {"inst-a", "inst-b"})
        truth["gens"]["expired"] = v["generation"]
        # admin removal of inst-a (its process stopped first, so it does not rejoin)
        a.stop()
        M = LeaveGroupRequest.MemberIdentity
        with WireClient.to(s.bootstrap) as w:
            resp = w.call(LeaveGroupRequest(version=4, group_id=G, members=[
                M(version=4, member_id="", group_instance_id="inst-a")]), 4)
        assert resp.error_code == 0 and [m.error_code for m in resp.members] == [0]
        v = stable_with(s, {"inst-b"})
        truth["gens"]["removed"] = v["generation"]
        # a forced rebalance of the (all static) group
        s.force_rebalance(G)
        v = wait_for(lambda: (x := stable_with(s, {"inst-b"}))["generation"] > truth["gens"]["removed"] and x,
                     30, "the forced rebalance")
        truth["gens"]["forced_rebalance"] = v["generation"]
        truth["final"] = (v["generation"], dict(v["static"]))
        d.stop()
    return truth


def test_the_audit_matches_the_scenarios_ground_truth(spark, tmp_path):
    truth = scenario(tmp_path / "data")
    code, summary = job.run(job.Options(str(tmp_path / "data"), str(tmp_path / "out")), spark=spark)
    assert code == 0 and summary["errors"] == 0
    out = tmp_path / "out"
    for f in ("report.html", "rebalances.png", "member_id_changes.png", "time_offline.png"):
        assert (out / f).stat().st_size > 0
    read = lambda t: [r.asDict() for r in spark.read.parquet(str(out / t)).collect()]  # noqa: E731

    history = sorted((r["instance_id"], r["member_id"], r["start_cause"], r["end_cause"])
                     for r in read("member_map_history") if r["group"] == G)
    t = truth
    assert history == sorted([
        ("inst-a", t["a1"], "joined", "replaced"), ("inst-a", t["a2"], "replaced", "removed"),
        ("inst-b", t["b1"], "joined", "replaced"), ("inst-b", t["b2"], "replaced", "replaced"),
        ("inst-b", t["d1"], "replaced", None),
        ("inst-c", t["c1"], "joined", "expired"),
    ])

    events = [r for r in read("static_events") if r["group"] == G]
    by_cause: dict[str, list] = {}
    for e in events:
        by_cause.setdefault(e["cause"], []).append((e["instance_id"], e["old_member_id"], e["new_member_id"]))
    assert sorted(by_cause["joined"]) == sorted([("inst-a", None, t["a1"]), ("inst-b", None, t["b1"]),
                                                 ("inst-c", None, t["c1"])])
    assert sorted(by_cause["replaced"]) == sorted([("inst-a", t["a1"], t["a2"]), ("inst-b", t["b1"], t["b2"]),
                                                   ("inst-b", t["b2"], t["d1"])])
    assert by_cause["expired"] == [("inst-c", t["c1"], None)]
    assert by_cause["removed"] == [("inst-a", t["a2"], None)]
    assert by_cause["forced_rebalance"] == [("inst-b", t["d1"], t["d1"])]
    assert by_cause["fenced"] and set(by_cause["fenced"]) == {("inst-b", t["b2"], t["d1"])}
    assert set(by_cause) == {"joined", "replaced", "expired", "removed", "forced_rebalance", "fenced"}

    gens = sorted((r for r in read("generations") if r["group"] == G), key=lambda r: r["log_offset"])
    trigger = {r["generation"]: r["trigger"] for r in gens}
    assert trigger[t["gens"]["expired"]] == "expired"
    assert trigger[t["gens"]["removed"]] == "removed"
    assert trigger[t["gens"]["forced_rebalance"]] == "forced_rebalance"
    assert [r["generation"] for r in gens] == sorted(trigger)          # generations only move forward
    last = gens[-1]
    assert (last["generation"], {m["instance_id"]: m["member_id"] for m in last["members"]}) == t["final"]

    anomalies = {(r["kind"], r["instance_id"]): r for r in read("anomalies") if r["group"] == G}
    assert anomalies[("fenced_duplicate_instance", "inst-b")]["count"] == len(by_cause["fenced"])
    assert not [k for k in anomalies if k[0] == "concurrent_member_ids"]
    assert summary["changes_by_cause"] == {"joined": 3, "replaced": 6, "expired": 1, "removed": 1}
