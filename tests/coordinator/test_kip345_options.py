"""The KIP-345 drafts' ideas with no shipped wire equivalent, as opt-in coordinator options:
expansion timeout, registration timeout, forced static rebalance; and static/dynamic coexistence."""
import pytest

from tenure.coordinator.classic import AdminError, CoordinatorConfig
from tenure.coordinator.state import PREPARING_REBALANCE, STABLE
from tenure.protocol.errors import ErrorCode as E

from .harness import SESSION, Harness

MIN = 60_000


def stable_group(h: Harness, names, group: str = "g"):
    """Static members `names` join and sync into one generation; returns {name: member_id}."""
    tokens = {n: h.join(group, "", n) for n in names}
    h.advance(0)
    # with initial delay 0 the first rebalance may close early; rejoin until one generation has everyone
    for _ in range(len(names) + 1):
        g = h.g(group)
        if g.state == STABLE and set(g.static_members) == set(names):
            break
        gen = g.generation
        ids = dict(g.static_members)
        if g.state == "CompletingRebalance":
            leader = g.leader_id
            h.sync(group, leader, gen, next(n for n, m in ids.items() if m == leader),
                   assignments={m: n.encode() for n, m in ids.items()})
            for n, m in ids.items():
                if m != leader:
                    h.sync(group, m, gen, n)
        else:
            h.advance(0)
    g = h.g(group)
    assert g.state == STABLE and set(g.static_members) == set(names), (g.state, g.static_members)
    return dict(g.static_members)


def advance_alive(h: Harness, ms: int, ids: dict, group: str = "g"):
    """Advance the clock by `ms` while the members `ids` ({instance: member}) keep heartbeating."""
    step = SESSION // 2
    while ms > 0:
        for n, m in ids.items():
            assert h.resp(h.heartbeat(group, m, h.g(group).generation, n))["error_code"] in (0, 27)
        h.advance(min(step, ms))
        ms -= step


def rejoin_all(h: Harness, ids: dict, group: str = "g"):
    """Every known member rejoins and syncs (what clients do on REBALANCE_IN_PROGRESS)."""
    for n, m in ids.items():
        h.join(group, m, n)
    g = h.g(group)
    assert g.state == "CompletingRebalance", g.state
    leader = g.leader_id
    inst = {m: n for n, m in g.static_members.items()}
    h.sync(group, leader, g.generation, inst[leader], assignments={m: inst[m].encode() for m in g.members})
    for m in g.members:
        if m != leader:
            h.sync(group, m, g.generation, inst[m])
    assert h.g(group).state == STABLE


def test_expansion_timeout_batches_new_static_members_into_one_rebalance():
    # the draft's table: A joins 00:00, B 00:03, timeout 00:05 -> one rebalance; C 00:06 -> next at 00:11
    h = Harness(CoordinatorConfig(static_expansion_timeout_ms=5 * MIN, min_session_timeout_ms=1000,
                                  max_session_timeout_ms=30 * MIN))
    ids = stable_group(h, ["x", "y"])
    gen0 = h.g().generation
    ta = h.join("g", "", "A", session=30 * MIN)
    assert h.parked(ta) and h.g().state == STABLE and h.g().generation == gen0
    advance_alive(h, 3 * MIN, ids)
    tb = h.join("g", "", "B", session=30 * MIN)
    assert h.parked(tb) and h.g().state == STABLE
    # existing members see nothing yet
    assert h.resp(h.heartbeat("g", ids["x"], gen0, "x"))["error_code"] == 0
    advance_alive(h, 2 * MIN - 1, ids)
    assert h.g().state == STABLE
    h.advance(1)                                          # 00:05: the window ends -> ONE rebalance
    assert h.g().state == PREPARING_REBALANCE
    assert h.resp(h.heartbeat("g", ids["x"], gen0, "x"))["error_code"] == E.REBALANCE_IN_PROGRESS
    rejoin_all(h, {n: m for n, m in h.g().static_members.items() if n in ("x", "y")})
    assert h.g().generation == gen0 + 1
    assert h.resp(ta)["generation_id"] == h.resp(tb)["generation_id"] == gen0 + 1
    ids = {n: m for n, m in h.g().static_members.items()}
    advance_alive(h, 1 * MIN, ids)                        # 00:06: C is too late for the first window
    tc = h.join("g", "", "C", session=30 * MIN)
    assert h.parked(tc) and h.g().state == STABLE and h.g().generation == gen0 + 1
    advance_alive(h, 5 * MIN - 1, ids)
    assert h.g().state == STABLE
    h.advance(1)                                          # 00:11: the second rebalance
    assert h.g().state == PREPARING_REBALANCE


def test_registration_timeout_tracks_the_earliest_offline_member():
    # the draft's table, timeout 15 min: A drops 00:00, B 00:10, A back 00:14, B gone too long 00:25
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=15 * MIN))
    ids = stable_group(h, ["A", "B", "C"])
    gen = h.g().generation

    def keep_alive(names, minutes):
        for _ in range(minutes * 60_000 // (SESSION // 2)):
            for n in names:
                assert h.resp(h.heartbeat("g", h.g().static_members[n], gen, n))["error_code"] == 0
            h.advance(SESSION // 2)

    keep_alive(["B", "C"], 10)            # A stops heartbeating at 00:00 and is offline after its session
    assert "A" in h.g().static_members and h.g().state == STABLE
    assert set(h.g().offline_since) == {ids["A"]}
    keep_alive(["C"], 4)                  # B stops at 00:10
    assert set(h.g().offline_since) == {ids["A"], ids["B"]}
    # 00:14: A comes back with the same instance id: static replacement, no rebalance
    t = h.join("g", "", "A")
    assert h.resp(t)["error_code"] == 0 and h.resp(t)["generation_id"] == gen
    assert set(h.g().offline_since) == {ids["B"]}
    a_new = h.g().static_members["A"]
    assert h.resp(h.sync("g", a_new, gen, "A"))["error_code"] == 0
    for _ in range(10 * 60_000 // (SESSION // 2)):        # up to 00:24: nothing happens
        for n in ("A", "C"):
            assert h.resp(h.heartbeat("g", h.g().static_members[n], gen, n))["error_code"] == 0
        h.advance(SESSION // 2)
    assert h.g().state == STABLE and "B" in h.g().static_members
    b_offline = h.g().offline_since[ids["B"]]             # ~00:10 + one session
    h.advance(b_offline + 15 * MIN - 1 - h.now_ms)         # (A and C heartbeat well within their session)
    assert h.g().state == STABLE and "B" in h.g().static_members
    for n in ("A", "C"):
        h.heartbeat("g", h.g().static_members[n], gen, n)
    h.advance(1)                                          # 00:25: B gone too long
    g = h.g()
    assert "B" not in g.static_members and g.state == PREPARING_REBALANCE   # exactly one rebalance
    assert set(g.static_members) == {"A", "C"}


def test_registration_timeout_removes_everyone_offline_in_one_rebalance():
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=5 * MIN))
    ids = stable_group(h, ["A", "B", "C", "D"])
    gen = h.g().generation
    for _ in range(2):                      # B drops slightly after A
        for n in ("B", "C", "D"):
            h.heartbeat("g", ids[n], gen, n)
        h.advance(SESSION // 2)
    steps = 0
    while h.g().state == STABLE and steps < 200:
        for n in ("C", "D"):
            h.heartbeat("g", ids[n], gen, n)
        h.advance(SESSION // 2)
        steps += 1
    g = h.g()
    assert g.state == PREPARING_REBALANCE
    assert set(g.static_members) == {"C", "D"}, "both offline members left in the same rebalance"
    rejoin_all(h, {n: ids[n] for n in ("C", "D")})
    assert h.g().generation == gen + 1


def test_without_the_option_a_static_member_expires_at_its_session_timeout():
    h = Harness()
    ids = stable_group(h, ["A", "B"])
    gen = h.g().generation
    for _ in range(3):
        h.heartbeat("g", ids["B"], gen, "B")
        h.advance(SESSION // 2)
    assert "A" not in h.g().static_members and h.g().state == PREPARING_REBALANCE


def test_force_rebalance_and_its_refusals():
    h = Harness()
    with pytest.raises(AdminError) as exc:
        h.coordinator.force_rebalance("nope", h.now_ms)
    assert exc.value.code == E.GROUP_ID_NOT_FOUND
    ids = stable_group(h, ["A", "B"])
    gen = h.g().generation
    h._apply(h.coordinator.force_rebalance("g", h.now_ms))
    assert h.g().state == PREPARING_REBALANCE
    with pytest.raises(AdminError) as exc:                # already rebalancing
        h.coordinator.force_rebalance("g", h.now_ms)
    assert exc.value.code == E.REBALANCE_IN_PROGRESS
    rejoin_all(h, ids)
    assert h.g().generation == gen + 1 and set(h.g().static_members) == {"A", "B"}
    # a dynamic member in the group: refused
    mid, t = h.join_dynamic("g")
    assert h.g().state == PREPARING_REBALANCE
    for n, m in ids.items():
        h.join("g", m, n)
    g = h.g()
    inst = {m: n for n, m in g.static_members.items()}
    h.sync("g", g.leader_id, g.generation, inst.get(g.leader_id), assignments={})
    for m in g.members:
        if m != g.leader_id:
            h.sync("g", m, g.generation, inst.get(m))
    assert h.g().state == STABLE
    with pytest.raises(AdminError) as exc:
        h.coordinator.force_rebalance("g", h.now_ms)
    assert exc.value.code == E.INVALID_REQUEST and "dynamic" in str(exc.value)


class Client:
    """A simulated consumer: rejoins when a rebalance starts, syncs after a join, heartbeats."""

    def __init__(self, h: Harness, instance_id: str | None = None, group: str = "g"):
        self.h, self.iid, self.group = h, instance_id, group
        self.member_id = ""
        self.generation = -1
        self.join_token = None
        self.sync_token = None
        if instance_id is None:
            t = h.join(group, "", None)
            self.member_id = h.resp(t)["member_id"]           # KIP-394: 79 with an id
        self.join_token = h.join(group, self.member_id, instance_id)

    def step(self):
        h = self.h
        if self.join_token is not None and not h.parked(self.join_token):
            r = h.resp(self.join_token)
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
            self.sync_token = None
            if r["error_code"] != 0:
                self.join_token = h.join(self.group, self.member_id, self.iid)
            return
        if self.join_token is None and self.sync_token is None:
            r = h.resp(h.heartbeat(self.group, self.member_id, self.generation, self.iid))
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
    the group to dynamic membership, and each old static id goes once it is not coming back (it misses the
    sync of the rebalance its replacement caused: item 19)."""
    h = Harness()
    a, b = Client(h, "A"), Client(h, "B")
    run(h, [a, b], 5000)
    assert h.g().state == STABLE and set(h.g().static_members) == {"A", "B"}
    # A's process is replaced by one without group.instance.id
    d1 = Client(h)
    run(h, [b, d1], 120_000)
    g = h.g()
    assert g.state == STABLE
    assert set(g.static_members) == {"B"}, "A's static mapping went when it stopped answering"
    assert set(g.members) == {b.member_id, d1.member_id} and not g.members[d1.member_id].is_static
    # now B too
    d2 = Client(h)
    run(h, [d1, d2], 120_000)
    g = h.g()
    assert g.state == STABLE and g.static_members == {}
    assert set(g.members) == {d1.member_id, d2.member_id}
    assert all(not m.is_static for m in g.members.values())
