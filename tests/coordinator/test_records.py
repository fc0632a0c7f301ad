"""The durable records: what they carry, and what a coordinator that loads them (failover) does.

(Journal replay and records-only replay at stable points are checked by the harness after every
input of every test; these tests look at the loaded coordinator itself.)"""
from tenure.coordinator import PREPARING_REBALANCE, STABLE

from .harness import (
    SESSION,
    Harness,
    commit_resp,
    event_record,
    group_record,
    heartbeat_resp,
    join_ok,
    member_record,
    sync_ok,
)


def test_loaded_group_is_stable_with_members_instances_assignments_and_offsets():
    h = Harness()
    i1, i2, d = h.form_group(["i1", "i2", None])
    h.commit("g", i1, 1, "i1", {"t": [(0, 100, "meta")]})
    h.advance(1234)
    h2 = h.failover()
    g = h2.g()
    assert g.state == STABLE and g.generation == 1 and g.protocol_type == "consumer"
    assert g.protocol_name == "range" and g.leader_id == i1
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in g.members.values()] == \
        [(i1, "i1", b"assign-0"), (i2, "i2", b"assign-1"), (d, None, b"assign-2")]
    assert g.static_members == {"i1": i1, "i2": i2}
    assert h2.coordinator.offsets == h.coordinator.offsets
    # every member's heartbeat timer restarts on load
    for mid in (i1, i2, d):
        assert h2.timer("heartbeat", "g", mid) == h2.now_ms + SESSION


def test_after_failover_a_static_restart_still_causes_no_rebalance():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.advance(500)
    h2 = h.failover()
    now = h2.now_ms
    r = h2.resp(h2.join("g", "", "i2"))
    new = r["member_id"]
    assert new not in (i1, i2)
    assert r == join_ok(9, new, 1, i1)
    recs = h2.take_records()
    assert len(recs) == 2 and recs[0] == event_record("replaced", "i2", i2, new, 1, now)
    assert recs[1].generation == 1 and recs[1].leader == i1
    assert {(m.member_id, m.group_instance_id, m.assignment) for m in recs[1].members} == \
        {(i1, "i1", b"assign-0"), (new, "i2", b"assign-1")}
    assert h2.resp(h2.sync("g", new, 1, "i2")) == sync_ok(5, b"assign-1")
    assert h2.resp(h2.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 82)
    assert h2.take_records() == [event_record("fenced", "i2", i2, new, 1, now)]
    assert h2.resp(h2.heartbeat("g", i1, 1, "i1")) == heartbeat_resp(4, 0)
    assert h2.g().state == STABLE and h2.g().generation == 1
    assert now == h2.now_ms


def test_after_failover_silent_members_expire():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h2 = h.failover()
    h2.run(SESSION, [(i1, "i1")])
    assert i2 not in h2.g().members and h2.g().state == PREPARING_REBALANCE


def test_failover_in_the_middle_of_a_rebalance_loads_the_last_stable_generation():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    t1 = h.join("g", i1, "i1")                          # rebalance under way (memory only)
    assert h.parked(t1)
    h2 = h.failover()
    g = h2.g()
    assert g.state == STABLE and g.generation == 1 and set(g.members) == {i1, i2}
    # the members, answered NOT_COORDINATOR by the old coordinator, rejoin the new one
    t1b = h2.join("g", i1, "i1")
    t2b = h2.join("g", i2, "i2")
    assert h2.resp(t1b) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (i2, "i2", b"sub")])
    assert h2.resp(t2b) == join_ok(9, i2, 2, i1)


def test_group_record_timestamp_is_the_time_of_the_last_state_change():
    """Kafka writes currentStateTimestamp = when the group entered its current state
    (ClassicGroup.currentStateTimestampOrDefault), not the time of the write: the leader's SyncGroup
    record carries the time the group entered CompletingRebalance; a static replacement while Stable
    carries the time the group became Stable."""
    h = Harness()
    tokens = [h.join("g", "", i) for i in ("i1", "i2")]
    h.advance(0)
    completed = h.now_ms
    i1, i2 = (h.resp(t)["member_id"] for t in tokens)
    h.advance(700)
    stable_at = h.now_ms
    h.sync("g", i1, 1, "i1", assignments={i1: b"a", i2: b"b"})
    h.sync("g", i2, 1, "i2")
    assert h.take_records() == [
        event_record("joined", "i1", None, i1, 0, completed), event_record("joined", "i2", None, i2, 0, completed),
        group_record("g", 1, "range", i1, completed, [
            member_record(i1, "i1", b"sub", b"a"), member_record(i2, "i2", b"sub", b"b")])]
    h.run(5000, [(i1, "i1"), (i2, "i2")])
    new = h.resp(h.join("g", "", "i2"))["member_id"]
    # the event carries the time of the write; the group record the time of the last state change
    assert h.take_records() == [event_record("replaced", "i2", i2, new, 1, h.now_ms),
                                group_record("g", 1, "range", i1, stable_at, [
                                    member_record(i1, "i1", b"sub", b"a"), member_record(new, "i2", b"sub", b"b")])]


def test_offsets_survive_a_group_going_empty_and_loading():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.commit("g", i1, 1, "i1", {"t": [(0, 9)]})
    h.leave("g", [(i1, "i1")])
    h2 = h.failover()
    assert h2.g().state == "Empty" and h2.g().generation == 2
    assert h2.coordinator.offsets["g"][("t", 0)].offset == 9
    # an Empty group takes commits without a generation
    assert h2.resp(h2.commit("g", "", -1, None, {"t": [(0, 10)]})) == commit_resp(8, {"t": [(0, 0)]})


def test_the_harness_checks_records_only_replay_at_stable_points():
    h = Harness()
    h.form_group(["i1", "i2"])
    assert h.durable_checks > 0
    before = h.durable_checks
    h.join("g", "", "i3")                               # PreparingRebalance: not a stable point
    assert h.durable_checks == before
