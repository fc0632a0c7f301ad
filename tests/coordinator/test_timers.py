"""Typed timer keys and the timer wheel (coordinator/timers.py)."""
from tenure.coordinator import EMPTY, STABLE, TimerOp
from tenure.coordinator import (
    KEY_TYPES, ExpansionKey, HeartbeatKey, JoinKey, PendingKey, RegistrationKey, SyncKey, TimerWheel,
)

from .harness import SESSION, Harness, heartbeat_resp


def test_keys_are_values_of_their_kind():
    assert HeartbeatKey("g", "m") == HeartbeatKey("g", "m") and hash(HeartbeatKey("g", "m")) == hash(HeartbeatKey("g", "m"))
    assert HeartbeatKey("g", "m") != PendingKey("g", "m")         # same ids, other kind
    assert JoinKey("g") != SyncKey("g") != ExpansionKey("g") != RegistrationKey("g")
    assert {cls.kind for cls in KEY_TYPES.values()} == set(KEY_TYPES) == {
        "heartbeat", "pending", "join", "sync", "expansion", "registration", "consumer-session", "consumer-rebalance",
        "share-session", "consumer-join", "consumer-sync", "consumer-hold"}
    assert PendingKey("g", "m").name == "pending/g/m" and SyncKey("g").name == "sync/g"
    assert ExpansionKey("g").name == "expansion/g"
    # names are for display: two keys may render alike and stay apart
    a, b = HeartbeatKey("a/b", "c"), HeartbeatKey("a", "b/c")
    assert a.name == b.name == "heartbeat/a/b/c" and a != b and len({a, b}) == 2


def test_wheel_orders_by_deadline_then_arming_order():
    w = TimerWheel()
    w.arm(JoinKey("z"), 100)
    w.arm(HeartbeatKey("a", "m"), 50)
    w.arm(SyncKey("b"), 100)
    w.arm(JoinKey("a"), 100)
    assert w.next_deadline() == 50 and len(w) == 4
    assert w.due(100) == [HeartbeatKey("a", "m"), JoinKey("z"), SyncKey("b"), JoinKey("a")]
    assert w.pop_due(49) is None
    assert w.pop_due(100) == (HeartbeatKey("a", "m"), 50)
    w.arm(JoinKey("z"), 100)                     # re-armed: same deadline, now last in line
    assert [w.pop_due(100)[0] for _ in range(3)] == [SyncKey("b"), JoinKey("a"), JoinKey("z")]
    assert w.pop_due(10 ** 9) is None and w.next_deadline() is None and len(w) == 0


def test_wheel_cancel_deadline_apply_and_bounded_memory():
    w = TimerWheel()
    k = HeartbeatKey("g", "m")
    w.apply(TimerOp(k, 10))
    assert k in w and w.deadline(k) == 10 and list(w) == [k] and dict(w.items()) == {k: 10}
    w.apply(TimerOp(k, None))
    assert k not in w and w.deadline(k) is None and not w.cancel(k)
    assert w.next_deadline() is None
    for i in range(10000):                       # a member heartbeating: one key re-armed over and over
        w.arm(k, i)
    assert len(w) == 1 and len(w._heap) <= 2 + 64 and w.next_deadline() == 9999
    w.clear()
    assert len(w) == 0 and w.next_deadline() is None


def test_timers_of_ids_whose_names_collide_route_to_their_own_member():
    """Group "a/b" member "c/d-m" and group "a/b/c" member "d-m" both show as "heartbeat/a/b/c/d-m":
    firing one expires that member only."""
    h = Harness()
    h.coordinator._new_id = lambda prefix: f"{prefix}-m"
    (m1,) = h.form_group(["c/d"], "a/b")
    (m2,) = h.form_group(["d"], "a/b/c")
    k1, k2 = HeartbeatKey("a/b", m1), HeartbeatKey("a/b/c", m2)
    assert k1.name == k2.name and k1 in h.wheel and k2 in h.wheel
    h.fire(k1)
    assert h.g("a/b").state == EMPTY and h.g("a/b/c").state == STABLE and k2 in h.wheel
    assert h.resp(h.heartbeat("a/b/c", m2, 1, "d")) == heartbeat_resp(4, 0)
    assert h.timer("heartbeat", "a/b/c", m2) == h.now_ms + SESSION
