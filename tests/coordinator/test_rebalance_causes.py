"""Every rebalance the coordinator starts names its cause in `Result.rebalances` as (group, cause): one
scenario per call site of `_prepare_rebalance`, asserting the Result of the very input that started it
(a timer is fired on its own with `Harness.fire`, so its Result is the last one), and that no other
input started one (`take_rebalances` collects them over every input)."""
import pytest

from tenure.coordinator import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    CoordinatorConfig,
    ExpansionKey,
    HeartbeatKey,
    RegistrationKey,
    SyncKey,
)

from .harness import SESSION, Harness, heartbeat_resp, join_ok, leave_resp


def started(h: Harness, *causes: str, group: str = "g") -> None:
    """The last input started exactly these rebalances, and nothing else started one since the last check."""
    expected = [(group, c) for c in causes]
    assert h.last_result.rebalances == expected
    assert h.take_rebalances() == expected


def formed(h: Harness, names, **kw) -> list[str]:
    ids = h.form_group(names, **kw)
    h.take_rebalances()                     # the formation's own (member_joined)
    return ids


def completing(h: Harness, names) -> list[str]:
    """`Harness.join_new`, with the formation's own rebalance (member_joined) taken."""
    ids = h.join_new(names)
    h.take_rebalances()
    return ids


def test_first_join_of_an_empty_group_is_member_joined():
    h = Harness()
    h.join("g", "", "i1")
    started(h, "member_joined")
    h.join("g", "", "i2")                   # PreparingRebalance already: joins it, starts none
    started(h)


def test_new_member_in_a_stable_group_is_member_joined():
    h = Harness()
    formed(h, ["i1", "i2"])
    t = h.join("g", "", "i3")
    assert h.parked(t) and h.g().state == PREPARING_REBALANCE
    started(h, "member_joined")
    # a KIP-394 dynamic member: the first join (79) starts nothing, the second one does
    h2 = Harness()
    formed(h2, ["i1"])
    t0 = h2.join("g", "", None)
    assert h2.resp(t0)["error_code"] == 79
    started(h2)
    h2.join("g", h2.resp(t0)["member_id"], None)
    started(h2, "member_joined")


def test_follower_with_changed_metadata_is_member_metadata_changed():
    h = Harness()
    i1, i2 = formed(h, ["i1", "i2"])
    h.join("g", i2, "i2", protocols=(("range", b"other"),))
    assert h.g().state == PREPARING_REBALANCE
    started(h, "member_metadata_changed")


def test_changed_metadata_while_completing_rebalance_is_member_metadata_changed():
    h = Harness()
    i1, i2 = completing(h, ["i1", "i2"])
    assert h.g().state == COMPLETING_REBALANCE
    h.join("g", i2, "i2", protocols=(("range", b"other"),))
    started(h, "member_metadata_changed")


def test_leader_rejoin_with_same_metadata_is_leader_rejoined():
    h = Harness()
    i1, i2 = formed(h, ["i1", "i2"])
    h.join("g", i1, "i1")
    started(h, "leader_rejoined")
    # a follower's identical rejoin starts nothing (J21)
    h2 = Harness()
    j1, j2 = formed(h2, ["i1", "i2"])
    assert h2.resp(h2.join("g", j2, "i2")) == join_ok(9, j2, 1, j1)
    started(h2)


def test_static_replacement_while_stable_starts_none():
    h = Harness()
    formed(h, ["i1", "i2"])
    t = h.join("g", "", "i2")
    assert h.resp(t)["error_code"] == 0 and h.g().state == STABLE
    started(h)


def test_static_replacement_that_changes_the_vote_is_static_member_protocol_changed():
    h = Harness()
    formed(h, ["i1", "i2"], protocols=(("range", b"a"), ("roundrobin", b"b")))
    h.join("g", "", "i2", protocols=(("roundrobin", b"rr2"),))
    assert h.g().state == PREPARING_REBALANCE
    started(h, "static_member_protocol_changed")


def test_static_replacement_while_completing_rebalance_is_static_member_replaced_during_rebalance():
    h = Harness()
    completing(h, ["i1", "i2"])
    assert h.g().state == COMPLETING_REBALANCE
    h.join("g", "", "i2")
    assert h.g().state == PREPARING_REBALANCE
    started(h, "static_member_replaced_during_rebalance")


def test_session_expiry_is_session_expired():
    h = Harness()
    i1, i2 = formed(h, ["i1", "i2"])
    h.fire(HeartbeatKey("g", i2))
    assert i2 not in h.g().members and h.g().state == PREPARING_REBALANCE
    started(h, "session_expired")


def test_registration_timeout_is_registration_expired():
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=60_000))
    i1, i2 = formed(h, ["i1", "i2"])
    h.fire(HeartbeatKey("g", i2))          # offline, tolerated: no rebalance yet
    assert h.g().offline_since == {i2: h.now_ms - SESSION} and h.g().state == STABLE
    started(h)
    assert h.resp(h.heartbeat("g", i1, 1, "i1")) == heartbeat_resp(4, 0)
    h.fire(RegistrationKey("g"))
    assert i2 not in h.g().members and h.g().state == PREPARING_REBALANCE
    started(h, "registration_expired")


def test_expansion_window_end_is_expansion_timeout():
    h = Harness(CoordinatorConfig(static_expansion_timeout_ms=60_000))
    formed(h, ["i1", "i2"])
    h.join("g", "", "i3")                   # batched: no rebalance yet
    assert h.g().state == STABLE
    started(h)
    h.fire(ExpansionKey("g"))
    assert h.g().state == PREPARING_REBALANCE
    started(h, "expansion_timeout")


def test_force_rebalance_is_forced():
    h = Harness()
    formed(h, ["i1", "i2"])
    h.force_rebalance("g")
    started(h, "forced")


def test_missing_sync_is_sync_timeout():
    h = Harness()
    i1, i2 = completing(h, ["i1", "i2"])
    h.sync("g", i1, 1, "i1", assignments={i1: b"a", i2: b"b"})     # leader syncs: Stable, i2 never does
    assert h.g().state == STABLE
    h.fire(SyncKey("g"))
    assert i2 not in h.g().members and h.g().state == PREPARING_REBALANCE
    started(h, "sync_timeout")


@pytest.mark.parametrize("version", [0, 3, 5])
def test_member_leaving_is_member_left(version):
    h = Harness()
    i1, i2 = formed(h, ["i1", "i2"])
    h.leave("g", i2 if version < 3 else [(i2, "i2")], version=version)
    assert h.g().state == PREPARING_REBALANCE
    started(h, "member_left")


def test_last_member_leaving_is_member_left_and_ends_empty():
    h = Harness()
    (i1,) = formed(h, ["i1"])
    h.leave("g", [(i1, "i1")])
    assert h.g().state == EMPTY and h.g().generation == 2
    started(h, "member_left")


def test_admin_removal_by_instance_id_is_member_removed_once_per_batch():
    h = Harness()
    i1, i2, i3 = formed(h, ["i1", "i2", "i3"])
    t = h.leave("g", [("", "i2"), ("", "i3")])
    assert h.resp(t) == leave_resp(5, 0, [("", "i2", 0), ("", "i3", 0)])
    assert h.g().state == PREPARING_REBALANCE
    started(h, "member_removed")                 # one decision per batch (L3)


def test_mixed_batch_names_its_first_removal():
    h = Harness()
    i1, i2, i3 = formed(h, ["i1", "i2", "i3"])
    h.leave("g", [(i2, "i2"), ("", "i3")])
    started(h, "member_left")


def test_heartbeat_and_rejected_requests_start_none():
    h = Harness()
    i1, i2 = formed(h, ["i1", "i2"])
    h.heartbeat("g", i1, 1, "i1")
    started(h)
    h.join("g", "bogus", "i1")                   # 82
    started(h)
    h.advance(SESSION // 2)
    started(h)
