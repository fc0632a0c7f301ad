"""Typed timer keys and the timer wheel (coordinator/timers.py)."""
from tenure.coordinator import (
    EMPTY,
    KEY_TYPES,
    STABLE,
    ExpansionKey,
    HeartbeatKey,
    JoinKey,
    PendingKey,
    RegistrationKey,
    SyncKey,
    TimerOp,
    TimerWheel,
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


def test_a_keys_hash_is_kept_with_it_and_never_pickled():
    import pickle
    k = HeartbeatKey("g", "m")
    assert hash(k) == hash(k) == hash(HeartbeatKey("g", "m")) == hash(("g", "m"))
    assert hash(JoinKey("g")) == hash(("g",)) and hash(JoinKey("g")) == hash(SyncKey("g")) and JoinKey("g") != SyncKey("g")
    copy = pickle.loads(pickle.dumps(k))
    assert copy == k and "_hash" not in copy.__dict__ and hash(copy) == hash(k)
    assert repr(k) == "HeartbeatKey(group_id='g', member_id='m')" and k.parts == ("g", "m")


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


class _ReferenceWheel:
    """The wheel's contract, stated plainly: armed keys fire by (deadline, arming sequence)."""

    def __init__(self) -> None:
        self.armed: dict = {}
        self.seq = 0

    def arm(self, key, deadline: int) -> None:
        self.seq += 1
        self.armed[key] = (deadline, self.seq)

    def cancel(self, key) -> None:
        self.armed.pop(key, None)

    def pop_due(self, now: int):
        if not self.armed:
            return None
        key = min(self.armed, key=lambda k: self.armed[k])
        d = self.armed[key][0]
        if d > now:
            return None
        del self.armed[key]
        return key, d


def test_wheel_rearmed_later_without_a_heap_entry_fires_as_armed():
    """Re-arming a key later leaves its earlier heap entry standing for it (no push per heartbeat), yet the
    wheel fires exactly by (deadline, arming order): a stand-in at the top is queued again at its deadline."""
    w = TimerWheel()
    a, b, c = HeartbeatKey("g", "a"), HeartbeatKey("g", "b"), HeartbeatKey("g", "c")
    w.arm(a, 100)
    w.arm(b, 150)
    w.arm(c, 200)
    for t in range(101, 1101, 10):                 # a heartbeats on: its deadline moves past b's and c's
        w.arm(a, t + 100)
    assert len(w._heap) == 3                       # no entry per re-arm
    assert w.next_deadline() == 150 and w.pop_due(149) is None
    assert w.pop_due(10 ** 6) == (b, 150) and w.pop_due(10 ** 6) == (c, 200) and w.pop_due(10 ** 6) == (a, 1191)
    w.arm(a, 50)
    w.arm(b, 50)                                   # same deadline, armed after a: fires after it
    w.arm(a, 60)                                   # a re-armed later again
    assert [w.pop_due(100) for _ in range(3)] == [(b, 50), (a, 60), None]
    w.arm(c, 500)
    w.cancel(c)
    w.arm(c, 700)                                  # cancelled then re-armed later: its old entry is not its deadline
    assert w.pop_due(699) is None and w.deadline(c) == 700 and w.pop_due(700) == (c, 700)


def test_wheel_matches_its_contract_under_random_arming():
    import random
    rnd = random.Random(7)
    keys = [HeartbeatKey("g", str(i)) for i in range(12)] + [JoinKey(str(i)) for i in range(4)]
    w, ref = TimerWheel(), _ReferenceWheel()
    now = 0
    for _ in range(20000):
        op = rnd.random()
        k = rnd.choice(keys)
        if op < 0.6:
            d = now + rnd.choice([0, 1, 5, 50, 100, rnd.randrange(0, 300)])
            w.arm(k, d)
            ref.arm(k, d)
        elif op < 0.7:
            assert w.cancel(k) == (k in ref.armed)
            ref.cancel(k)
        else:
            now += rnd.randrange(0, 40)
            while True:
                got, want = w.pop_due(now), ref.pop_due(now)
                assert got == want
                if got is None:
                    break
        assert len(w) == len(ref.armed)
        assert w.next_deadline() == (min(ref.armed.values())[0] if ref.armed else None)
        assert len(w._heap) <= 2 * len(keys) + 65     # stale entries are bounded


def test_clock_leaves_its_loop_callback_when_a_timer_moves_later():
    """A heartbeat re-arms its member's session later: the clock's one loop callback stays where it is (no
    cancel and re-create per heartbeat); it then wakes early, fires nothing, and waits again - the session
    expires at its last deadline, not before. A timer armed earlier moves the callback at once."""
    import asyncio

    from tenure.coordinator.clock import CoordinatorClock

    async def run() -> None:
        clock = CoordinatorClock()
        fired: list[tuple[object, int]] = []
        clock.register([HeartbeatKey, JoinKey], lambda key: fired.append((key, clock.now_ms())))
        k = HeartbeatKey("g", "m")
        t0 = clock.now_ms()
        clock.set_timers([TimerOp(k, t0 + 40)])
        handle = clock._wakeup
        assert handle is not None and clock._wakeup_at == t0 + 40
        for i in range(1, 6):                                # heartbeats: the deadline moves on
            clock.set_timers([TimerOp(k, t0 + 40 + 100 * i)])
        assert clock._wakeup is handle and clock.timers.deadline(k) == t0 + 540
        await asyncio.sleep(0.1)                             # past the first deadline: nothing expired
        assert fired == [] and k in clock.timers and clock._wakeup_at == t0 + 540
        clock.set_timers([TimerOp(JoinKey("g"), clock.now_ms() + 10)])   # earlier: the callback moves
        assert clock._wakeup_at < t0 + 540
        await asyncio.sleep(0.6)
        assert [key for key, _ in fired] == [JoinKey("g"), k]
        assert fired[1][1] >= t0 + 540                       # the session expired at its last deadline
        clock.close()

    asyncio.run(run())


def test_a_members_session_key_is_made_once_and_equals_any_other_made_for_it():
    """The classic kind's session key of a member (`session_key`) is the same object at every heartbeat, so the
    wheel finds the key it holds; it equals, hashes and names as a `HeartbeatKey` made anew, and ids whose
    names collide get keys of their own."""
    from tenure.coordinator.classic.rebalance import session_key
    from tenure.coordinator.timers import HeartbeatKey
    key = session_key("g", "m-1")
    assert session_key("g", "m-1") is key
    assert key == HeartbeatKey("g", "m-1") and hash(key) == hash(HeartbeatKey("g", "m-1"))
    assert key.name == "heartbeat/g/m-1"
    assert session_key("a/b", "c") != session_key("a", "b/c")
    wheel = TimerWheel()
    wheel.arm(HeartbeatKey("g", "m-1"), 10)
    wheel.arm(key, 20)                                 # the same timer, re-armed
    assert len(wheel) == 1 and wheel.deadline(HeartbeatKey("g", "m-1")) == 20
