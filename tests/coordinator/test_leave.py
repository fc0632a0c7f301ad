"""LeaveGroup (L1-L4)."""
import pytest

from tenure.coordinator import EMPTY, PREPARING_REBALANCE

from .harness import (
    REBALANCE,
    Harness,
    event_record,
    group_record,
    heartbeat_resp,
    join_err,
    join_ok,
    leave_resp,
    member_record,
)


# ---------------------------------------------------------------------------------------- L1
@pytest.mark.parametrize("version", [3, 4, 5])
def test_leave_unknown_group_answers_every_member_25(version):
    h = Harness()
    t = h.leave("nope", [("m1", None), ("", "i1")], version=version)
    assert h.resp(t) == leave_resp(version, 0, [("m1", None, 25), ("", "i1", 25)])
    assert h.group == {}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_unknown_group_before_v3_reports_member_error_at_top_level(version):
    h = Harness()
    assert h.resp(h.leave("nope", "m1", version=version)) == leave_resp(version, 25)


# ---------------------------------------------------------------------------------------- L2
def test_leave_batch_per_member_results_echo_the_request_identity():
    h = Harness()
    i1, i2, i3, d = h.form_group(["i1", "i2", "i3", None])
    p = h.resp(h.join("g", "", None))["member_id"]    # a KIP-394 pending id
    assert h.g().pending_members == {p}
    h.take_records()
    t = h.leave("g", [
        ("", "i1"),            # by instance id alone: removed
        ("", "nobody"),        # unknown instance id: 25
        ("", None),            # nothing at all: 25
        (p, None),             # pending id: removed
        ("bogus", None),       # unknown member: 25
        ("bogus", "i2"),       # instance mapped to another id: 82
        (i3, "i3"),            # full identity: removed
        (d, None),             # dynamic: removed
    ])
    assert h.resp(t) == leave_resp(5, 0, [
        ("", "i1", 0), ("", "nobody", 25), ("", None, 25), (p, None, 0), ("bogus", None, 25),
        ("bogus", "i2", 82), (i3, "i3", 0), (d, None, 0)])
    g = h.g()
    assert set(g.members) == {i2} and g.static_members == {"i2": i2} and g.pending_members == set()
    for mid in (i1, i3, d):
        assert h.timer("heartbeat", "g", mid) is None
    assert h.timer("pending", "g", p) is None
    # one rebalance for the whole batch
    assert g.state == PREPARING_REBALANCE and g.generation == 1 and g.leader_id == i2
    t2 = h.join("g", i2, "i2")
    assert h.resp(t2) == join_ok(9, i2, 2, i2, members=[(i2, "i2", b"sub")])


def test_leave_of_pending_member_alone_from_empty_group():
    h = Harness()
    p = h.resp(h.join("g", "", None))["member_id"]
    assert h.resp(h.leave("g", [(p, None)])) == leave_resp(5, 0, [(p, None, 0)])
    # an Empty group has nothing to rebalance (only Stable/CompletingRebalance/PreparingRebalance react)
    assert h.g().pending_members == set() and h.g().state == EMPTY
    assert h.timer("pending", "g", p) is None and h.timer("join") is None
    h.advance(REBALANCE)
    assert h.g().state == EMPTY and h.g().generation == 0 and h.records == []


def test_leave_of_pending_member_counts_as_a_removal_in_a_stable_group():
    """Kafka collects every member reply with error NONE, pending ids included, and rebalances a
    Stable group if there is at least one."""
    h = Harness()
    (i1,) = h.form_group(["i1"])
    p = h.resp(h.join("g", "", None))["member_id"]
    assert h.resp(h.leave("g", [(p, None)])) == leave_resp(5, 0, [(p, None, 0)])
    assert h.g().state == PREPARING_REBALANCE and h.g().pending_members == set()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_before_v3_single_member(version):
    h = Harness()
    d1, d2 = h.form_group([None, None], version=3)
    assert h.resp(h.leave("g", "bogus", version=version)) == leave_resp(version, 25)
    assert h.resp(h.leave("g", d2, version=version)) == leave_resp(version, 0)
    assert set(h.g().members) == {d1} and h.g().state == PREPARING_REBALANCE


# ---------------------------------------------------------------------------------------- L3
def test_leave_of_every_member_of_stable_group_goes_empty_with_one_generation_bump():
    h = Harness()
    i1, i2, d = h.form_group(["i1", "i2", None])
    h.take_records()
    t = h.leave("g", [(i1, "i1"), ("", "i2"), (d, None)])
    assert h.resp(t) == leave_resp(5, 0, [(i1, "i1", 0), ("", "i2", 0), (d, None, 0)])
    g = h.g()
    assert g.state == EMPTY and g.generation == 2 and g.members == {} and g.static_members == {}
    # i1 named its own member id (left), i2 was named by instance id only (admin removal)
    assert h.take_records() == [event_record("left", "i1", i1, None, 1, h.now_ms),
                                event_record("removed", "i2", i2, None, 1, h.now_ms),
                                group_record("g", 2, None, None, h.now_ms)]
    assert h.timers == {}


def test_leave_during_preparing_rebalance_completes_the_join_and_answers_parked_join_25():
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"])
    t1 = h.join("g", i1, "i1")                          # rebalance
    t2 = h.join("g", i2, "i2")                          # parked
    t = h.leave("g", [(i2, "i2"), (i3, "i3")])
    assert h.resp(t) == leave_resp(5, 0, [(i2, "i2", 0), (i3, "i3", 0)])
    # the removed member's parked join gets 25 (Kafka: memberId "" / UNKNOWN_MEMBER_ID)
    assert h.resp(t2) == join_err(9, 25, "")
    # everyone left has joined: the join completes now
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub")])


def test_leave_during_initial_rebalance_does_not_complete_it_early():
    from tenure.coordinator import CoordinatorConfig
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    t1 = h.join("g", "", "i1")
    t2 = h.join("g", "", "i2")
    h.advance(1000)
    assert h.resp(h.leave("g", [("", "i2")])) == leave_resp(5, 0, [("", "i2", 0)])
    assert h.resp(t2)["error_code"] == 25
    assert h.parked(t1)
    h.advance(4999)                                     # delay re-armed once (i2 joined), then done
    assert h.parked(t1)
    h.advance(1)
    assert h.resp(t1) == join_ok(9, "i1-1", 1, "i1-1", members=[("i1-1", "i1", b"sub")])


def test_leave_in_completing_rebalance_rebalances():
    h = Harness()
    tokens = [h.join("g", "", i) for i in ("i1", "i2", "i3")]
    h.advance(0)
    i1, i2, i3 = (h.resp(t)["member_id"] for t in tokens)
    s2 = h.sync("g", i2, 1, "i2")
    assert h.resp(h.leave("g", [("", "i3")])) == leave_resp(5, 0, [("", "i3", 0)])
    assert h.resp(s2)["error_code"] == 27
    assert h.g().state == PREPARING_REBALANCE


def test_failed_leave_changes_nothing():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    before = h.g().copy()
    assert h.resp(h.leave("g", [("bogus", None), ("", "zzz")])) == \
        leave_resp(5, 0, [("bogus", None, 25), ("", "zzz", 25)])
    assert h.g() == before and h.take_records() == []


# ---------------------------------------------------------------------------------------- L4
@pytest.mark.parametrize("version", [3, 4, 5])
def test_admin_remove_members_by_instance_id_one_rebalance(version):
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"])
    h.take_records()
    t = h.leave("g", [("", "i2"), ("", "i3")], version=version)
    assert h.resp(t) == leave_resp(version, 0, [("", "i2", 0), ("", "i3", 0)])
    assert h.take_records() == [event_record("removed", "i2", i2, None, 1, h.now_ms),
                                event_record("removed", "i3", i3, None, 1, h.now_ms)]
    g = h.g()
    assert set(g.members) == {i1} and g.static_members == {"i1": i1}
    assert g.state == PREPARING_REBALANCE and g.generation == 1
    assert h.resp(h.heartbeat("g", i1, 1, "i1")) == heartbeat_resp(4, 27)
    assert h.resp(h.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 25)
    t1 = h.join("g", i1, "i1")
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub")])
    h.sync("g", i1, 2, "i1", assignments={i1: b"all"})
    assert h.take_records() == [group_record("g", 2, "range", i1, h.now_ms, [member_record(i1, "i1", b"sub", b"all")])]


def test_admin_remove_all_members_after_describe():
    h = Harness()
    ids = dict(zip(["i1", "i2"], h.form_group(["i1", "i2"])))
    h.take_records()
    d = h.resp(h.describe("g"))
    identities = [("", m["group_instance_id"]) for m in d["groups"][0]["members"]]
    assert sorted(i for _, i in identities) == ["i1", "i2"]
    t = h.leave("g", identities, version=5)
    assert h.resp(t)["error_code"] == 0 and all(m["error_code"] == 0 for m in h.resp(t)["members"])
    assert h.g().state == EMPTY and h.g().generation == 2
    assert h.take_records() == [event_record("removed", i, ids[i], None, 1, h.now_ms) for _, i in identities] + [
        group_record("g", 2, None, None, h.now_ms)]
