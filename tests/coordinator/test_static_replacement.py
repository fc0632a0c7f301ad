"""Static replacement: memberId "" with an instance id already mapped (J23-J31, KIP-345/KIP-814)."""
import pytest

from tenure.coordinator import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE

from .harness import (
    HOST,
    SESSION,
    Harness,
    commit_resp,
    event_record,
    group_record,
    heartbeat_resp,
    join_err,
    join_ok,
    leave_resp,
    member_record,
    sync_err,
    sync_ok,
)


def _no_rebalance_since_formation(h: Harness) -> bool:
    """After the group first became Stable, it never left Stable."""
    hist = h.state_history()
    first_stable = hist.index((STABLE, 1))
    return all(state == STABLE for state, _ in hist[first_stable:])


# ---------------------------------------------------------------------------------------- J23, J24, J25
def test_stable_follower_replacement_v9_no_rebalance_record_with_new_id():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    now = h.now_ms
    # the restarted i2 subscribes with other bytes, other timeouts, from another client/host
    t = h.join("g", "", "i2", protocols=(("range", b"sub-v2"),), rebalance=35000, session=12000,
               client_id="restarted", host="/10.9.9.9")
    new = "i2-3"
    assert h.resp(t) == join_ok(9, new, 1, i1)         # current generation, members [], skip false
    # the answer leaves with the record in one Result: the runtime appends the record first
    assert [tok for tok, _ in h.last_result.responses] == [t] and len(h.last_result.records) == 2
    # the replaced event (with the restarted process's client), then the record that is the persisted
    # instance -> member map: new id, old client id/host and assignment, protocols and timeouts from the request
    assert h.take_records() == [
        event_record("replaced", "i2", i2, new, 1, now, client_id="restarted", host="/10.9.9.9"),
        group_record("g", 1, "range", i1, now, [
            member_record(i1, "i1", b"sub", b"assign-0"),
            member_record(new, "i2", b"sub-v2", b"assign-1", rebalance=35000, session=12000),
        ])]
    g = h.g()
    assert g.state == STABLE and g.generation == 1 and g.leader_id == i1
    assert g.static_members == {"i1": i1, "i2": new} and set(g.members) == {i1, new}
    assert (g.members[new].client_id, g.members[new].client_host) == ("client", HOST)
    # the heartbeat timer moved to the new id, with the new session timeout
    assert h.timer("heartbeat", "g", i2) is None
    assert h.timer("heartbeat", "g", new) == now + 12000
    # the new member inherits the assignment
    assert h.resp(h.sync("g", new, 1, "i2")) == sync_ok(5, b"assign-1")
    assert _no_rebalance_since_formation(h)


def test_stable_leader_replacement_v9_skip_assignment_with_full_member_list():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    now = h.now_ms
    t = h.join("g", "", "i1")
    new = "i1-3"
    assert h.resp(t) == join_ok(9, new, 1, new, skip_assignment=True,
                                members=[(new, "i1", b"sub"), (i2, "i2", b"sub")])
    assert h.take_records() == [event_record("replaced", "i1", i1, new, 1, now), group_record("g", 1, "range", new, now, [
        member_record(new, "i1", b"sub", b"assign-0"),
        member_record(i2, "i2", b"sub", b"assign-1"),
    ])]
    g = h.g()
    assert g.leader_id == new and g.state == STABLE and g.generation == 1
    assert h.timer("heartbeat", "g", i1) is None and h.timer("heartbeat", "g", new) == now + SESSION
    # the new leader skips assignment: its sync gets its previous assignment
    assert h.resp(h.sync("g", new, 1, "i1")) == sync_ok(5, b"assign-0")
    assert h.take_records() == []
    assert _no_rebalance_since_formation(h)


@pytest.mark.parametrize("version", [5, 6, 7, 8])
def test_stable_leader_replacement_before_v9_reports_the_old_leader(version):
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"], version=version)
    h.take_records()
    now = h.now_ms
    t = h.join("g", "", "i1", version=version)
    new = "i1-3"
    # members [], skip false, leader = the leader id before the replacement
    assert h.resp(t) == join_ok(version, new, 1, i1)
    assert h.resp(t)["leader"] == i1 and h.resp(t)["members"] == []
    assert h.g().leader_id == new
    assert h.take_records() == [event_record("replaced", "i1", i1, new, 1, now), group_record("g", 1, "range", new, now, [
        member_record(new, "i1", b"sub", b"assign-0"),
        member_record(i2, "i2", b"sub", b"assign-1"),
    ])]


@pytest.mark.parametrize("version", [5, 8, 9])
def test_stable_follower_replacement_reports_current_leader(version):
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"], version=version)
    t = h.join("g", "", "i2", version=version)
    assert h.resp(t) == join_ok(version, "i2-3", 1, i1)


def test_dynamic_members_unaffected_by_static_replacement():
    h = Harness()
    i1, d = h.form_group(["i1", None])
    h.take_records()
    now = h.now_ms
    t = h.join("g", "", "i1")
    new = "i1-3"
    assert h.resp(t) == join_ok(9, new, 1, new, skip_assignment=True,
                                members=[(new, "i1", b"sub"), (d, None, b"sub")])
    assert h.take_records() == [event_record("replaced", "i1", i1, new, 1, now), group_record("g", 1, "range", new, now, [
        member_record(new, "i1", b"sub", b"assign-0"), member_record(d, None, b"sub", b"assign-1")])]
    assert h.resp(h.heartbeat("g", d, 1)) == heartbeat_resp(4, 0)


# ---------------------------------------------------------------------------------------- J28
def test_stable_replacement_that_changes_the_vote_rebalances():
    h = Harness()
    protos = (("range", b"a"), ("roundrobin", b"b"))
    i1, i2 = h.form_group(["i1", "i2"], protocols=protos)
    h.take_records()
    t = h.join("g", "", "i2", protocols=(("roundrobin", b"rr2"),))   # now only roundrobin is common
    new = "i2-3"
    assert h.parked(t)
    g = h.g()
    assert g.state == PREPARING_REBALANCE and g.generation == 1
    assert g.static_members == {"i1": i1, "i2": new}
    # no group record (a rebalance is coming); the map's change is logged
    assert h.take_records() == [event_record("replaced", "i2", i2, new, 1, h.now_ms)]
    assert h.resp(h.heartbeat("g", i1, 1, "i1")) == heartbeat_resp(4, 27)
    t1 = h.join("g", i1, "i1", protocols=protos)
    assert h.resp(t1) == join_ok(9, i1, 2, i1, protocol="roundrobin",
                                 members=[(i1, "i1", b"b"), (new, "i2", b"rr2")])
    assert h.resp(t) == join_ok(9, new, 2, i1, protocol="roundrobin")


def test_stable_replacement_of_single_member_with_new_preference_rebalances():
    h = Harness()
    (i1,) = h.form_group(["i1"], protocols=(("range", b"a"), ("roundrobin", b"b")))
    t = h.join("g", "", "i1", protocols=(("roundrobin", b"b"), ("range", b"a")))
    new = "i1-2"
    # the vote now picks roundrobin: rebalance, which completes at once (everyone has joined)
    assert h.resp(t) == join_ok(9, new, 2, new, protocol="roundrobin", members=[(new, "i1", b"b")])
    assert h.g().state == COMPLETING_REBALANCE


# ---------------------------------------------------------------------------------------- J23, J29
def test_completing_rebalance_replacement_fences_old_sync_82_and_others_27():
    h = Harness()
    start = h.now_ms
    tokens = [h.join("g", "", i) for i in ("i1", "i2", "i3")]
    h.advance(0)
    i1, i2, i3 = (h.resp(t)["member_id"] for t in tokens)
    assert h.g().state == COMPLETING_REBALANCE
    s2 = h.sync("g", i2, 1, "i2")
    s3 = h.sync("g", i3, 1, "i3")
    assert h.parked(s2) and h.parked(s3)
    t2 = h.join("g", "", "i2")                         # identical protocols: still a rebalance
    new = "i2-4"
    assert h.resp(s2) == sync_err(5, 82)               # the old member's pending sync: fenced
    assert h.resp(s3) == sync_err(5, 27)
    g = h.g()
    assert g.state == PREPARING_REBALANCE and g.generation == 1 and h.parked(t2)
    assert g.static_members == {"i1": i1, "i2": new, "i3": i3}
    assert h.resp(h.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 82)
    t1 = h.join("g", i1, "i1")
    t3 = h.join("g", i3, "i3")
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (new, "i2", b"sub"), (i3, "i3", b"sub")])
    assert h.resp(t2) == join_ok(9, new, 2, i1)
    assert h.resp(t3) == join_ok(9, i3, 2, i1)
    # no group record (no generation became stable); the map's history: three joins, the replacement,
    # the old member's parked sync fenced by it, then its heartbeat fenced
    assert h.records == [event_record("joined", "i1", None, i1, 0, start),
                         event_record("joined", "i2", None, i2, 0, start),
                         event_record("joined", "i3", None, i3, 0, start),
                         event_record("replaced", "i2", i2, new, 1, start),
                         event_record("fenced", "i2", i2, new, 1, start),
                         event_record("fenced", "i2", i2, new, 1, start)]


def test_completing_rebalance_replacement_of_leader_moves_leadership():
    h = Harness()
    tokens = [h.join("g", "", i) for i in ("i1", "i2")]
    h.advance(0)
    i1, i2 = (h.resp(t)["member_id"] for t in tokens)
    s2 = h.sync("g", i2, 1, "i2")
    t1 = h.join("g", "", "i1")
    new = "i1-3"
    assert h.resp(s2) == sync_err(5, 27)
    assert h.g().leader_id == new and h.g().state == PREPARING_REBALANCE
    t2 = h.join("g", i2, "i2")
    assert h.resp(t1) == join_ok(9, new, 2, new, members=[(new, "i1", b"sub"), (i2, "i2", b"sub")])
    assert h.resp(t2) == join_ok(9, i2, 2, new)


# ---------------------------------------------------------------------------------------- J23, J30
@pytest.mark.parametrize("version", [5, 9])
def test_preparing_rebalance_replacement_fences_old_parked_join_82(version):
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"], version=version)
    t1 = h.join("g", i1, "i1", version=version)        # leader rejoin: rebalance
    t2 = h.join("g", i2, "i2", version=version)        # old i2 parked
    assert h.parked(t2)
    t2new = h.join("g", "", "i2", version=version)
    new = "i2-4"
    assert h.resp(t2) == join_err(version, 82, i2)     # memberId = old id, generation -1
    assert h.parked(t2new) and h.parked(t1)
    assert h.g().static_members["i2"] == new and h.g().state == PREPARING_REBALANCE
    t3 = h.join("g", i3, "i3", version=version)
    members = [(i1, "i1", b"sub"), (new, "i2", b"sub"), (i3, "i3", b"sub")]
    assert h.resp(t1) == join_ok(version, i1, 2, i1, members=members)
    assert h.resp(t2new) == join_ok(version, new, 2, i1)
    assert h.resp(t3) == join_ok(version, i3, 2, i1)


def test_preparing_rebalance_replacement_of_last_missing_member_completes_join():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    t1 = h.join("g", i1, "i1")
    t2 = h.join("g", "", "i2")                         # replaced and parked: everyone in
    new = "i2-3"
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (new, "i2", b"sub")])
    assert h.resp(t2) == join_ok(9, new, 2, i1)


# ---------------------------------------------------------------------------------------- J31
def test_old_member_id_is_fenced_everywhere_after_replacement():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.resp(h.join("g", "", "i2"))
    new = "i2-3"
    h.take_records()
    before = h.g().copy()
    # with the instance id -> 82
    assert h.resp(h.join("g", i2, "i2")) == join_err(9, 82, i2)
    assert h.resp(h.sync("g", i2, 1, "i2")) == sync_err(5, 82)
    assert h.resp(h.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 82)
    assert h.resp(h.commit("g", i2, 1, "i2", {"t": [(0, 5), (1, 6)]}, version=8)) == \
        commit_resp(8, {"t": [(0, 82), (1, 82)]})
    assert h.resp(h.leave("g", [(i2, "i2")], version=3)) == leave_resp(3, 0, [(i2, "i2", 82)])
    # without the instance id -> 25
    assert h.resp(h.join("g", i2, None)) == join_err(9, 25, i2)
    assert h.resp(h.sync("g", i2, 1, None)) == sync_err(5, 25)
    assert h.resp(h.heartbeat("g", i2, 1, None)) == heartbeat_resp(4, 25)
    assert h.resp(h.commit("g", i2, 1, None, {"t": [(0, 5)]}, version=8)) == commit_resp(8, {"t": [(0, 25)]})
    assert h.resp(h.leave("g", [(i2, None)], version=3)) == leave_resp(3, 0, [(i2, None, 25)])
    assert h.resp(h.leave("g", i2, version=2)) == leave_resp(2, 25)
    # nothing changed; the new member is untouched; one fenced event per request answered 82
    assert h.g() == before
    assert h.take_records() == [event_record("fenced", "i2", i2, new, 1, h.now_ms)] * 5
    assert h.resp(h.heartbeat("g", new, 1, "i2")) == heartbeat_resp(4, 0)


def test_every_restart_yields_a_new_member_id_and_a_record():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    seen = {i1, i2}
    previous = i2
    for _ in range(3):
        h.advance(1000)
        r = h.resp(h.join("g", "", "i2"))
        assert r["error_code"] == 0 and r["generation_id"] == 1
        assert r["member_id"] not in seen
        seen.add(r["member_id"])
        recs = h.take_records()
        assert len(recs) == 2 and {m.member_id for m in recs[1].members} == {i1, r["member_id"]}
        assert recs[0] == event_record("replaced", "i2", previous, r["member_id"], 1, h.now_ms)
        previous = r["member_id"]
        assert h.g().static_members["i2"] == r["member_id"]
    assert h.g().generation == 1 and _no_rebalance_since_formation(h)


def test_rolling_restart_of_all_static_members_never_rebalances():
    h = Harness()
    ids = h.form_group(["i1", "i2", "i3"])
    current = dict(zip(["i1", "i2", "i3"], ids))
    for iid in ["i1", "i2", "i3"]:
        h.run(2000, [(m, i) for i, m in current.items()])
        t = h.join("g", "", iid)
        r = h.resp(t)
        assert r["error_code"] == 0 and r["generation_id"] == 1
        current[iid] = r["member_id"]
        s = h.sync("g", current[iid], 1, iid)
        assert h.resp(s)["error_code"] == 0
    g = h.g()
    assert g.generation == 1 and g.state == STABLE and g.static_members == current
    assert [m.assignment for m in g.members.values()] == [b"assign-0", b"assign-1", b"assign-2"]
    assert _no_rebalance_since_formation(h)
