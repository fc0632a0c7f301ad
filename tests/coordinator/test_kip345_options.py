"""The KIP-345 drafts' ideas with no shipped wire equivalent, as opt-in coordinator options:
expansion timeout, registration timeout, forced static rebalance; and static/dynamic coexistence.

Like the rest of tests/coordinator, each scenario asserts the exact responses, the exact records
(GroupMetadata and StaticMemberEvent), and the rebalances each step started (`Result.rebalances`)."""
import pytest

from tenure.coordinator import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, AdminError, CoordinatorConfig
from tenure.protocol.errors import ErrorCode as E

from .harness import (
    NEW_MEMBER_JOIN_TIMEOUT,
    SESSION,
    Harness,
    event_record,
    group_record,
    heartbeat_resp,
    join_err,
    join_ok,
    member_record,
    sync_ok,
)

MIN = 60_000
STEP = SESSION // 2          # how often the live members heartbeat


def stable_group(h: Harness, names, *, session: int = SESSION) -> dict[str, str]:
    """Static members `names` of a new group "g" join at the same moment and sync into generation 1 (the
    first one leads, each is assigned its own name); asserts the exact responses and records; returns
    {name: member id}."""
    t0 = h.now_ms
    ids = {}
    tokens = {}
    for n in names:
        ids[n] = h.next_id(n)
        tokens[n] = h.join("g", "", n, session=session)
    h.advance(0)
    leader = ids[names[0]]
    every = [(ids[n], n, b"sub") for n in names]
    for n in names:
        assert h.resp(tokens[n]) == join_ok(9, ids[n], 1, leader, members=every if n == names[0] else [])
    syncs = {names[0]: h.sync("g", leader, 1, names[0], assignments={ids[n]: n.encode() for n in names})}
    for n in names[1:]:
        syncs[n] = h.sync("g", ids[n], 1, n)
    for n in names:
        assert h.resp(syncs[n]) == sync_ok(5, n.encode())
    assert h.take_records() == [event_record("joined", n, None, ids[n], 0, t0) for n in names] + [
        group_record("g", 1, "range", leader, t0,
                     [member_record(ids[n], n, b"sub", n.encode(), session=session) for n in names])]
    assert h.take_rebalances() == [("g", "member_joined")]
    assert h.g().state == STABLE
    return ids


def keep_alive(h: Harness, ms: int, ids: dict[str, str], code: int = 0) -> None:
    """Advance the clock by `ms` while the members `ids` ({instance: member}) heartbeat every STEP ms at
    the current generation; every heartbeat is answered `code`."""
    while ms > 0:
        for n, m in ids.items():
            assert h.resp(h.heartbeat("g", m, h.g().generation, n)) == heartbeat_resp(4, code)
        h.advance(min(STEP, ms))
        ms -= STEP


def rejoin_and_sync(h: Harness, generation: int, leader: str, members: dict[str, str],
                    parked: dict[str, int] = None, sessions: dict[str, int] = None) -> int:
    """The members not in `parked` ({instance: join token}) rejoin with their ids; the join completes into
    `generation` led by `leader` (an instance id) with exactly `members` ({instance: member id}), each
    rejoining with its session timeout from `sessions` (default SESSION); everyone
    syncs, the leader assigning each member its instance id. Asserts every response; returns the time the
    generation started (the GroupMetadata record's state timestamp)."""
    parked = dict(parked or {})
    tokens = {n: h.join("g", m, n, session=(sessions or {}).get(n, SESSION))
              for n, m in members.items() if n not in parked}
    tokens.update(parked)
    started = h.now_ms
    lm = members[leader]
    every = [(m, n, b"sub") for n, m in members.items()]
    for n, t in tokens.items():
        assert h.resp(t) == join_ok(9, members[n], generation, lm, members=every if n == leader else [])
    syncs = {leader: h.sync("g", lm, generation, leader, assignments={m: n.encode() for n, m in members.items()})}
    for n, m in members.items():
        if n != leader:
            syncs[n] = h.sync("g", m, generation, n)
    for n, t in syncs.items():
        assert h.resp(t) == sync_ok(5, n.encode())
    assert h.g().state == STABLE and h.g().generation == generation
    return started


def members_of(ids: dict[str, str], sessions: dict[str, int] = None) -> list:
    return [member_record(m, n, b"sub", n.encode(), session=(sessions or {}).get(n, SESSION)) for n, m in ids.items()]


def test_expansion_timeout_batches_new_static_members_into_one_rebalance():
    # the draft's table: A joins 00:00, B 00:03, timeout 00:05 -> one rebalance; C 00:06 -> next at 00:11
    h = Harness(CoordinatorConfig(static_expansion_timeout_ms=5 * MIN, min_session_timeout_ms=1000,
                                  max_session_timeout_ms=30 * MIN))
    ids = stable_group(h, ["x", "y"])
    t0 = h.now_ms
    ta = h.join("g", "", "A", session=30 * MIN)
    assert h.parked(ta) and h.g().state == STABLE and h.g().generation == 1
    assert h.take_records() == [event_record("joined", "A", None, "A-3", 1, t0)]
    assert h.take_rebalances() == []
    assert h.timer("expansion") == t0 + 5 * MIN
    # a member parked for the window outlives it
    assert h.timer("heartbeat", "g", "A-3") == t0 + 5 * MIN + NEW_MEMBER_JOIN_TIMEOUT
    keep_alive(h, 3 * MIN, ids)
    tb = h.join("g", "", "B", session=30 * MIN)
    assert h.parked(tb) and h.g().state == STABLE
    assert h.take_records() == [event_record("joined", "B", None, "B-4", 1, t0 + 3 * MIN)]
    assert h.timer("expansion") == t0 + 5 * MIN            # counted from the FIRST new join
    keep_alive(h, 2 * MIN - 1, ids)                         # existing members see nothing yet
    assert h.g().state == STABLE and h.take_records() == [] and h.take_rebalances() == []
    h.advance(1)                                            # 00:05: the window ends -> ONE rebalance
    assert h.g().state == PREPARING_REBALANCE and h.g().generation == 1
    assert h.take_rebalances() == [("g", "expansion_timeout")]
    assert h.resp(h.heartbeat("g", ids["x"], 1, "x")) == heartbeat_resp(4, E.REBALANCE_IN_PROGRESS)
    everyone = {**ids, "A": "A-3", "B": "B-4"}
    started = rejoin_and_sync(h, 2, "x", everyone, parked={"A": ta, "B": tb})
    assert started == t0 + 5 * MIN
    sessions = {"A": 30 * MIN, "B": 30 * MIN}
    assert h.take_records() == [group_record("g", 2, "range", ids["x"], started, members_of(everyone, sessions))]
    assert h.take_rebalances() == []
    keep_alive(h, 1 * MIN, ids)                             # 00:06: C is too late for the first window
    tc = h.join("g", "", "C", session=30 * MIN)
    assert h.parked(tc) and h.g().state == STABLE and h.g().generation == 2
    assert h.take_records() == [event_record("joined", "C", None, "C-5", 2, t0 + 6 * MIN)]
    assert h.timer("expansion") == t0 + 11 * MIN
    keep_alive(h, 5 * MIN - 1, ids)
    assert h.g().state == STABLE and h.take_rebalances() == []
    h.advance(1)                                            # 00:11: the second rebalance
    assert h.g().state == PREPARING_REBALANCE
    assert h.take_rebalances() == [("g", "expansion_timeout")]
    everyone["C"] = "C-5"
    sessions["C"] = 30 * MIN
    started = rejoin_and_sync(h, 3, "x", everyone, parked={"C": tc}, sessions=sessions)
    assert h.take_records() == [group_record("g", 3, "range", ids["x"], started, members_of(everyone, sessions))]
    assert h.take_rebalances() == []


def test_registration_timeout_tracks_the_earliest_offline_member():
    # the draft's table, timeout 15 min: A drops 00:00, B 00:10, A back 00:14, B gone too long 00:25 (each
    # counted from the member's last heartbeat)
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=15 * MIN))
    ids = stable_group(h, ["A", "B", "C"])
    t0 = h.now_ms
    keep_alive(h, 10 * MIN, {"B": ids["B"], "C": ids["C"]})     # A's last sign of life: its sync at 00:00
    g = h.g()
    assert g.state == STABLE and g.static_members == ids and g.offline_since == {ids["A"]: t0}
    assert h.timer("registration") == t0 + 15 * MIN
    keep_alive(h, 4 * MIN, {"C": ids["C"]})                     # B's last heartbeat: 00:10 - one STEP
    b_offline = t0 + 10 * MIN - STEP
    assert h.g().offline_since == {ids["A"]: t0, ids["B"]: b_offline}
    assert h.g().state == STABLE and h.take_records() == [] and h.take_rebalances() == []
    # 00:14: A comes back with the same instance id: static replacement, no rebalance; A led the group,
    # so its replacement leads (KIP-814: skipAssignment and the full member list on v9)
    t = h.join("g", "", "A")
    a = "A-4"
    assert h.resp(t) == join_ok(9, a, 1, a, skip_assignment=True,
                                members=[(a, "A", b"sub"), (ids["B"], "B", b"sub"), (ids["C"], "C", b"sub")])
    ids["A"] = a
    assert h.take_records() == [event_record("replaced", "A", "A-1", a, 1, t0 + 14 * MIN),
                                group_record("g", 1, "range", a, t0, members_of(ids))]
    assert h.take_rebalances() == []
    assert h.g().offline_since == {ids["B"]: b_offline}
    assert h.timer("registration") == b_offline + 15 * MIN      # now counted from B
    assert h.resp(h.sync("g", a, 1, "A")) == sync_ok(5, b"A")
    keep_alive(h, b_offline + 15 * MIN - 1 - h.now_ms, {"A": a, "C": ids["C"]})   # up to 00:25 - 1 ms
    assert h.g().state == STABLE and h.g().static_members == ids and h.take_records() == []
    h.advance(1)                                                # 00:25: B gone too long, exactly one rebalance
    g = h.g()
    assert g.state == PREPARING_REBALANCE and g.static_members == {"A": a, "C": ids["C"]} and g.offline_since == {}
    assert h.take_records() == [event_record("registration_expired", "B", ids["B"], None, 1, b_offline + 15 * MIN)]
    assert h.take_rebalances() == [("g", "registration_expired")]
    del ids["B"]
    started = rejoin_and_sync(h, 2, "A", ids)
    assert h.take_records() == [group_record("g", 2, "range", a, started, members_of(ids))]


def test_registration_timeout_counts_from_the_last_heartbeat():
    # the draft: the registration timeout "is monitored through heartbeat the same way as session
    # timeout, and will replace the session timeout in a static membership" - a session of 10 s and a
    # registration timeout of 30 s remove a silent member 30 s after its last heartbeat, not 40 s
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=3 * SESSION))
    ids = stable_group(h, ["A", "B"])
    t0 = h.now_ms
    keep_alive(h, STEP, ids)                                    # A's last heartbeat: t0
    keep_alive(h, SESSION, {"B": ids["B"]})                     # A's session is over: offline since t0
    assert h.g().offline_since == {ids["A"]: t0} and h.g().state == STABLE
    assert h.timer("registration") == t0 + 3 * SESSION
    keep_alive(h, t0 + 3 * SESSION - 1 - h.now_ms, {"B": ids["B"]})
    assert h.g().state == STABLE and h.take_records() == [] and h.take_rebalances() == []
    h.advance(1)
    assert h.g().state == PREPARING_REBALANCE and h.g().static_members == {"B": ids["B"]}
    assert h.take_records() == [event_record("registration_expired", "A", ids["A"], None, 1, t0 + 3 * SESSION)]
    assert h.take_rebalances() == [("g", "registration_expired")]


def test_a_registration_timeout_shorter_than_the_session_removes_at_the_session_expiry():
    # the member is seen to be gone only when its session expires; by then its registration is over
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=SESSION // 4))
    ids = stable_group(h, ["A", "B"])
    t0 = h.now_ms
    keep_alive(h, STEP, ids)
    keep_alive(h, SESSION - STEP - 1, {"B": ids["B"]})
    assert h.g().state == STABLE and h.take_records() == []
    h.advance(1)                                                # t0 + SESSION: A's session expires
    assert h.g().state == PREPARING_REBALANCE and h.g().static_members == {"B": ids["B"]}
    assert h.g().offline_since == {}
    assert h.take_records() == [event_record("registration_expired", "A", ids["A"], None, 1, t0 + SESSION)]
    assert h.take_rebalances() == [("g", "registration_expired")]


def test_registration_timeout_removes_everyone_offline_in_one_rebalance():
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=5 * MIN))
    ids = stable_group(h, ["A", "B", "C", "D"])
    t0 = h.now_ms
    keep_alive(h, 2 * STEP, {n: ids[n] for n in ("B", "C", "D")})      # then B drops too, one STEP after A
    keep_alive(h, 5 * MIN - 2 * STEP, {n: ids[n] for n in ("C", "D")})   # to A's last sync + the timeout
    g = h.g()
    assert g.state == PREPARING_REBALANCE
    assert g.static_members == {"C": ids["C"], "D": ids["D"]}, "both offline members left in the same rebalance"
    expiry = t0 + 5 * MIN                                       # A's last sign of life + the timeout
    assert h.take_records() == [event_record("registration_expired", "A", ids["A"], None, 1, expiry),
                                event_record("registration_expired", "B", ids["B"], None, 1, expiry)]
    assert h.take_rebalances() == [("g", "registration_expired")]
    del ids["A"], ids["B"]
    started = rejoin_and_sync(h, 2, "C", ids)                   # the leader (A) left: C leads
    assert h.take_records() == [group_record("g", 2, "range", ids["C"], started, members_of(ids))]


def test_without_the_option_a_static_member_expires_at_its_session_timeout():
    h = Harness()
    ids = stable_group(h, ["A", "B"])
    t0 = h.now_ms
    keep_alive(h, SESSION, {"B": ids["B"]})
    assert h.resp(h.heartbeat("g", ids["B"], 1, "B")) == heartbeat_resp(4, E.REBALANCE_IN_PROGRESS)
    g = h.g()
    assert g.static_members == {"B": ids["B"]} and g.state == PREPARING_REBALANCE
    assert h.take_records() == [event_record("expired", "A", ids["A"], None, 1, t0 + SESSION)]
    assert h.take_rebalances() == [("g", "session_expired")]
    started = rejoin_and_sync(h, 2, "B", {"B": ids["B"]})
    assert h.take_records() == [group_record("g", 2, "range", ids["B"], started, members_of({"B": ids["B"]}))]


def test_force_rebalance_and_its_refusals():
    h = Harness()
    with pytest.raises(AdminError) as exc:
        h.force_rebalance("nope")
    assert exc.value.code == E.GROUP_ID_NOT_FOUND
    assert h.records == [] and h.take_rebalances() == []
    ids = stable_group(h, ["A", "B"])
    t0 = h.now_ms
    h.force_rebalance("g")
    assert h.g().state == PREPARING_REBALANCE and h.g().generation == 1
    # one event per static member, its mapping unchanged
    assert h.take_records() == [event_record("forced_rebalance", "A", ids["A"], ids["A"], 1, t0),
                                event_record("forced_rebalance", "B", ids["B"], ids["B"], 1, t0)]
    assert h.take_rebalances() == [("g", "forced")]
    assert h.resp(h.heartbeat("g", ids["B"], 1, "B")) == heartbeat_resp(4, E.REBALANCE_IN_PROGRESS)
    with pytest.raises(AdminError) as exc:                # already rebalancing
        h.force_rebalance("g")
    assert exc.value.code == E.REBALANCE_IN_PROGRESS
    t1 = h.join("g", ids["A"], "A")
    assert h.g().state == PREPARING_REBALANCE
    tb = h.join("g", ids["B"], "B")
    assert h.g().state == COMPLETING_REBALANCE
    with pytest.raises(AdminError) as exc:                # still rebalancing (syncs outstanding)
        h.force_rebalance("g")
    assert exc.value.code == E.REBALANCE_IN_PROGRESS
    every = [(ids["A"], "A", b"sub"), (ids["B"], "B", b"sub")]
    assert h.resp(t1) == join_ok(9, ids["A"], 2, ids["A"], members=every)
    assert h.resp(tb) == join_ok(9, ids["B"], 2, ids["A"])
    assert h.resp(h.sync("g", ids["A"], 2, "A", assignments={ids["A"]: b"A", ids["B"]: b"B"})) == sync_ok(5, b"A")
    assert h.resp(h.sync("g", ids["B"], 2, "B")) == sync_ok(5, b"B")
    assert h.take_records() == [group_record("g", 2, "range", ids["A"], t0, members_of(ids))]
    assert h.take_rebalances() == []
    # a dynamic member in the group: refused
    t = h.join("g", "", None)
    d = "client-3"
    assert h.resp(t) == join_err(9, E.MEMBER_ID_REQUIRED, d)
    td = h.join("g", d, None)
    assert h.take_rebalances() == [("g", "member_joined")]
    ta, tb = h.join("g", ids["A"], "A"), h.join("g", ids["B"], "B")
    every = [(ids["A"], "A", b"sub"), (ids["B"], "B", b"sub"), (d, None, b"sub")]
    assert h.resp(ta) == join_ok(9, ids["A"], 3, ids["A"], members=every)
    assert h.resp(tb) == join_ok(9, ids["B"], 3, ids["A"])
    assert h.resp(td) == join_ok(9, d, 3, ids["A"])
    assert h.resp(h.sync("g", ids["A"], 3, "A", assignments={ids["A"]: b"A", ids["B"]: b"B", d: b"D"})) \
        == sync_ok(5, b"A")
    assert h.resp(h.sync("g", ids["B"], 3, "B")) == sync_ok(5, b"B")
    assert h.resp(h.sync("g", d, 3, None)) == sync_ok(5, b"D")
    assert h.take_records() == [group_record("g", 3, "range", ids["A"], h.now_ms,
                                             members_of(ids) + [member_record(d, None, b"sub", b"D")])]
    with pytest.raises(AdminError) as exc:
        h.force_rebalance("g")
    assert exc.value.code == E.INVALID_REQUEST and "dynamic" in str(exc.value)
    # an Empty group: nothing to rebalance
    h.leave("g", [(ids["A"], "A"), (ids["B"], "B"), (d, None)])
    assert h.g().state == EMPTY
    h.take_records()
    h.take_rebalances()
    with pytest.raises(AdminError) as exc:
        h.force_rebalance("g")
    assert exc.value.code == E.INVALID_REQUEST
    assert h.take_records() == [] and h.take_rebalances() == []


class Client:
    """A simulated consumer: rejoins when a rebalance starts, syncs after a join, heartbeats. `seen` keeps
    every JoinGroup and SyncGroup response it read, and every heartbeat response that was not 0."""

    def __init__(self, h: Harness, instance_id: str | None = None, group: str = "g"):
        self.h, self.iid, self.group = h, instance_id, group
        self.member_id = ""
        self.generation = -1
        self.join_token = None
        self.sync_token = None
        self.seen: list[dict] = []
        if instance_id is None:
            t = h.join(group, "", None)
            self.seen.append(h.resp(t))
            self.member_id = h.resp(t)["member_id"]           # KIP-394: 79 with an id
        self.join_token = h.join(group, self.member_id, instance_id)

    def step(self):
        h = self.h
        if self.join_token is not None and not h.parked(self.join_token):
            r = h.resp(self.join_token)
            self.seen.append(r)
            self.join_token = None
            if r["error_code"] == 0:
                self.member_id, self.generation = r["member_id"], r["generation_id"]
                assign = {m["member_id"]: b"a" for m in r["members"]} if r["members"] else None
                self.sync_token = h.sync(self.group, self.member_id, self.generation, self.iid, assignments=assign)
            else:
                self.join_token = h.join(self.group, self.member_id if r["error_code"] != 25 else "", self.iid)
            return
        if self.sync_token is not None and not h.parked(self.sync_token):
            r = h.resp(self.sync_token)
            self.seen.append(r)
            self.sync_token = None
            if r["error_code"] != 0:
                self.join_token = h.join(self.group, self.member_id, self.iid)
            return
        if self.join_token is None and self.sync_token is None:
            r = h.resp(h.heartbeat(self.group, self.member_id, self.generation, self.iid))
            if r["error_code"]:
                self.seen.append(r)
            if r["error_code"] in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
                self.join_token = h.join(self.group, self.member_id, self.iid)
            elif r["error_code"] == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                self.join_token = h.join(self.group, "", self.iid)


def run(h: Harness, clients, ms: int, step: int = 1000):
    for _ in range(ms // step):
        for c in clients:
            c.step()
        h.advance(step)


def test_dynamic_member_in_a_static_group_and_a_switch_to_dynamic():
    """The drafts: static and dynamic members coexist; restarting each member without an instance id moves
    the group to dynamic membership. An old static member that is not coming back is removed when its
    session expires (T2), which completes the rebalance its dynamic successor's join started."""
    h = Harness()
    t0 = h.now_ms
    a, b = Client(h, "A"), Client(h, "B")
    run(h, [a, b], 5000)
    assert h.g().state == STABLE and h.g().static_members == {"A": "A-1", "B": "B-2"}
    assert a.seen == [join_ok(9, "A-1", 1, "A-1", members=[("A-1", "A", b"sub"), ("B-2", "B", b"sub")]),
                      sync_ok(5, b"a")]
    assert b.seen == [join_ok(9, "B-2", 1, "A-1"), sync_ok(5, b"a")]
    assert h.take_records() == [event_record("joined", "A", None, "A-1", 0, t0),
                                event_record("joined", "B", None, "B-2", 0, t0),
                                group_record("g", 1, "range", "A-1", t0, [member_record("A-1", "A", b"sub", b"a"),
                                                                         member_record("B-2", "B", b"sub", b"a")])]
    assert h.take_rebalances() == [("g", "member_joined")]
    # A's process is replaced by one without group.instance.id; A's last heartbeat was at 00:04
    d1 = Client(h)
    b.seen.clear()
    run(h, [b, d1], 120_000)
    g = h.g()
    assert g.state == STABLE and g.generation == 2
    assert g.static_members == {"B": "B-2"}, "A's static mapping went when its session expired"
    assert list(g.members) == ["B-2", "client-3"] and not g.members["client-3"].is_static
    a_gone = t0 + 4000 + SESSION
    assert h.take_records() == [
        event_record("expired", "A", "A-1", None, 1, a_gone),
        group_record("g", 2, "range", "B-2", a_gone, [member_record("B-2", "B", b"sub", b"a"),
                                                      member_record("client-3", None, b"sub", b"a")])]
    assert h.take_rebalances() == [("g", "member_joined")]       # the dynamic join; A's expiry completed it
    assert d1.seen == [join_err(9, E.MEMBER_ID_REQUIRED, "client-3"), join_ok(9, "client-3", 2, "B-2"),
                       sync_ok(5, b"a")]
    # B, the only member left, now leads
    assert b.seen == [heartbeat_resp(4, E.REBALANCE_IN_PROGRESS),
                      join_ok(9, "B-2", 2, "B-2", members=[("B-2", "B", b"sub"), ("client-3", None, b"sub")]),
                      sync_ok(5, b"a")]
    # now B too; its last heartbeat was at 02:04
    d2 = Client(h)
    d1.seen.clear()
    run(h, [d1, d2], 120_000)
    g = h.g()
    assert g.state == STABLE and g.static_members == {} and g.generation == 3
    assert list(g.members) == ["client-3", "client-4"]
    assert all(not m.is_static for m in g.members.values())
    b_gone = t0 + 5000 + 119_000 + SESSION
    assert h.take_records() == [
        event_record("expired", "B", "B-2", None, 2, b_gone),
        group_record("g", 3, "range", "client-3", b_gone, [member_record("client-3", None, b"sub", b"a"),
                                                           member_record("client-4", None, b"sub", b"a")])]
    assert h.take_rebalances() == [("g", "member_joined")]
    assert d2.seen == [join_err(9, E.MEMBER_ID_REQUIRED, "client-4"), join_ok(9, "client-4", 3, "client-3"),
                       sync_ok(5, b"a")]
    assert d1.seen == [heartbeat_resp(4, E.REBALANCE_IN_PROGRESS),
                       join_ok(9, "client-3", 3, "client-3",
                               members=[("client-3", None, b"sub"), ("client-4", None, b"sub")]),
                       sync_ok(5, b"a")]
