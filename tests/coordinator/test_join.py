"""JoinGroup: gating (G2, J1-J5), KIP-394 (J6), first static join (J7-J11), initial delay and join
completion (J12-J16). Item labels refer to docs/behaviour.md."""
import pytest

from tenure.coordinator import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, CoordinatorConfig

from .harness import (
    NEW_MEMBER_JOIN_TIMEOUT,
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

ALL_JOIN_VERSIONS = range(0, 10)


# ---------------------------------------------------------------------------------------- G2
@pytest.mark.parametrize("version", [0, 4, 9])
def test_join_with_empty_group_id_is_invalid_group_id(version):
    h = Harness()
    t = h.join("", version=version)
    assert h.resp(t) == join_err(version, 24, "")
    assert h.group == {} and h.records == []


def test_sync_heartbeat_leave_with_empty_group_id_are_invalid_group_id():
    h = Harness()
    assert h.resp(h.sync("", "m", 1, version=5)) == sync_err(5, 24)
    assert h.resp(h.sync("", "m", 1, version=0)) == sync_err(0, 24)
    assert h.resp(h.heartbeat("", "m", 1)) == heartbeat_resp(4, 24)
    assert h.resp(h.leave("", [("m", None)], version=3)) == leave_resp(3, 24, [])
    assert h.resp(h.leave("", "m", version=1)) == leave_resp(1, 24)
    assert h.group == {} and h.records == []


# ---------------------------------------------------------------------------------------- J1
@pytest.mark.parametrize("session", [5999, 1800001])
@pytest.mark.parametrize("instance_id", [None, "i1"])
def test_session_timeout_out_of_bounds_is_26(session, instance_id):
    h = Harness()
    t = h.join(instance_id=instance_id, session=session)
    assert h.resp(t) == join_err(9, 26, "")
    assert h.group == {} and h.records == [] and h.timers == {}


@pytest.mark.parametrize("session", [6000, 1800000])
def test_session_timeout_bounds_are_inclusive(session):
    h = Harness()
    t = h.join(instance_id="i1", session=session)
    assert h.parked(t)                      # accepted: parked in the initial rebalance
    h.advance(0)
    assert h.resp(t)["error_code"] == 0


def test_session_timeout_checked_before_unknown_member_and_protocols():
    h = Harness()
    # unknown group with a member id (would be 25) and no protocols (would be 23): 26 wins, id echoed
    t = h.join("g", "someone", "i1", session=100, protocols=())
    assert h.resp(t) == join_err(9, 26, "someone")
    assert h.group == {}


def test_session_timeout_checked_for_a_static_member_of_a_stable_group():
    h = Harness()
    ids = h.form_group(["i1", "i2"])
    formed = h.now_ms
    t = h.join("g", "", "i1", session=5000)            # would be a static replacement
    assert h.resp(t) == join_err(9, 26, "")
    assert h.g().static_members == {"i1": ids[0], "i2": ids[1]}
    assert len(h.records) == 3                         # nothing written since the group formed
    assert h.records == [event_record("joined", "i1", None, ids[0], 0, formed),
                         event_record("joined", "i2", None, ids[1], 0, formed),
                         group_record("g", 1, "range", ids[0], formed, [
                             member_record(ids[0], "i1", b"sub", b"assign-0"),
                             member_record(ids[1], "i2", b"sub", b"assign-1")])]


def test_session_bounds_follow_the_config():
    h = Harness(CoordinatorConfig(min_session_timeout_ms=100, max_session_timeout_ms=200))
    assert h.resp(h.join(instance_id="i1", session=99)) == join_err(9, 26, "")
    assert h.resp(h.join(instance_id="i1", session=201)) == join_err(9, 26, "")
    t = h.join(instance_id="i1", session=200)
    h.advance(0)
    assert h.resp(t)["error_code"] == 0


# ---------------------------------------------------------------------------------------- J2
@pytest.mark.parametrize("instance_id", [None, "i1"])
def test_unknown_group_with_member_id_is_25_and_group_not_created(instance_id):
    h = Harness()
    t = h.join("g", "ghost", instance_id)
    assert h.resp(t) == join_err(9, 25, "ghost")
    assert h.group == {} and h.records == [] and h.timers == {}


# ---------------------------------------------------------------------------------------- J3
def test_empty_group_with_empty_protocol_type_is_23():
    h = Harness()
    assert h.resp(h.join(instance_id="i1", protocol_type="")) == join_err(9, 23, "")


def test_empty_group_with_no_protocols_is_23():
    h = Harness()
    assert h.resp(h.join(instance_id="i1", protocols=())) == join_err(9, 23, "")


def test_non_empty_group_with_other_protocol_type_is_23():
    h = Harness()
    ids = h.form_group(["i1"])
    assert h.resp(h.join(instance_id="i2", protocol_type="connect")) == join_err(9, 23, "")
    # a known member changing type: its id is echoed
    assert h.resp(h.join("g", ids[0], "i1", protocol_type="connect")) == join_err(9, 23, ids[0])
    assert h.g().state == STABLE and h.g().generation == 1


def test_non_empty_group_with_no_common_protocol_is_23():
    h = Harness()
    h.form_group(["i1"], protocols=(("range", b"a"), ("roundrobin", b"b")))
    assert h.resp(h.join(instance_id="i2", protocols=(("sticky", b"c"),))) == join_err(9, 23, "")
    # supporting just one of the group's protocols is enough
    t = h.join(instance_id="i3", protocols=(("sticky", b"c"), ("roundrobin", b"d")))
    assert h.parked(t)
    assert h.g().state == PREPARING_REBALANCE


# ---------------------------------------------------------------------------------------- J4
@pytest.mark.parametrize("version", ALL_JOIN_VERSIONS)
def test_join_error_shape_per_version(version):
    """generation -1, protocol type/name null (protocol name "" before v7), leader "", no members,
    member id echoed for a known one."""
    h = Harness()
    ids = h.form_group(["i1"])
    t = h.join("g", "stranger", None, version=version)
    r = h.resp(t)
    assert r == join_err(version, 25, "stranger")
    assert r["generation_id"] == -1 and r["leader"] == "" and r["members"] == []
    if version >= 7:
        assert r["protocol_type"] is None and r["protocol_name"] is None
    else:
        assert r["protocol_name"] == ""
    assert ids


# ---------------------------------------------------------------------------------------- J5
def test_max_size_full_stable_group_rejects_new_static_member_and_restarting_instance():
    h = Harness(CoordinatorConfig(max_group_size=2))
    ids = h.form_group(["i1", "i2"])
    h.take_records()
    assert h.resp(h.join(instance_id="i3")) == join_err(9, 81, "")
    # a restarting static instance arrives with memberId "" and counts as new
    assert h.resp(h.join(instance_id="i1")) == join_err(9, 81, "")
    g = h.g()
    assert g.state == STABLE and g.generation == 1 and list(g.members) == ids
    assert g.static_members == {"i1": ids[0], "i2": ids[1]}
    assert h.take_records() == []
    # an existing member is still accepted (follower, same protocols: current generation)
    t = h.join("g", ids[1], "i2")
    assert h.resp(t) == join_ok(9, ids[1], 1, ids[0])


def test_max_size_full_stable_group_rejects_dynamic_join_before_kip394():
    h = Harness(CoordinatorConfig(max_group_size=1))
    h.form_group([None])
    assert h.resp(h.join("g", "", None, version=9)) == join_err(9, 81, "")
    assert h.g().pending_members == set()


def test_max_size_empty_group_always_accepts_then_preparing_counts_awaiting():
    h = Harness(CoordinatorConfig(max_group_size=1))
    t1 = h.join(instance_id="i1")                      # Empty: accepted
    assert h.parked(t1) and h.g().state == PREPARING_REBALANCE
    t2 = h.join(instance_id="i2")                      # one awaiting join already
    assert h.resp(t2) == join_err(9, 81, "")
    h.advance(0)
    assert h.resp(t1)["error_code"] == 0 and list(h.g().members) == [h.resp(t1)["member_id"]]


def test_max_size_preparing_rebalance_kicks_out_the_last_rejoining_member():
    h = Harness(CoordinatorConfig(max_group_size=2))
    a, b = h.form_group([None, None])
    ta = h.join("g", a, None)                          # leader rejoins: PreparingRebalance, 1 awaiting
    c, tc = h.join_dynamic("g")                        # 79 accepted (1 < 2), then c joins: 2 awaiting
    assert h.parked(ta) and h.parked(tc)
    tb = h.join("g", b, None)                          # b is a member but not awaiting; 2 awaiting = max
    assert h.resp(tb) == join_err(9, 81, "")
    assert b not in h.g().members
    h.advance(REBALANCE)
    assert h.resp(ta) == join_ok(9, a, 2, a, members=[(a, None, b"sub"), (c, None, b"sub")])
    assert h.resp(tc) == join_ok(9, c, 2, a)


def test_max_size_preparing_rebalance_accepts_member_already_awaiting():
    h = Harness(CoordinatorConfig(max_group_size=2))
    a, b = h.form_group([None, None])
    h.join("g", a, None)                               # PreparingRebalance, 1 awaiting
    c, tc = h.join_dynamic("g")                        # 2 awaiting = max
    ta = h.join("g", a, None)                          # already awaiting: accepted although full
    assert h.parked(ta) and a in h.g().members
    h.run(REBALANCE, [(b, None)])                      # b stays alive but never rejoins: removed at the end
    assert h.resp(ta) == join_ok(9, a, 2, a, members=[(a, None, b"sub"), (c, None, b"sub")])
    assert h.resp(tc) == join_ok(9, c, 2, a)
    assert set(h.g().members) == {a, c}


# ---------------------------------------------------------------------------------------- J6
@pytest.mark.parametrize("version", [4, 5, 6, 7, 8, 9])
def test_kip394_new_dynamic_member_gets_79_and_is_pending(version):
    h = Harness()
    t = h.join("g", "", None, version=version, client_id="app")
    mid = "app-1"
    assert h.resp(t) == join_err(version, 79, mid)
    g = h.g()
    assert g.members == {} and g.pending_members == {mid} and g.state == EMPTY
    assert h.timer("pending", "g", mid) == h.now_ms + SESSION
    assert h.records == []
    # rejoining with the id adds the member
    t2 = h.join("g", mid, None, version=version, client_id="app")
    assert h.parked(t2) and mid in h.g().members and h.g().pending_members == set()
    h.advance(0)
    assert h.resp(t2) == join_ok(version, mid, 1, mid, members=[(mid, None, b"sub")])


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_before_v4_a_new_dynamic_member_is_added_straight_away(version):
    h = Harness()
    t = h.join("g", "", None, version=version, client_id="old")
    assert h.parked(t)
    assert list(h.g().members) == ["old-1"] and h.g().pending_members == set()
    h.advance(0)
    assert h.resp(t) == join_ok(version, "old-1", 1, "old-1", members=[("old-1", None, b"sub")])
    m = h.g().members["old-1"]
    if version == 0:                                   # v0: the session timeout is the rebalance timeout
        assert m.rebalance_timeout_ms == SESSION
    else:
        assert m.rebalance_timeout_ms == REBALANCE


def test_kip394_pending_member_blocks_join_completion_until_it_expires():
    h = Harness()
    (a,) = h.form_group([None])
    t79 = h.join("g", "", None)
    pending = h.resp(t79)["member_id"]
    ta = h.join("g", a, None)                          # leader rejoins: rebalance
    assert h.g().state == PREPARING_REBALANCE and h.parked(ta)
    h.advance(SESSION - 1)
    assert h.parked(ta)                                # the pending id still blocks
    h.advance(1)                                       # pending id expires -> join completes
    assert h.resp(ta) == join_ok(9, a, 2, a, members=[(a, None, b"sub")])
    assert h.g().pending_members == set()
    # the expired id is no longer accepted
    assert h.resp(h.join("g", pending, None)) == join_err(9, 25, pending)


def test_kip394_pending_member_rejoin_completes_the_join():
    h = Harness()
    (a,) = h.form_group([None])
    p, tp = h.join_dynamic("g")                        # p joins a Stable group: rebalance
    assert h.g().state == PREPARING_REBALANCE
    ta = h.join("g", a, None)                          # all joined -> completes early
    assert h.resp(ta) == join_ok(9, a, 2, a, members=[(a, None, b"sub"), (p, None, b"sub")])
    assert h.resp(tp) == join_ok(9, p, 2, a)


# ---------------------------------------------------------------------------------------- J7
@pytest.mark.parametrize("version", [5, 6, 7, 8, 9])
def test_first_static_join_never_79(version):
    h = Harness()
    t = h.join("g", "", "inst", version=version)
    assert h.parked(t)                                 # no 79: added at once
    g = h.g()
    assert list(g.members) == ["inst-1"] and g.members["inst-1"].is_new
    assert g.static_members == {"inst": "inst-1"} and g.pending_members == set()
    # flagged new: the join timeout for new members guards it, not the session timeout
    assert h.timer("heartbeat", "g", "inst-1") == h.now_ms + NEW_MEMBER_JOIN_TIMEOUT
    h.advance(0)
    assert h.resp(t) == join_ok(version, "inst-1", 1, "inst-1", members=[("inst-1", "inst", b"sub")])
    assert not h.g().members["inst-1"].is_new
    assert h.timer("heartbeat", "g", "inst-1") == h.now_ms + SESSION


@pytest.mark.parametrize("version", [5, 9])
def test_first_static_join_into_stable_group_never_79(version):
    h = Harness()
    ids = h.form_group(["i1"])
    t = h.join("g", "", "i2", version=version)
    assert h.parked(t)
    assert h.g().static_members == {"i1": ids[0], "i2": "i2-2"}


# ---------------------------------------------------------------------------------------- J8, J11, J12
def test_empty_group_first_join_starts_initial_delay():
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    t0 = h.now_ms
    t = h.join(instance_id="i1")
    assert h.parked(t) and h.g().state == PREPARING_REBALANCE
    assert h.timer("join") == t0 + 3000
    h.advance(2999)
    assert h.parked(t)                                 # the initial rebalance never completes early
    h.advance(1)
    assert h.resp(t) == join_ok(9, "i1-1", 1, "i1-1", members=[("i1-1", "i1", b"sub")])
    assert h.g().state == COMPLETING_REBALANCE


def test_initial_delay_is_extended_while_members_keep_joining():
    """delay 3000, rebalance timeout 8000: remaining 5000. A join at +1000 re-arms 3000 (remaining
    2000); a join at +4000 re-arms min(3000, 2000) = 2000 (remaining 0); a join at +7000 cannot extend
    any further: the rebalance completes at +8000, the rebalance timeout."""
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    start = h.now_ms
    t1 = h.join(instance_id="i1", rebalance=8000)
    h.advance(1000)
    t2 = h.join(instance_id="i2", rebalance=8000)
    h.advance(2000)                                    # +3000: re-armed
    assert h.parked(t1) and h.timer("join") == start + 6000
    h.advance(1000)
    t3 = h.join(instance_id="i3", rebalance=8000)      # +4000 (group in PreparingRebalance: parked, 14)
    h.advance(2000)                                    # +6000: re-armed for the remaining 2000
    assert h.parked(t1) and h.timer("join") == start + 8000
    h.advance(1000)
    t4 = h.join(instance_id="i4", rebalance=8000)      # +7000
    h.advance(999)
    assert h.parked(t1)
    h.advance(1)                                       # +8000
    members = [("i1-1", "i1", b"sub"), ("i2-2", "i2", b"sub"), ("i3-3", "i3", b"sub"), ("i4-4", "i4", b"sub")]
    assert h.resp(t1) == join_ok(9, "i1-1", 1, "i1-1", members=members)
    for t, mid in [(t2, "i2-2"), (t3, "i3-3"), (t4, "i4-4")]:
        assert h.resp(t) == join_ok(9, mid, 1, "i1-1")


def test_initial_delay_not_extended_without_new_members():
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    start = h.now_ms
    t1 = h.join(instance_id="i1")
    h.advance(1000)
    t2 = h.join(instance_id="i2")
    h.advance(2000)                                    # re-armed once because i2 joined
    assert h.timer("join") == start + 6000
    h.advance(3000)                                    # nobody new: completes at +6000
    assert h.resp(t1)["generation_id"] == 1 and h.resp(t2)["generation_id"] == 1
    assert h.now_ms == start + 6000


def test_initial_delay_with_zero_remaining_completes_at_the_delay():
    """rebalance timeout <= delay: remaining 0, a late joiner does not extend the delay."""
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    start = h.now_ms
    t1 = h.join(instance_id="i1", rebalance=2000)
    h.advance(1000)
    t2 = h.join(instance_id="i2", rebalance=2000)
    h.advance(2000)
    assert h.resp(t1)["generation_id"] == 1 and h.resp(t2)["generation_id"] == 1
    assert h.now_ms == start + 3000


def test_initial_rebalance_does_not_complete_early_when_a_known_member_rejoins():
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    t1 = h.join("g", "", None, version=3)              # v3: added at once as "client-1"
    h.advance(500)
    t1b = h.join("g", "client-1", None, version=3)     # the same member again: supersedes, still waits
    assert h.parked(t1b)
    assert h.g().state == PREPARING_REBALANCE
    h.advance(2500)
    assert h.resp(t1b)["generation_id"] == 1
    assert h.resp(t1)["error_code"] != 0               # the superseded request does not stay parked


# ---------------------------------------------------------------------------------------- J9
def test_new_static_member_rebalances_stable_group_and_completes_early():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    t3 = h.join("g", "", "i3", rebalance=20000)
    assert h.parked(t3) and h.g().state == PREPARING_REBALANCE
    # join timer = the largest member rebalance timeout (30000 here, not i3's 20000)
    assert h.timer("join") == h.now_ms + REBALANCE
    assert h.resp(h.heartbeat("g", i1, 1, "i1")) == heartbeat_resp(4, 27)
    h.advance(100)
    t1 = h.join("g", i1, "i1")
    assert h.parked(t1)
    h.advance(100)
    t2 = h.join("g", i2, "i2")                         # everyone in: completes at once
    i3 = "i3-3"
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (i2, "i2", b"sub"), (i3, "i3", b"sub")])
    assert h.resp(t2) == join_ok(9, i2, 2, i1)
    assert h.resp(t3) == join_ok(9, i3, 2, i1)
    assert h.timer("join") is None


def test_join_timer_uses_largest_rebalance_timeout_of_members():
    h = Harness()
    h.join("g", "", "i1", rebalance=45000)
    h.advance(0)
    h.take_records()
    t2 = h.join("g", "", "i2", rebalance=20000)        # group CompletingRebalance -> rebalance
    assert h.parked(t2)
    assert h.timer("join") == h.now_ms + 45000


# ---------------------------------------------------------------------------------------- J10
def test_static_join_during_completing_rebalance_answers_parked_syncs_27_and_resets_assignments():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])               # gen 1, Stable with assignments
    t1 = h.join("g", i1, "i1")                         # leader rejoin -> rebalance
    h.join("g", i2, "i2")                              # completes: gen 2, CompletingRebalance
    assert h.resp(t1)["generation_id"] == 2 and h.g().state == COMPLETING_REBALANCE
    s2 = h.sync("g", i2, 2, "i2")                      # follower parks
    assert h.parked(s2)
    assert h.g().members[i1].assignment == b"assign-0"   # gen 1 assignments still held
    t3 = h.join("g", "", "i3")
    assert h.resp(s2) == sync_err(5, 27)
    assert h.parked(t3) and h.g().state == PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in h.g().members.values())
    assert h.timer("sync") is None


# ---------------------------------------------------------------------------------------- J13
def test_rebalance_timeout_removes_dynamic_laggards_keeps_static_and_elects_rejoined_leader():
    h = Harness()
    i1, d, i2 = h.form_group(["i1", None, "i2"])
    h.take_records()
    # i2 rejoins with new metadata: rebalance; i1 (leader, static) and d (dynamic) never rejoin
    t2 = h.join("g", i2, "i2", protocols=(("range", b"new"),))
    assert h.g().state == PREPARING_REBALANCE
    h.run(REBALANCE, [(i1, "i1"), (d, None)], every=3000)  # they stay alive, but do not rejoin
    assert d not in h.g().members                      # dynamic laggard removed
    assert h.timer("heartbeat", "g", d) is None
    # i1 is kept with its old metadata and listed for the new leader i2
    assert h.resp(t2) == join_ok(9, i2, 2, i2, members=[(i1, "i1", b"sub"), (i2, "i2", b"new")])
    g = h.g()
    assert g.leader_id == i2 and g.state == COMPLETING_REBALANCE and set(g.members) == {i1, i2}
    assert g.static_members == {"i1": i1, "i2": i2}


def test_rebalance_timeout_with_nobody_rejoined_rearms_the_join_timer():
    h = Harness()
    i1, i2, d = h.form_group(["i1", "i2", None])
    alive = [(i1, "i1"), (i2, "i2")]
    h.run(SESSION, alive, every=3000)                  # d stops heartbeating and expires: rebalance
    assert d not in h.g().members and h.g().state == PREPARING_REBALANCE
    first_deadline = h.timer("join")
    h.run(first_deadline - h.now_ms, alive, every=1000)
    # nobody rejoined but the group is not empty: wait another rebalance timeout
    assert h.g().state == PREPARING_REBALANCE and h.g().generation == 1
    assert h.timer("join") == first_deadline + REBALANCE
    t1 = h.join("g", i1, "i1")
    assert h.parked(t1)
    h.run(REBALANCE, [(i2, "i2")], every=3000)
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (i2, "i2", b"sub")])


# ---------------------------------------------------------------------------------------- J14
@pytest.mark.parametrize("version", [1, 3, 5, 6, 7, 9])
def test_join_completion_votes_protocol_and_answers_every_member(version):
    h = Harness()
    static = version >= 5                              # instance ids exist from v5; v1-3 add dynamic members at once
    p1 = (("roundrobin", b"r1"), ("range", b"g1"))
    p2 = (("range", b"g2"), ("roundrobin", b"r2"))
    p3 = (("range", b"g3"), ("roundrobin", b"r3"), ("sticky", b"s3"))
    iids = ["i1", "i2", "i3"] if static else [None, None, None]
    tokens = [h.join("g", "", iid, version=version, protocols=p) for iid, p in zip(iids, (p1, p2, p3))]
    now = h.now_ms
    h.advance(0)
    ids = [h.resp(t)["member_id"] for t in tokens]
    assert ids == (["i1-1", "i2-2", "i3-3"] if static else ["client-1", "client-2", "client-3"])
    # roundrobin gets 1 vote, range 2; sticky is not supported by everyone
    members = [(ids[0], iids[0], b"g1"), (ids[1], iids[1], b"g2"), (ids[2], iids[2], b"g3")]
    assert h.resp(tokens[0]) == join_ok(version, ids[0], 1, ids[0], members=members)
    assert h.resp(tokens[1]) == join_ok(version, ids[1], 1, ids[0])
    assert h.resp(tokens[2]) == join_ok(version, ids[2], 1, ids[0])
    g = h.g()
    assert g.protocol_name == "range" and g.state == COMPLETING_REBALANCE
    assert g.pending_sync == set(ids)
    for mid in ids:
        assert h.timer("heartbeat", "g", mid) == now + SESSION
    assert h.timer("sync") == now + REBALANCE
    assert h.timer("join") is None


def test_join_completion_ignores_protocol_not_supported_by_all():
    h = Harness()
    t1 = h.join(instance_id="i1", protocols=(("sticky", b"s"), ("range", b"r1")))
    t2 = h.join(instance_id="i2", protocols=(("range", b"r2"),))
    h.advance(0)
    assert h.resp(t1) == join_ok(9, "i1-1", 1, "i1-1", members=[("i1-1", "i1", b"r1"), ("i2-2", "i2", b"r2")])
    assert h.resp(t2) == join_ok(9, "i2-2", 1, "i1-1")


def test_join_response_protocol_type_per_version():
    """v7+ carries the protocol type; before v7 the field does not exist."""
    h = Harness()
    t6 = h.join(instance_id="a", version=6)
    t7 = h.join(instance_id="b", version=7)
    h.advance(0)
    assert "protocol_type" not in h.resp(t6) and h.resp(t6)["protocol_name"] == "range"
    assert h.resp(t7)["protocol_type"] == "consumer" and h.resp(t7)["protocol_name"] == "range"
    assert "skip_assignment" not in h.resp(t7)


# ---------------------------------------------------------------------------------------- J15
def test_join_completion_with_no_members_goes_empty_and_writes_record():
    h = Harness()
    a, b = h.form_group([None, None])
    h.take_records()
    h.run(SESSION, [(b, None)], every=3000)            # a stops heartbeating: removed, rebalance
    assert a not in h.g().members and h.g().state == PREPARING_REBALANCE
    deadline = h.timer("join")
    h.run(deadline - h.now_ms, [(b, None)], every=3000)   # b heartbeats (27) but never rejoins
    g = h.g()
    assert g.state == EMPTY and g.generation == 2 and g.members == {} and g.leader_id is None
    assert h.take_records() == [group_record("g", 2, None, None, deadline)]


# ---------------------------------------------------------------------------------------- J16
def test_pending_sync_expiry_removes_static_follower_and_rebalances():
    h = Harness()
    t1 = h.join(instance_id="i1")
    t2 = h.join(instance_id="i2")
    h.advance(0)
    i1, i2 = h.resp(t1)["member_id"], h.resp(t2)["member_id"]
    start = h.now_ms
    s1 = h.sync("g", i1, 1, "i1", assignments={i1: b"a1", i2: b"a2"})
    assert h.resp(s1) == sync_ok(5, b"a1") and h.g().state == STABLE
    assert h.timer("sync") == start + REBALANCE        # i2 has still not synced
    h.take_records()
    h.run(REBALANCE, [(i1, "i1"), (i2, "i2")], every=3000)   # i2 heartbeats but never syncs
    g = h.g()
    assert i2 not in g.members and "i2" not in g.static_members
    assert g.state == PREPARING_REBALANCE and g.generation == 1
    assert h.timer("heartbeat", "g", i2) is None
    assert h.resp(h.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 25)
    t1b = h.join("g", i1, "i1")
    assert h.resp(t1b) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub")])


def test_pending_sync_expiry_of_leader_answers_parked_follower_sync_27():
    h = Harness()
    start = h.now_ms
    t1 = h.join(instance_id="i1")
    t2 = h.join(instance_id="i2")
    h.advance(0)
    i1, i2 = h.resp(t1)["member_id"], h.resp(t2)["member_id"]
    s2 = h.sync("g", i2, 1, "i2")
    assert h.parked(s2)
    h.run(REBALANCE, [(i1, "i1"), (i2, "i2")], every=3000)
    assert h.resp(s2) == sync_err(5, 27)
    g = h.g()
    assert i1 not in g.members and g.leader_id == i2 and g.state == PREPARING_REBALANCE
    # no GroupMetadata record (no generation became stable); the map's history only
    assert h.records == [event_record("joined", "i1", None, i1, 0, start),
                         event_record("joined", "i2", None, i2, 0, start),
                         event_record("sync_expired", "i1", i1, None, 1, start + REBALANCE)]
