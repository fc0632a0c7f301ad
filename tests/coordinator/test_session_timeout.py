"""Session timeout (T1-T2)."""
from tenure.coordinator import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

from .harness import (
    NEW_MEMBER_JOIN_TIMEOUT,
    REBALANCE,
    SESSION,
    Harness,
    commit_resp,
    event_record,
    group_record,
    heartbeat_resp,
    join_err,
    join_ok,
    member_record,
)


# ---------------------------------------------------------------------------------------- T1
def test_session_timer_resets():
    h = Harness()
    tokens = [h.join("g", "", i) for i in ("i1", "i2")]
    h.advance(0)
    i1, i2 = (h.resp(t)["member_id"] for t in tokens)
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION          # at join completion
    h.advance(1000)
    s2 = h.sync("g", i2, 1, "i2")
    h.advance(1000)
    h.sync("g", i1, 1, "i1", assignments={i1: b"a", i2: b"b"})
    assert h.resp(s2)["error_code"] == 0
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION          # on assignment delivery
    h.advance(1000)
    h.heartbeat("g", i2, 1, "i2")
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION          # by Heartbeat
    h.advance(1000)
    assert h.resp(h.commit("g", i2, 1, "i2")) == commit_resp(8, {"t": [(0, 0)]})
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION          # by OffsetCommit (Stable)
    h.advance(1000)
    h.join("g", i1, "i1")                                                # PreparingRebalance
    assert h.resp(h.commit("g", i2, 1, "i2")) == commit_resp(8, {"t": [(0, 0)]})
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION          # by OffsetCommit (Preparing)
    h.advance(1000)
    t2 = h.join("g", "", "i2", session=15000)                            # static replacement
    assert h.timer("heartbeat", "g", "i2-3") == h.now_ms + 15000
    assert h.timer("heartbeat", "g", i2) is None
    assert h.resp(t2)["generation_id"] == 2


def test_commit_during_completing_rebalance_is_27_and_does_not_reset():
    h = Harness()
    start = h.now_ms
    i1, i2 = h.join_new(["i1", "i2"])
    deadline = h.timer("heartbeat", "g", i2)
    h.advance(1000)
    assert h.resp(h.commit("g", i2, 1, "i2")) == commit_resp(8, {"t": [(0, 27)]})
    assert h.timer("heartbeat", "g", i2) == deadline
    # no offset record; only the two static joins are in the log
    assert h.records == [event_record("joined", "i1", None, i1, 0, start),
                         event_record("joined", "i2", None, i2, 0, start)]


# ---------------------------------------------------------------------------------------- T2
def test_static_member_expiry_removes_it_and_rebalances_exactly_once():
    h = Harness()
    i1, i2, i3 = h.form_group(["i1", "i2", "i3"])
    h.take_records()
    alive = [(i1, "i1"), (i2, "i2")]
    expiry = h.timer("heartbeat", "g", i3)
    hb = h.run(SESSION, alive)                          # i3 is silent
    g = h.g()
    assert i3 not in g.members and g.static_members == {"i1": i1, "i2": i2}
    assert g.state == PREPARING_REBALANCE and g.generation == 1
    assert h.timer("heartbeat", "g", i3) is None
    assert h.resp(hb[-1]) == heartbeat_resp(4, 27)
    t1 = h.join("g", i1, "i1")
    t2 = h.join("g", i2, "i2")
    now = h.now_ms
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (i2, "i2", b"sub")])
    assert h.resp(t2) == join_ok(9, i2, 2, i1)
    h.sync("g", i1, 2, "i1", assignments={i1: b"x", i2: b"y"})
    h.sync("g", i2, 2, "i2")
    assert h.take_records() == [event_record("expired", "i3", i3, None, 1, expiry),
                                group_record("g", 2, "range", i1, now, [
                                    member_record(i1, "i1", b"sub", b"x"), member_record(i2, "i2", b"sub", b"y")])]
    h.run(5 * SESSION, alive)
    assert h.g().generation == 2 and h.g().state == STABLE
    # one rebalance after the initial one (generation 0 -> 1)
    assert [s for s in h.state_history() if s[0] == PREPARING_REBALANCE] == \
        [(PREPARING_REBALANCE, 0), (PREPARING_REBALANCE, 1)]
    assert expiry is not None
    # the instance comes back: a brand new static member (the mapping was dropped) -> rebalance
    t3 = h.join("g", "", "i3")
    assert h.parked(t3) and h.g().state == PREPARING_REBALANCE


def test_dynamic_member_expiry_in_stable_rebalances():
    h = Harness()
    i1, d = h.form_group(["i1", None])
    h.run(SESSION, [(i1, "i1")])
    assert d not in h.g().members and h.g().state == PREPARING_REBALANCE


def test_expiry_of_the_last_member_empties_the_group():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.take_records()
    h.advance(SESSION)
    g = h.g()
    assert g.state == EMPTY and g.generation == 2 and g.members == {} and g.static_members == {}
    assert h.take_records() == [event_record("expired", "i1", i1, None, 1, h.now_ms),
                                group_record("g", 2, None, None, h.now_ms)]


def test_parked_members_are_spared_at_session_expiry():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    t1 = h.join("g", i1, "i1")                          # parked in JoinGroup, sends no heartbeats
    h.run(REBALANCE - 1, [(i2, "i2")])
    assert i1 in h.g().members and h.parked(t1)         # well past its session timeout: spared
    h.run(1, [(i2, "i2")])                              # rebalance timeout: i2 (static) kept
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (i2, "i2", b"sub")])


def test_member_parked_in_sync_is_spared():
    h = Harness()
    tokens = [h.join("g", "", i, rebalance=60000) for i in ("i1", "i2")]
    h.advance(0)
    i1, i2 = (h.resp(t)["member_id"] for t in tokens)
    s2 = h.sync("g", i2, 1, "i2")                       # parked; the leader is slow
    h.run(3 * SESSION, [(i1, "i1")])
    assert i2 in h.g().members and h.parked(s2)
    h.sync("g", i1, 1, "i1", assignments={i1: b"a", i2: b"b"})
    assert h.resp(s2)["assignment"] == b"b"


def test_new_static_member_parked_in_join_expires_after_the_new_member_timeout():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    t3 = h.join("g", "", "i3", rebalance=400000)        # new: guarded by the 300000 ms join timeout
    i3 = "i3-3"
    assert h.timer("heartbeat", "g", i3) == h.now_ms + NEW_MEMBER_JOIN_TIMEOUT
    alive = [(i1, "i1"), (i2, "i2")]
    h.run(NEW_MEMBER_JOIN_TIMEOUT - 1, alive, every=5000)
    assert h.parked(t3)
    h.run(1, alive)
    # a new member is not spared: removed with its mapping, its parked JoinGroup answered 25
    # (Kafka answers it with memberId "" - UNKNOWN_MEMBER_ID - like every removal of a parked join)
    assert h.resp(t3) == join_err(9, 25, "")
    g = h.g()
    assert i3 not in g.members and "i3" not in g.static_members
    assert g.state == PREPARING_REBALANCE


def test_expiry_during_preparing_rebalance_may_complete_the_join():
    h = Harness()
    i1, i2, d = h.form_group(["i1", "i2", None])
    start = h.now_ms
    t1 = h.join("g", i1, "i1")
    t2 = h.join("g", i2, "i2")
    assert h.parked(t1) and h.timer("join") == start + REBALANCE
    h.advance(SESSION - 1)
    assert h.parked(t1)
    h.advance(1)                                        # d never rejoins nor heartbeats: expires
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub"), (i2, "i2", b"sub")])
    assert h.resp(t2) == join_ok(9, i2, 2, i1)
    assert h.now_ms == start + SESSION                  # well before the rebalance timeout


def test_expiry_during_completing_rebalance_rebalances():
    h = Harness()
    tokens = [h.join("g", "", i) for i in ("i1", "i2")]
    h.advance(0)
    i1, i2 = (h.resp(t)["member_id"] for t in tokens)
    assert h.g().state == COMPLETING_REBALANCE
    h.run(SESSION, [(i1, "i1")])                        # i2 never syncs nor heartbeats
    g = h.g()
    assert i2 not in g.members and "i2" not in g.static_members
    assert g.state == PREPARING_REBALANCE and g.generation == 1
    assert h.resp(h.heartbeat("g", i1, 1, "i1")) == heartbeat_resp(4, 27)
    t1 = h.join("g", i1, "i1")
    assert h.resp(t1) == join_ok(9, i1, 2, i1, members=[(i1, "i1", b"sub")])


# ------------------------------------------------------------------- timer keys of awkward group ids
def test_group_ids_with_a_nul_or_a_slash_route_their_session_timers():
    """A timer key names its group and member whatever characters they hold: the session of a member of
    "a\\x00b" expires in that group (it used to be routed to group "a", member "b\\x00<id>", and
    never expired), and "a/b" next to "a" and "a\\x00b" touches neither."""
    h = Harness()
    groups = ["a\x00b", "a/b", "a", "b"]
    ids = {gid: h.form_group(["i1"], gid)[0] for gid in groups}
    h.take_records()
    silent = "a\x00b"
    expiry = h.timer("heartbeat", silent, ids[silent])
    alive = [gid for gid in groups if gid != silent]
    t = h.now_ms
    while h.now_ms < expiry:
        for gid in alive:
            assert h.resp(h.heartbeat(gid, ids[gid], 1, "i1")) == heartbeat_resp(4, 0)
        h.advance(SESSION // 2)
    assert h.take_records() == [event_record("expired", "i1", ids[silent], None, 1, expiry, group_id=silent),
                                group_record(silent, 2, None, None, expiry, [])]
    assert h.g(silent).state == EMPTY and h.now_ms - t >= SESSION
    for gid in alive:
        assert h.g(gid).state == STABLE and list(h.g(gid).members) == [ids[gid]]


def test_timer_keys_render_as_slash_separated_names():
    from tenure.coordinator import HeartbeatKey, JoinKey, RegistrationKey
    assert HeartbeatKey("shop", "w2-1").name == "heartbeat/shop/w2-1"
    assert JoinKey("shop").name == "join/shop"
    assert RegistrationKey("a/b").name == "registration/a/b"
