"""JoinGroup with a known memberId (J17-J22)."""
import pytest

from tenure.coordinator import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

from .harness import (
    Harness,
    event_record,
    group_record,
    heartbeat_resp,
    join_err,
    join_ok,
    member_record,
    sync_err,
    sync_ok,
)


# ---------------------------------------------------------------------------------------- J17
def test_identity_checks_on_rejoin():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    # instance id given but unknown -> 25
    assert h.resp(h.join("g", i1, "nobody")) == join_err(9, 25, i1)
    # instance id mapped to another member id -> 82
    assert h.resp(h.join("g", "bogus", "i1")) == join_err(9, 82, "bogus")
    assert h.resp(h.join("g", i2, "i1")) == join_err(9, 82, i2)
    # member id not in the group (no instance id) -> 25
    assert h.resp(h.join("g", "bogus", None)) == join_err(9, 25, "bogus")
    g = h.g()
    assert g.state == STABLE and g.generation == 1 and list(g.members) == [i1, i2]
    # group state unchanged; each 82 is a fenced event (presented id -> the mapped one)
    assert h.take_records() == [event_record("fenced", "i1", "bogus", i1, 1, h.now_ms),
                                event_record("fenced", "i1", i2, i1, 1, h.now_ms)]


@pytest.mark.parametrize("version", [5, 7])
def test_identity_check_error_shape_before_v9(version):
    h = Harness()
    (i1,) = h.form_group(["i1"], version=version)
    assert h.resp(h.join("g", "bogus", "i1", version=version)) == join_err(version, 82, "bogus")


# ---------------------------------------------------------------------------------------- J18
def test_rejoin_during_preparing_rebalance_updates_protocols_and_timeouts():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    t3 = h.join("g", "", "i3")                         # rebalance
    i3 = "i3-3"
    t1 = h.join("g", i1, "i1", protocols=(("range", b"v2"),), rebalance=40000, session=20000)
    assert h.parked(t1)
    m = h.g().members[i1]
    assert m.protocols == (("range", b"v2"),) and m.rebalance_timeout_ms == 40000 and m.session_timeout_ms == 20000
    now = h.now_ms
    t2 = h.join("g", i2, "i2")                         # last one in: the join completes
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"v2"), (i2, "i2", b"sub"), (i3, "i3", b"sub")])
    assert h.resp(t2) == join_ok(9, i2, 2, i1)
    assert h.resp(t3) == join_ok(9, i3, 2, i1)
    # the new timeouts count: heartbeat after 20000, sync within the largest rebalance timeout
    assert h.timer("heartbeat", "g", i1) == now + 20000
    assert h.timer("sync") == now + 40000
    h.take_records()
    s1 = h.sync("g", i1, 2, "i1", assignments={i1: b"x1", i2: b"x2", i3: b"x3"})
    assert h.resp(s1) == sync_ok(5, b"x1")
    assert h.take_records() == [group_record("g", 2, "range", i1, now, [
        member_record(i1, "i1", b"v2", b"x1", rebalance=40000, session=20000),
        member_record(i2, "i2", b"sub", b"x2"),
        member_record(i3, "i3", b"sub", b"x3"),
    ])]


def test_rejoin_during_preparing_rebalance_parks_until_others_arrive():
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"])
    t1 = h.join("g", i1, "i1")                         # leader: rebalance
    t2 = h.join("g", i2, "i2")
    assert h.parked(t1) and h.parked(t2)
    t3 = h.join("g", i3, "i3")
    assert h.resp(t3) == join_ok(9, i3, 2, i1)


# ---------------------------------------------------------------------------------------- J19
def _completing(h: Harness):
    i1, i2 = h.form_group(["i1", "i2"], protocols=(("range", b"m"),))
    t1 = h.join("g", i1, "i1", protocols=(("range", b"m"),))
    h.join("g", i2, "i2", protocols=(("range", b"m"),))
    assert h.resp(t1)["generation_id"] == 2 and h.g().state == COMPLETING_REBALANCE
    return i1, i2


def test_completing_rebalance_identical_rejoin_gets_current_generation():
    h = Harness()
    i1, i2 = _completing(h)
    h.take_records()
    t1 = h.join("g", i1, "i1", protocols=(("range", b"m"),))
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"m"), (i2, "i2", b"m")])
    t2 = h.join("g", i2, "i2", protocols=(("range", b"m"),))
    assert h.resp(t2) == join_ok(9, i2, 2, i1)
    assert h.g().state == COMPLETING_REBALANCE and h.g().generation == 2
    assert h.take_records() == []


def test_completing_rebalance_changed_rejoin_rebalances():
    h = Harness()
    i1, i2 = _completing(h)
    s2 = h.sync("g", i2, 2, "i2")                      # follower's sync parks
    assert h.parked(s2)
    t1 = h.join("g", i1, "i1", protocols=(("range", b"changed"),))   # metadata bytes differ
    assert h.resp(s2) == sync_err(5, 27)
    assert h.parked(t1) and h.g().state == PREPARING_REBALANCE and h.g().generation == 2
    t2 = h.join("g", i2, "i2", protocols=(("range", b"m"),))
    assert h.resp(t1) == join_ok(9, i1, 3, i1, members=[(i1, "i1", b"changed"), (i2, "i2", b"m")])
    assert h.resp(t2) == join_ok(9, i2, 3, i1)


# ---------------------------------------------------------------------------------------- J20
@pytest.mark.parametrize("leader_instance", ["i1", None])
def test_stable_leader_rejoin_rebalances_even_with_identical_protocols(leader_instance):
    h = Harness()
    lead, follower = h.form_group([leader_instance, "i2"])
    h.take_records()
    t1 = h.join("g", lead, leader_instance)
    assert h.parked(t1)
    g = h.g()
    assert g.state == PREPARING_REBALANCE and g.generation == 1
    assert h.resp(h.heartbeat("g", follower, 1, "i2")) == heartbeat_resp(4, 27)
    t2 = h.join("g", follower, "i2")
    assert h.resp(t1) == join_ok(9, lead, 2, lead, members=[(lead, leader_instance, b"sub"), (follower, "i2", b"sub")])
    assert h.resp(t2) == join_ok(9, follower, 2, lead)
    assert h.take_records() == []


# ---------------------------------------------------------------------------------------- J21
@pytest.mark.parametrize("version", [5, 6, 7, 9])
def test_stable_follower_identical_rejoin_gets_current_generation_without_change(version):
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"], version=version)
    h.take_records()
    before = h.g().copy()
    t2 = h.join("g", i2, "i2", version=version)
    assert h.resp(t2) == join_ok(version, i2, 1, i1)
    assert h.g() == before
    assert h.take_records() == []


def test_stable_follower_changed_rejoin_rebalances():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    t2 = h.join("g", i2, "i2", protocols=(("range", b"new"),))
    assert h.parked(t2) and h.g().state == PREPARING_REBALANCE
    t1 = h.join("g", i1, "i1")
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (i2, "i2", b"new")])
    assert h.resp(t2) == join_ok(9, i2, 2, i1)


def test_stable_follower_rejoin_with_other_protocol_order_rebalances():
    h = Harness()
    protos = (("range", b"a"), ("roundrobin", b"b"))
    i1, i2 = h.form_group(["i1", "i2"], protocols=protos)
    t2 = h.join("g", i2, "i2", protocols=(("roundrobin", b"b"), ("range", b"a")))
    assert h.parked(t2) and h.g().state == PREPARING_REBALANCE


# ---------------------------------------------------------------------------------------- J22
def test_known_member_id_on_empty_group_is_25():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.resp(h.leave("g", [(i1, "i1")]))                 # the group is now Empty (generation 2)
    assert h.g().state == EMPTY
    assert h.resp(h.join("g", i1, "i1")) == join_err(9, 25, i1)
    assert h.resp(h.join("g", i1, None)) == join_err(9, 25, i1)
    assert h.g().state == EMPTY and h.g().generation == 2
