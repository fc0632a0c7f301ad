"""SyncGroup (S1-S3) and Heartbeat (H1)."""
import pytest

from tenure.coordinator import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE

from .harness import SESSION, Harness, group_record, heartbeat_resp, member_record, sync_err, sync_ok


def _completing(h: Harness, instances=("i1", "i2", "i3")):
    tokens = [h.join("g", "", i) for i in instances]
    h.advance(0)
    ids = [h.resp(t)["member_id"] for t in tokens]
    assert h.g().state == COMPLETING_REBALANCE
    return ids


# ---------------------------------------------------------------------------------------- S1
@pytest.mark.parametrize("version", [0, 3, 5])
def test_sync_to_missing_group_is_25(version):
    h = Harness()
    assert h.resp(h.sync("nope", "m", 1, version=version)) == sync_err(version, 25)
    assert h.group == {}


def test_sync_to_empty_group_is_25():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.leave("g", [(i1, "i1")])
    assert h.g().generation == 2
    assert h.resp(h.sync("g", i1, 2, "i1")) == sync_err(5, 25)
    assert h.resp(h.sync("g", i1, 2, None)) == sync_err(5, 25)


def test_sync_check_order_identity_generation_protocol_state():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    # identity first: an unknown member with a wrong generation and wrong protocol -> 25
    assert h.resp(h.sync("g", "bogus", 7, None, protocol_name="x")) == sync_err(5, 25)
    assert h.resp(h.sync("g", "bogus", 7, "i1", protocol_name="x")) == sync_err(5, 82)
    assert h.resp(h.sync("g", i1, 7, "nobody")) == sync_err(5, 25)
    # then the generation: wrong generation and wrong protocol -> 22
    assert h.resp(h.sync("g", i1, 7, "i1", protocol_name="x")) == sync_err(5, 22)
    # then the protocol type / name (v5)
    assert h.resp(h.sync("g", i1, 1, "i1", protocol_type="connect")) == sync_err(5, 23)
    assert h.resp(h.sync("g", i1, 1, "i1", protocol_name="roundrobin")) == sync_err(5, 23)
    # then PreparingRebalance -> 27 (and a protocol mismatch still wins over it)
    h.join("g", i1, "i1")
    assert h.g().state == PREPARING_REBALANCE
    assert h.resp(h.sync("g", i2, 1, "i2", protocol_name="roundrobin")) == sync_err(5, 23)
    assert h.resp(h.sync("g", i2, 1, "i2")) == sync_err(5, 27)
    assert h.resp(h.sync("g", i2, 1, "i2", version=4)) == sync_err(4, 27)


def test_sync_v4_and_older_carry_no_protocol_fields():
    h = Harness()
    i1, i2 = _completing(h, ("i1", "i2"))
    s1 = h.sync("g", i1, 1, "i1", version=3, assignments={i1: b"a", i2: b"b"})
    assert h.resp(s1) == sync_ok(3, b"a")
    assert "protocol_type" not in h.resp(s1)
    s2 = h.sync("g", i2, 1, "i2", version=0)
    assert h.resp(s2) == sync_ok(0, b"b")


# ---------------------------------------------------------------------------------------- S2
def test_completing_rebalance_followers_park_until_leader_assigns():
    h = Harness()
    i1, i2, i3 = _completing(h)
    t0 = h.now_ms
    s2 = h.sync("g", i2, 1, "i2")
    assert h.parked(s2) and h.g().state == COMPLETING_REBALANCE
    h.take_records()
    # the leader leaves i3 out and names someone who is not a member
    s1 = h.sync("g", i1, 1, "i1", assignments={i1: b"A1", i2: b"A2", "ghost": b"G"})
    assert h.resp(s1) == sync_ok(5, b"A1")
    assert h.resp(s2) == sync_ok(5, b"A2")
    assert h.take_records() == [group_record("g", 1, "range", i1, t0, [
        member_record(i1, "i1", b"sub", b"A1"),
        member_record(i2, "i2", b"sub", b"A2"),
        member_record(i3, "i3", b"sub", b""),
    ])]
    g = h.g()
    assert g.state == STABLE and "ghost" not in g.members
    assert h.timer("sync") is not None                 # i3 has still to sync
    s3 = h.sync("g", i3, 1, "i3")
    assert h.resp(s3) == sync_ok(5, b"")
    assert h.timer("sync") is None
    # assignment delivery resets the session timers
    for mid in (i1, i2, i3):
        assert h.timer("heartbeat", "g", mid) == t0 + SESSION


def test_leader_sync_completes_even_when_followers_sync_later():
    h = Harness()
    i1, i2 = _completing(h, ("i1", "i2"))
    h.advance(100)
    s1 = h.sync("g", i1, 1, "i1", assignments={i1: b"A1", i2: b"A2"})
    assert h.resp(s1) == sync_ok(5, b"A1")
    h.advance(100)
    assert h.resp(h.sync("g", i2, 1, "i2")) == sync_ok(5, b"A2")


# ---------------------------------------------------------------------------------------- S3
def test_stable_sync_returns_current_assignment_and_ignores_new_assignments():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    s1 = h.sync("g", i1, 1, "i1", assignments={i1: b"NEW1", i2: b"NEW2"})
    assert h.resp(s1) == sync_ok(5, b"assign-0")
    assert h.resp(h.sync("g", i2, 1, "i2")) == sync_ok(5, b"assign-1")
    assert h.take_records() == []
    assert h.g().members[i2].assignment == b"assign-1"


# ---------------------------------------------------------------------------------------- H1
@pytest.mark.parametrize("version", [0, 3, 4])
def test_heartbeat_unknown_group_is_25(version):
    h = Harness()
    assert h.resp(h.heartbeat("nope", "m", 1, version=version)) == heartbeat_resp(version, 25)
    assert h.group == {}


def test_heartbeat_identity_then_generation():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    assert h.resp(h.heartbeat("g", "bogus", 9)) == heartbeat_resp(4, 25)
    assert h.resp(h.heartbeat("g", "bogus", 9, "i1")) == heartbeat_resp(4, 82)
    assert h.resp(h.heartbeat("g", i1, 9, "nobody")) == heartbeat_resp(4, 25)
    assert h.resp(h.heartbeat("g", i1, 9, "i1")) == heartbeat_resp(4, 22)
    assert h.resp(h.heartbeat("g", i1, 1, "i1")) == heartbeat_resp(4, 0)
    assert h.resp(h.heartbeat("g", i2, 1, version=0)) == heartbeat_resp(0, 0)


def test_heartbeat_on_empty_group_is_25():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.leave("g", [(i1, "i1")])
    assert h.resp(h.heartbeat("g", i1, 2, "i1")) == heartbeat_resp(4, 25)
    assert h.resp(h.heartbeat("g", i1, 2)) == heartbeat_resp(4, 25)


def test_heartbeat_states_and_timer_reset():
    h = Harness()
    tokens = [h.join("g", "", i) for i in ("i1", "i2")]
    h.advance(0)
    i1, i2 = (h.resp(t)["member_id"] for t in tokens)
    # CompletingRebalance -> 0, timer reset
    h.advance(4000)
    assert h.resp(h.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 0)
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION
    h.sync("g", i1, 1, "i1", assignments={})
    h.sync("g", i2, 1, "i2")
    # Stable -> 0, timer reset
    h.advance(4000)
    assert h.resp(h.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 0)
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION
    # PreparingRebalance -> 27, and the timer is still reset
    h.join("g", i1, "i1")
    h.advance(4000)
    assert h.resp(h.heartbeat("g", i2, 1, "i2")) == heartbeat_resp(4, 27)
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION
    # a heartbeat keeps a member alive indefinitely
    h.run(5 * SESSION, [(i2, "i2")], every=SESSION - 1)
    assert i2 in h.g().members
    assert h.g().state == PREPARING_REBALANCE


def test_failed_heartbeat_does_not_reset_timer():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    deadline = h.timer("heartbeat", "g", i2)
    h.advance(1000)
    assert h.resp(h.heartbeat("g", i2, 5, "i2")) == heartbeat_resp(4, 22)
    assert h.timer("heartbeat", "g", i2) == deadline
