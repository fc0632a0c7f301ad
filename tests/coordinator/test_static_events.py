"""Static-member events (StaticMemberEventKey v345 / Value v0, this project's own record): the history of
the group.instance.id -> member.id map with its causes, asserted record by record with the fake clock.

The harness also checks after every input that folding these events gives the live map, and that
journal, records-only and compacted replay agree on the event keys each group has in the log."""
import copy

import pytest

from tenure.coordinator import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE, CoordinatorConfig, GroupShard
from tenure.protocol import records as wire_records
from tenure.protocol.records import GroupMetadataRecord, OffsetCommitRecord, StaticMemberEventRecord

from .harness import (
    REBALANCE,
    SESSION,
    Harness,
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

MIN = 60_000


# ---------------------------------------------------------------------------------------- joined
def test_joined_for_each_first_static_join_with_the_joining_client_and_generation_0():
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=100))
    t0 = h.now_ms
    ta = h.join("g", "", "a", client_id="proc-a", host="/10.0.0.11")
    h.advance(5)
    tb = h.join("g", "", "b", client_id="proc-b", host="/10.0.0.12")
    td = h.join_dynamic("g")[1]                        # dynamic members have no events
    h.advance(200)
    a, b = h.resp(ta)["member_id"], h.resp(tb)["member_id"]
    assert (a, b) == ("a-1", "b-2")
    assert h.take_records() == [
        event_record("joined", "a", None, a, 0, t0, client_id="proc-a", host="/10.0.0.11"),
        event_record("joined", "b", None, b, 0, t0 + 5, client_id="proc-b", host="/10.0.0.12"),
    ]
    assert h.resp(td)["error_code"] == 0
    assert h.coordinator.static_event_keys == {"g": {"a", "b"}}


def test_joined_into_a_stable_group_carries_the_generation_before_its_rebalance():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    h.advance(100)
    t3 = h.join("g", "", "i3", client_id="late")
    assert h.parked(t3) and h.g().state == PREPARING_REBALANCE
    assert h.take_records() == [event_record("joined", "i3", None, "i3-3", 1, h.now_ms, client_id="late")]


def test_rejoin_with_the_current_member_id_writes_no_event():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    assert h.resp(h.join("g", i2, "i2")) == join_ok(9, i2, 1, i1)     # follower, same protocols
    assert h.resp(h.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 0)
    assert h.resp(h.sync("g", i2, 1, "i2")) == sync_ok(5, b"assign-1")
    assert h.take_records() == []


# ---------------------------------------------------------------------------------------- replaced
def test_replaced_in_a_stable_group_comes_before_the_group_record_and_names_the_restarted_client():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    formed = h.now_ms
    h.take_records()
    h.advance(2500)
    t = h.join("g", "", "i2", client_id="restarted", host="/10.0.0.99")
    new = h.resp(t)["member_id"]
    assert h.take_records() == [
        event_record("replaced", "i2", i2, new, 1, formed + 2500, client_id="restarted", host="/10.0.0.99"),
        group_record("g", 1, "range", i1, formed, [member_record(i1, "i1", b"sub", b"assign-0"),
                                                   member_record(new, "i2", b"sub", b"assign-1")]),
    ]


def test_replaced_then_fenced_for_the_old_members_parked_join():
    """The old process still had a JoinGroup parked when its replacement joined: it is answered 82 at
    replacement time, and that is a fenced event (a live holder of the stale id was told so), written
    after the replacement, with the parked request's own client."""
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"])
    h.take_records()
    t1 = h.join("g", i1, "i1")                         # leader rejoins: rebalance
    t2 = h.join("g", i2, "i2", client_id="old-proc", host="/10.0.0.2")   # old i2 parked (i3 not yet in)
    assert h.parked(t2)
    h.advance(10)
    t2new = h.join("g", "", "i2", client_id="new-proc", host="/10.0.0.3")
    new = "i2-4"
    assert h.resp(t2) == join_err(9, 82, i2)
    assert h.take_records() == [
        event_record("replaced", "i2", i2, new, 1, h.now_ms, client_id="new-proc", host="/10.0.0.3"),
        event_record("fenced", "i2", i2, new, 1, h.now_ms, client_id="old-proc", host="/10.0.0.2"),
    ]
    h.join("g", i3, "i3")                              # the last one in: generation 2 completes
    assert h.resp(t1)["generation_id"] == 2 and h.resp(t2new)["member_id"] == new
    assert h.take_records() == []


def test_replaced_then_fenced_for_the_old_members_parked_sync():
    h = Harness()
    start = h.now_ms
    i1, i2 = h.join_new(["i1", "i2"])
    assert h.g().state == COMPLETING_REBALANCE
    s2 = h.sync("g", i2, 1, "i2", client_id="old-proc", host="/10.0.0.2")
    h.advance(7)
    t2 = h.join("g", "", "i2", client_id="new-proc")
    new = "i2-3"
    assert h.resp(s2) == sync_err(5, 82)
    assert h.records == [
        event_record("joined", "i1", None, i1, 0, start),
        event_record("joined", "i2", None, i2, 0, start),
        event_record("replaced", "i2", i2, new, 1, start + 7, client_id="new-proc"),
        event_record("fenced", "i2", i2, new, 1, start + 7, client_id="old-proc", host="/10.0.0.2"),
    ]
    assert h.parked(t2) and h.g().state == PREPARING_REBALANCE


def test_replaced_without_parked_requests_has_no_fenced_event():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.join("g", i1, "i1")                              # rebalance; i2 not parked
    h.take_records()
    h.join("g", "", "i2")
    assert h.take_records() == [event_record("replaced", "i2", i2, "i2-3", 1, h.now_ms)]


# ---------------------------------------------------------------------------------------- fenced
def test_fenced_once_per_request_on_every_api_with_the_requesting_client():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    new = h.resp(h.join("g", "", "i2"))["member_id"]
    h.take_records()
    zombie = dict(client_id="zombie", host="/10.6.6.6")
    h.advance(1)
    assert h.resp(h.join("g", i2, "i2", **zombie)) == join_err(9, 82, i2)
    h.advance(1)
    assert h.resp(h.sync("g", i2, 1, "i2", **zombie)) == sync_err(5, 82)
    h.advance(1)
    assert h.resp(h.heartbeat("g", i2, 1, "i2", **zombie)) == heartbeat_resp(4, 82)
    h.advance(1)
    t = h.commit("g", i2, 1, "i2", {"t": [(0, 5), (1, 6)]}, **zombie)
    assert all(p["error_code"] == 82 for p in h.resp(t)["topics"][0]["partitions"])
    h.advance(1)
    assert h.resp(h.leave("g", [(i2, "i2")], **zombie)) == leave_resp(5, 0, [(i2, "i2", 82)])
    start = h.now_ms - 5
    # one per request (the commit's two partitions are one request), presented id -> mapped id
    assert h.take_records() == [event_record("fenced", "i2", i2, new, 1, start + k, client_id="zombie",
                                             host="/10.6.6.6") for k in range(1, 6)]
    assert h.g().static_members == {"i1": i1, "i2": new}


def test_fenced_on_a_stale_id_never_used_and_on_member_id_empty():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    assert h.resp(h.heartbeat("g", "made-up", 1, "i1")) == heartbeat_resp(4, 82)
    assert h.resp(h.heartbeat("g", "", 1, "i1")) == heartbeat_resp(4, 82)
    assert h.take_records() == [event_record("fenced", "i1", "made-up", i1, 1, h.now_ms),
                                event_record("fenced", "i1", "", i1, 1, h.now_ms)]


def test_no_event_for_errors_other_than_82():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    assert h.resp(h.heartbeat("g", i1, 1, "nobody")) == heartbeat_resp(4, 25)   # unknown instance
    assert h.resp(h.heartbeat("g", i1, 7, "i1")) == heartbeat_resp(4, 22)        # wrong generation
    assert h.resp(h.heartbeat("g", i2, 1, None)) == heartbeat_resp(4, 0)
    assert h.resp(h.heartbeat("g", "x", 1, None)) == heartbeat_resp(4, 25)
    assert h.resp(h.heartbeat("other", i1, 1, "i1")) == heartbeat_resp(4, 25)   # unknown group
    assert h.resp(h.join("g", "x", "nobody")) == join_err(9, 25, "x")
    assert h.take_records() == []


def test_fenced_identities_of_a_batch_leave_each_get_an_event():
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"])
    new1 = h.resp(h.join("g", "", "i1"))["member_id"]
    new2 = h.resp(h.join("g", "", "i2"))["member_id"]
    h.take_records()
    t = h.leave("g", [(i1, "i1"), (i2, "i2"), ("bogus", None)])
    assert h.resp(t) == leave_resp(5, 0, [(i1, "i1", 82), (i2, "i2", 82), ("bogus", None, 25)])
    assert h.take_records() == [event_record("fenced", "i1", i1, new1, 1, h.now_ms),
                                event_record("fenced", "i2", i2, new2, 1, h.now_ms)]
    assert h.g().state == STABLE                       # nothing removed: no rebalance


# ---------------------------------------------------------------------------------------- expired
def test_expired_at_the_session_deadline_with_the_members_own_client():
    h = Harness()
    t1 = h.join("g", "", "i1")
    t2 = h.join("g", "", "i2", client_id="proc-2", host="/10.0.0.2")
    h.advance(0)
    i1, i2 = h.resp(t1)["member_id"], h.resp(t2)["member_id"]
    h.sync("g", i1, 1, "i1", assignments={i1: b"a", i2: b"b"})
    h.sync("g", i2, 1, "i2", client_id="proc-2", host="/10.0.0.2")
    h.take_records()
    deadline = h.timer("heartbeat", "g", i2)
    h.run(SESSION + 3000, [(i1, "i1")])
    # no request caused it: the member's recorded client id/host
    assert h.take_records() == [event_record("expired", "i2", i2, None, 1, deadline, client_id="proc-2",
                                             host="/10.0.0.2")]
    assert h.g().static_members == {"i1": i1} and h.g().state == PREPARING_REBALANCE


def test_expired_during_a_rebalance_carries_the_generation_being_replaced():
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"])
    deadline = h.timer("heartbeat", "g", i3)
    h.advance(1000)
    t1 = h.join("g", i1, "i1")                         # rebalance; i1 and i2 parked (spared), i3 silent
    t2 = h.join("g", i2, "i2")
    h.take_records()
    h.advance(deadline - h.now_ms)
    # i3's removal completes the join: generation 2, CompletingRebalance (no group record yet)
    assert h.take_records() == [event_record("expired", "i3", i3, None, 1, deadline)]
    assert h.resp(t1)["generation_id"] == 2 and h.resp(t2)["generation_id"] == 2
    assert h.g().state == COMPLETING_REBALANCE and set(h.g().static_members) == {"i1", "i2"}


def test_no_event_for_dynamic_members_whatever_happens():
    h = Harness()
    d1, d2, d3 = h.form_group([None, None, None])
    h.take_records()
    h.leave("g", [(d2, None)])                          # leaves
    h.run(SESSION, [(d1, None)])                        # d3 expires
    assert not any(isinstance(r, StaticMemberEventRecord) for r in h.records)
    assert h.coordinator.static_event_keys == {}


# ---------------------------------------------------------------------------------------- registration
def test_registration_expired_only_when_the_registration_timeout_removes_the_offline_member():
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=5 * MIN))
    a, b = h.form_group(["A", "B"])
    h.take_records()
    heard = h.timer("heartbeat", "g", b) - SESSION     # B's last sign of life
    h.run(SESSION + 3000, [(a, "A")])
    assert b in h.g().members and h.g().offline_since == {b: heard}
    assert h.take_records() == []                      # offline, not removed: the map is unchanged
    h.run(5 * MIN, [(a, "A")])
    assert b not in h.g().members
    assert h.take_records() == [event_record("registration_expired", "B", b, None, 1, heard + 5 * MIN)]


# ---------------------------------------------------------------------------------------- sync_expired
def test_sync_expired_for_a_static_member_that_never_sent_sync_group():
    h = Harness()
    start = h.now_ms
    i1, i2 = h.join_new(["i1", "i2"])
    h.sync("g", i1, 1, "i1", assignments={i1: b"a", i2: b"b"})
    h.take_records()
    h.run(REBALANCE, [(i1, "i1"), (i2, "i2")])
    assert h.take_records() == [event_record("sync_expired", "i2", i2, None, 1, start + REBALANCE)]


# ---------------------------------------------------------------------------------------- group_full
def test_group_full_when_a_static_member_rejoins_a_group_at_max_size():
    h = Harness(CoordinatorConfig(max_group_size=2))
    i1, i2 = h.form_group(["i1", "i2"])
    h.join("g", i1, "i1")                               # rebalance: i1 joined
    t3 = h.join("g", "", "i3")                          # a new member takes the second place
    h.take_records()
    t2 = h.join("g", i2, "i2", client_id="proc-2")      # too late: the group is full
    assert h.resp(t2) == join_err(9, 81, "")
    assert h.take_records() == [event_record("group_full", "i2", i2, None, 1, h.now_ms, client_id="proc-2")]
    assert h.g().static_members == {"i1": i1, "i3": "i3-3"}
    h.advance(REBALANCE)                               # (as in Kafka, the join completes at its timer)
    assert h.resp(t3)["generation_id"] == 2


# ---------------------------------------------------------------------------------------- left / removed
@pytest.mark.parametrize("version", [0, 1, 2])
def test_left_by_member_id_before_v3(version):
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    assert h.resp(h.leave("g", i2, version=version, client_id="proc-2")) == leave_resp(version, 0)
    assert h.take_records() == [event_record("left", "i2", i2, None, 1, h.now_ms, client_id="proc-2")]


def test_left_by_member_id_without_instance_id_in_a_v3_batch():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    assert h.resp(h.leave("g", [(i2, None)], version=3)) == leave_resp(3, 0, [(i2, None, 0)])
    assert h.take_records() == [event_record("left", "i2", i2, None, 1, h.now_ms)]


def test_removed_by_an_admin_batch_with_member_id_empty_names_the_admin_client():
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"])
    h.take_records()
    t = h.leave("g", [("", "i2"), ("", "i3"), ("", "gone")], version=4, client_id="adminclient-1",
                host="/10.0.0.50")
    assert h.resp(t) == leave_resp(4, 0, [("", "i2", 0), ("", "i3", 0), ("", "gone", 25)])
    assert h.take_records() == [
        event_record("removed", "i2", i2, None, 1, h.now_ms, client_id="adminclient-1", host="/10.0.0.50"),
        event_record("removed", "i3", i3, None, 1, h.now_ms, client_id="adminclient-1", host="/10.0.0.50"),
    ]


def test_one_batch_with_left_removed_fenced_and_a_duplicate():
    h = Harness()
    i1, i2, i3, i4 = h.form_group(["i1", "i2", "i3", "i4"])
    new3 = h.resp(h.join("g", "", "i3"))["member_id"]
    h.take_records()
    t = h.leave("g", [(i1, "i1"), ("", "i2"), (i3, "i3"), ("", "i2"), (i1, "i1")])
    # the second ("", "i2") finds no mapping (25); the second (i1, "i1") finds no mapping (25)
    assert h.resp(t) == leave_resp(5, 0, [(i1, "i1", 0), ("", "i2", 0), (i3, "i3", 82), ("", "i2", 25),
                                          (i1, "i1", 25)])
    assert h.take_records() == [event_record("left", "i1", i1, None, 1, h.now_ms),
                                event_record("removed", "i2", i2, None, 1, h.now_ms),
                                event_record("fenced", "i3", i3, new3, 1, h.now_ms)]
    assert h.g().static_members == {"i3": new3, "i4": i4}


def test_leaving_last_members_events_come_before_the_empty_group_record():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.take_records()
    h.leave("g", [(i1, "i1")])
    assert h.take_records() == [event_record("left", "i1", i1, None, 1, h.now_ms),
                                group_record("g", 2, None, None, h.now_ms)]


# ---------------------------------------------------------------------------------------- forced_rebalance
def test_forced_rebalance_one_event_per_member_map_unchanged():
    h = Harness()
    tokens = [h.join("g", "", i, client_id=f"proc-{i}", host=f"/10.0.1.{n}")
              for n, i in enumerate(("i1", "i2", "i3"))]
    h.advance(0)
    ids = [h.resp(t)["member_id"] for t in tokens]
    h.sync("g", ids[0], 1, "i1", assignments={m: b"x" for m in ids})
    for m, i in zip(ids[1:], ("i2", "i3")):
        h.sync("g", m, 1, i)
    h.take_records()
    h.advance(1000)
    h.force_rebalance("g")
    assert h.g().state == PREPARING_REBALANCE and h.g().generation == 1
    assert h.take_records() == [
        event_record("forced_rebalance", i, m, m, 1, h.now_ms, client_id=f"proc-{i}", host=f"/10.0.1.{n}")
        for n, (i, m) in enumerate(zip(("i1", "i2", "i3"), ids))]


def test_refused_forced_rebalance_writes_nothing():
    from tenure.coordinator import AdminError
    h = Harness()
    h.form_group(["i1", None])
    h.take_records()
    with pytest.raises(AdminError):
        h.force_rebalance("g")
    assert h.take_records() == []


# ---------------------------------------------------------------------------------------- replay, deletion
def test_replaying_an_event_changes_no_group_and_a_tombstone_forgets_the_key():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    c = h.coordinator
    before_groups, before_offsets = copy.deepcopy(c.groups), copy.deepcopy(c.offsets)
    # an event contradicting the state: replay must still not touch the group
    c.replay(StaticMemberEventRecord("g", "i1", "removed", i1, None, 1, 5, "x", "y"))
    c.replay(StaticMemberEventRecord("g", "zz", "joined", None, "zz-9", 1, 5, "x", "y"))
    c.replay(StaticMemberEventRecord("other", "q", "joined", None, "q-1", 0, 5, "x", "y"))
    assert c.groups == before_groups and c.offsets == before_offsets
    assert c.static_event_keys == {"g": {"i1", "i2", "zz"}, "other": {"q"}}
    c.replay(StaticMemberEventRecord("g", "zz", tombstone=True))
    c.replay(StaticMemberEventRecord("other", "q", tombstone=True))
    c.replay(StaticMemberEventRecord("never", "seen", tombstone=True))     # a no-op
    assert c.static_event_keys == {"g": {"i1", "i2"}}
    assert c.groups == before_groups and c.offsets == before_offsets


def test_delete_tombstones_every_event_key_the_group_ever_had_even_after_failover():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.commit("g", i1, 1, "i1", {"t": [(0, 4)]})
    h.join("g", "", "i2")                              # replaced
    h.heartbeat("g", "stale", 1, "i2")                  # fenced
    h.leave("g", [("", "i1"), ("", "i2")])              # removed, removed: Empty
    h2 = h.failover()                                   # the keys are replayed state
    assert h2.coordinator.static_event_keys == {"g": {"i1", "i2"}}
    h2.take_records()
    assert h2.resp(h2.delete("g"))["results"][0]["error_code"] == 0
    assert h2.take_records() == [OffsetCommitRecord("g", "t", 0, tombstone=True),
                                 StaticMemberEventRecord("g", "i1", tombstone=True),
                                 StaticMemberEventRecord("g", "i2", tombstone=True),
                                 GroupMetadataRecord("g", tombstone=True)]
    assert h2.coordinator.static_event_keys == {} and h2.group == {}


def test_after_delete_and_compaction_nothing_of_the_group_is_left():
    h = Harness()
    (i1,) = h.form_group(["i1"], group_id="gone")
    h.form_group(["k1"], group_id="kept")
    h.join("gone", "", "i1")
    h.leave("gone", [("", "i1")])
    h.delete("gone")
    latest = {}
    for r in h.durable_records():
        k = wire_records.encode(r)[0]
        latest.pop(k, None)
        latest[k] = r
    # past the tombstone retention window, compaction drops the tombstones too
    survivors = [r for r in latest.values() if not r.tombstone]
    assert {r.group_id for r in survivors} == {"kept"}
    assert [r for r in survivors if isinstance(r, StaticMemberEventRecord)] == [
        event_record("joined", "k1", None, h.g("kept").static_members["k1"], 0, h.now_ms, group_id="kept")]
    fresh = GroupShard()
    for r in survivors:
        fresh.replay(r)
    assert set(fresh.groups) == {"kept"} and fresh.static_event_keys == {"kept": {"k1"}}


def test_a_recreated_group_starts_a_fresh_history():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.leave("g", [(i1, "i1")])
    h.delete("g")
    assert h.coordinator.static_event_keys == {}
    h.take_records()
    t = h.join("g", "", "i1")
    assert h.take_records() == [event_record("joined", "i1", None, "i1-2", 0, h.now_ms)]
    h.advance(0)
    assert h.resp(t)["member_id"] == "i1-2"


def test_compaction_keeps_the_latest_event_per_instance():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.advance(10)
    n1 = h.resp(h.join("g", "", "i1"))["member_id"]     # replaced
    h.advance(10)
    h.heartbeat("g", i1, 1, "i1")                      # fenced
    h.advance(10)
    n2 = h.resp(h.join("g", "", "i2"))["member_id"]     # replaced
    latest = {}
    for r in h.durable_records():
        k = wire_records.encode(r)[0]
        latest.pop(k, None)
        latest[k] = r
    events = sorted((r for r in latest.values() if isinstance(r, StaticMemberEventRecord)),
                    key=lambda r: r.group_instance_id)
    t = h.now_ms
    assert events == [event_record("fenced", "i1", i1, n1, 1, t - 10),
                      event_record("replaced", "i2", i2, n2, 1, t)]
    # the compacted events' new ids are the live map
    assert {r.group_instance_id: r.new_member_id for r in events} == h.g().static_members


def test_event_records_survive_the_wire_encoding_in_the_harness():
    """(The harness encodes and decodes every emitted record; this pins that events are among them.)"""
    h = Harness()
    h.form_group(["i1"])
    assert any(isinstance(r, StaticMemberEventRecord) for r in h.records)
    for r in h.records:
        assert wire_records.decode(*wire_records.encode(r)) == r


def test_events_are_in_the_result_that_answers_the_request():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    new = h.resp(h.join("g", "", "i2"))["member_id"]
    t = h.heartbeat("g", i2, 1, "i2")
    res = h.last_result
    assert res.responses[0][0] == t and res.records == [event_record("fenced", "i2", i2, new, 1, h.now_ms)]
    assert h.g().state == STABLE
