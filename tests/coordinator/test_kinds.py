"""Group kinds are one interface (coordinator/kinds.py): a new kind is its class plus one line in the registry,
and nothing outside the kind folders tells the kinds apart.

- a tiny fake kind, registered next to the real ones (a shard made with extra kinds, or KINDS itself
  monkeypatched), owns one API key, one record type and one timer key: the shard routes that API, replays
  that record, fires that timer, answers `kind_of`, loads, unloads, inspects, lists and expires sessions
  through it - no line of the shard changes;
- the source of coordinator/ and tenure/control/ (ast): no `isinstance(..., ClassicGroup|ConsumerGroup)` and
  no `.kind ==`/`!=` outside coordinator/classic/ and coordinator/consumer/; no call of a classic part's
  underscore method from another module (the classic parts are composed, each with a public surface).
"""
from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from tenure.coordinator import GroupInfo, GroupShard, MemberInfo, RequestContext, Result, TimerKey
from tenure.coordinator import kinds as kinds_module
from tenure.coordinator.config import AdminError
from tenure.coordinator.handler import ShardHandler
from tenure.coordinator.kinds import KINDS, LazyKind
from tenure.protocol.errors import ErrorCode as E

FAKE_API = 1000
SESSION_MS = 10


@dataclass
class FakeGroup:
    group_id: str
    state: str = "Stable"
    generation: int = 0
    protocol_type: str | None = "fake"
    members: dict[str, str] = field(default_factory=dict)          # member id -> client id
    static_members: dict[str, str] = field(default_factory=dict)

    kind = "fake"

    def copy(self) -> FakeGroup:
        return dataclasses.replace(self, members=dict(self.members), static_members=dict(self.static_members))

    def is_empty(self) -> bool:
        return not self.members

    def in_session(self, member_id: str) -> bool:
        return member_id in self.members


@dataclass(frozen=True)
class FakeJoined:
    """The fake kind's one record type: a member joined."""
    group_id: str
    member_id: str


@dataclass(frozen=True)
class FakeSessionKey(TimerKey):
    member_id: str
    kind: ClassVar[str] = "fake-session"


class FakeGroups(ShardHandler):
    name: ClassVar[str] = "fake"
    group_type: ClassVar[type] = FakeGroup
    apis: ClassVar[frozenset[int]] = frozenset({FAKE_API})
    record_types: ClassVar[tuple[type, ...]] = (FakeJoined,)
    timer_keys: ClassVar[tuple[type, ...]] = (FakeSessionKey,)

    def handlers(self):
        return {FAKE_API: self.join}

    def join(self, ctx: RequestContext, body) -> Result:
        res = Result()
        res.emit(FakeJoined(body.group_id, body.member_id))
        res.set_timer(FakeSessionKey(body.group_id, body.member_id), ctx.now_ms + SESSION_MS)
        res.respond(ctx.token, ("joined", body.member_id))
        return res

    def replay(self, record: FakeJoined) -> None:
        live = self.groups.get(record.group_id)
        g = live.copy() if isinstance(live, FakeGroup) else FakeGroup(record.group_id)
        g.members[record.member_id] = "client"
        g.generation += 1
        self.groups[record.group_id] = g

    def on_timer(self, key, now_ms: int) -> Result:
        res = Result()
        live = self.groups.get(key.group_id)
        if isinstance(live, FakeGroup) and key.member_id in live.members:
            g = live.copy()
            del g.members[key.member_id]
            res.install(g.group_id, g)
        return res

    def loaded(self, res: Result, g: FakeGroup, now_ms: int) -> None:
        for mid in g.members:
            res.set_timer(FakeSessionKey(g.group_id, mid), now_ms + SESSION_MS)

    def unloaded(self, res: Result, code: int) -> None:
        self.unloaded_with = code

    def session_key(self, group_id: str, member_id: str) -> TimerKey:
        return FakeSessionKey(group_id, member_id)

    def validate_commit(self, res, g, ctx, generation, member_id, instance_id, transactional=False):
        return (E.NONE, None) if member_id in g.members else (E.UNKNOWN_MEMBER_ID, None)

    def committed(self, res, g, member, now_ms) -> None:
        pass

    def validate_fetch(self, g, member_id, epoch) -> int:
        return E.NONE

    def offset_delete_error(self, g) -> int:
        return E.NONE

    def subscribed_topics(self, g):
        return set()

    def info(self, g: FakeGroup) -> GroupInfo:
        return GroupInfo(g.group_id, g.kind, g.state, g.generation, g.protocol_type, None, None,
                         tuple(MemberInfo(mid, None, cid, "", SESSION_MS, 0, None, 0) for mid, cid in g.members.items()),
                         dict(g.static_members))

    def delete_records(self, g) -> list:
        return []

    def force_rebalance(self, group_id: str, now_ms: int) -> Result:
        raise AdminError(E.INVALID_REQUEST, "a fake group is never forced")


def _ctx(token: int, now_ms: int = 0) -> RequestContext:
    return RequestContext(token, 0, "client", "/127.0.0.1", now_ms)


def _fake_kind(c: GroupShard) -> FakeGroups:
    (kind,) = [k for k in c.kinds.all if isinstance(k, FakeGroups)]
    return kind


def _check_routes_to_the_fake_kind(c: GroupShard) -> None:
    fake = _fake_kind(c)
    assert len(c.kinds.registered) == len(KINDS) + 1 and fake in c.kinds.all
    # its API
    res = c.handle(FAKE_API, _ctx(1), SimpleNamespace(group_id="fg", member_id="m1"))
    assert res.responses == [(1, ("joined", "m1"))]
    assert res.records == [FakeJoined("fg", "m1")]
    # its record, replayed by the shard after the handler returned
    g = c.group("fg")
    assert isinstance(g, FakeGroup) and g.members == {"m1": "client"} and g.generation == 1
    assert c.kind_of(g) is fake
    key = FakeSessionKey("fg", "m1")
    assert c.is_armed(key)
    # the kind-agnostic parts ask it: inspection, ListGroups, a session expired by the admin operation
    info = c.group_info("fg")
    assert info is not None and (info.kind, info.generation) == ("fake", 1)
    assert [m.member_id for m in info.members] == ["m1"]
    listed = c.handle(16, RequestContext(2, 5, "client", "/127.0.0.1", 0), SimpleNamespace(
        states_filter=[], types_filter=["fake"]))
    (_, body), = listed.responses
    assert [(x.group_id, x.group_type) for x in body.groups] == [("fg", "fake")]
    with pytest.raises(AdminError):
        c.force_rebalance("fg", 0)
    # its timer, fired through the shard
    res = c.on_timer(key, SESSION_MS)
    assert not c.is_armed(key)
    assert c.group("fg").members == {}
    # replay of its record again, then load and unload go through it too
    c.replay(FakeJoined("fg", "m2"))
    loaded = c.loaded(100)
    assert [(op.key, op.deadline_ms) for op in loaded.timers] == [(FakeSessionKey("fg", "m2"), 100 + SESSION_MS)]
    expired = c.expire_session("fg", "m2", 105)
    assert expired is not None and c.group("fg").members == {}
    c.unload(200)
    assert fake.unloaded_with == E.NOT_COORDINATOR and c.group_ids() == []


def test_a_new_kind_is_its_class_and_one_registry_line():
    c = GroupShard(kinds=(*KINDS, FakeGroups))
    assert c.routes[FAKE_API].__self__ is _fake_kind(c)
    _check_routes_to_the_fake_kind(c)


def test_the_registry_line_is_all_the_shard_reads(monkeypatch):
    monkeypatch.setattr(kinds_module, "KINDS", (*KINDS, FakeGroups))
    _check_routes_to_the_fake_kind(GroupShard())


def test_the_real_kinds_serve_alongside_the_fake_one():
    """A third kind changes nothing for the others: a classic JoinGroup still goes to the classic kind."""
    c = GroupShard(kinds=(*KINDS, FakeGroups))
    c.handle(FAKE_API, _ctx(1), SimpleNamespace(group_id="fg", member_id="m1"))
    c.handle(11, RequestContext(2, 5, "client", "/127.0.0.1", 0), SimpleNamespace(
        group_id="g", member_id="", group_instance_id="i1", session_timeout_ms=10000, rebalance_timeout_ms=10000,
        protocol_type="consumer", protocols=[SimpleNamespace(name="range", metadata=b"")]))
    assert {gid: c.kind_of(c.groups[gid]).name for gid in c.group_ids()} == {"fg": "fake", "g": "classic"}


def _lazy_fake(name: str = "fake", apis: frozenset[int] = frozenset({FAKE_API})) -> LazyKind:
    return LazyKind(name, apis, __name__, "FakeGroups")


def _made(c: GroupShard) -> list[FakeGroups]:
    return [k for k in c.kinds.all if isinstance(k, FakeGroups)]


def test_a_lazy_kind_is_made_at_its_first_request_and_then_serves_as_an_eager_one():
    """A kind registered as a LazyKind: the shard knows its APIs and makes it at the first request of one (the
    route then goes straight to the kind's handler); from then on it is served as any kind."""
    c = GroupShard(kinds=(*KINDS, _lazy_fake()))
    assert _made(c) == [] and FAKE_API in c.routes
    assert getattr(c.routes[FAKE_API], "__self__", None) is None      # the first-use step, not a kind's handler
    assert c.kinds.of_group.get(FakeGroup) is None and c.group_info("fg") is None
    res = c.handle(FAKE_API, _ctx(1), SimpleNamespace(group_id="fg", member_id="m1"))
    assert res.responses == [(1, ("joined", "m1"))] and res.records == [FakeJoined("fg", "m1")]
    fake, = _made(c)
    assert c.routes[FAKE_API].__self__ is fake and c.kinds.handlers[FAKE_API].__self__ is fake
    assert c.kind_of(c.groups["fg"]) is fake
    c.unload(0)
    assert fake.unloaded_with == E.NOT_COORDINATOR
    _check_routes_to_the_fake_kind(c)          # every route of the eager kind's test, through the made one
    assert _made(c) == [fake]                  # made once


def test_a_lazy_kind_is_made_by_its_first_record_or_group_value():
    """A record (a load replays the partition before any request) or a group value of a lazy kind makes it in
    that shard; an unknown record still raises TypeError, a made kind's shard unloads it, one not made is not
    asked."""
    by_record = GroupShard(kinds=(*KINDS, _lazy_fake()))
    by_record.replay(FakeJoined("fg", "m1"))
    fake, = _made(by_record)
    assert by_record.group("fg").members == {"m1": "client"} and by_record.kind_of(by_record.groups["fg"]) is fake
    loaded = by_record.loaded(100)
    assert [(op.key, op.deadline_ms) for op in loaded.timers] == [(FakeSessionKey("fg", "m1"), 100 + SESSION_MS)]

    by_group = GroupShard(kinds=(*KINDS, _lazy_fake()))
    by_group.groups["fg"] = FakeGroup("fg", members={"m1": "c"})   # (as a snapshot's replay puts it)
    info = by_group.group_info("fg")
    assert info is not None and info.kind == "fake" and len(_made(by_group)) == 1

    untouched = GroupShard(kinds=(*KINDS, _lazy_fake()))
    untouched.unload(0)
    assert _made(untouched) == []
    with pytest.raises(TypeError, match="not a coordinator event"):
        untouched.replay(object())
    assert len(_made(untouched)) == 1          # (looked for among every kind first)


def test_a_lazy_kinds_registry_line_must_be_its_class():
    """The registry line's name and APIs are what the shard routes before the class is imported: one that is
    not the class's fails at its first use, and every use after it, never routing to a kind half made."""
    for line in (_lazy_fake(name="other"), _lazy_fake(apis=frozenset({FAKE_API, FAKE_API + 1}))):
        c = GroupShard(kinds=(*KINDS, line))
        for _ in range(2):
            with pytest.raises(AssertionError, match="registry line"):
                c.handle(FAKE_API, _ctx(1), SimpleNamespace(group_id="fg", member_id="m1"))
        assert _made(c) == [] and c.groups == {}


def test_the_consumer_and_share_kinds_are_made_at_a_shards_first_request_of_theirs():
    """The registry's consumer and share group kinds are lazy: a shard makes them at its first
    ConsumerGroupHeartbeat or ShareGroupHeartbeat; other shards stay without them."""
    lazy = {k.name: k for k in KINDS if isinstance(k, LazyKind)}
    assert sorted(lazy) == ["consumer", "share"]
    assert all(k.apis == k.load().apis for k in lazy.values())
    first, other = GroupShard(), GroupShard()
    assert [k.name for k in first.kinds.all] == ["classic"] and first._topic_hashes is None
    req = SimpleNamespace(group_id="sg", member_id="m1", member_epoch=0, rack_id=None,
                          subscribed_topic_names=["t"])
    res = first.handle(76, RequestContext(1, 1, "client", "/127.0.0.1", 0), req)
    (_, body), = res.responses
    assert body.error_code == 0 and body.member_epoch == 1, body
    assert {k.name for k in first.kinds.all} == {"classic", "consumer", "share"}   # (every lazy kind at once)
    assert first.group_info("sg").kind == "share" and [k.name for k in other.kinds.all] == ["classic"]
    # a KIP-848 join: a group of the consumer kind, its topic hashes' cache made then
    req = SimpleNamespace(group_id="cg", member_id="m1", member_epoch=0, instance_id=None, rack_id=None,
                          rebalance_timeout_ms=10000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
                          server_assignor=None, topic_partitions=[])
    res = other.handle(68, RequestContext(2, 0, "client", "/127.0.0.1", 0), req)
    (_, body), = res.responses
    assert body.error_code == 0 and body.member_epoch == 1, body
    assert other.group_info("cg").kind == "consumer" and other._topic_hashes is not None


# ---------------------------------------------------------------------------------- the source's rules
REPO = Path(__file__).resolve().parents[2]
KIND_FOLDERS = (REPO / "coordinator" / "classic", REPO / "coordinator" / "consumer")
GROUP_CLASSES = {"ClassicGroup", "ConsumerGroup"}


def _sources() -> list[Path]:
    return sorted([*(REPO / "coordinator").rglob("*.py"), *(REPO / "tenure" / "control").rglob("*.py")])


def _in_kind_folder(path: Path) -> bool:
    return any(folder in path.parents for folder in KIND_FOLDERS)


def _names(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts))
    if isinstance(node, ast.BinOp):                             # ClassicGroup | ConsumerGroup
        return _names(node.left) | _names(node.right)
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def _is_kind(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "kind"


def test_no_kind_tests_outside_the_kind_folders():
    found = []
    for path in _sources():
        if _in_kind_folder(path):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                    and len(node.args) == 2 and _names(node.args[1]) & GROUP_CLASSES):
                found.append(f"{where}: isinstance on a group class")
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops) \
                    and any(_is_kind(x) for x in [node.left, *node.comparators]):
                found.append(f"{where}: a .kind ==/!= test")
    assert found == [], "ask the group's kind (coordinator/kinds.py) instead:\n" + "\n".join(found)


def _underscore_methods(tree: ast.Module) -> set[str]:
    return {f.name for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) for f in cls.body
            if isinstance(f, ast.FunctionDef) and f.name.startswith("_") and not f.name.startswith("__")}


def _underscore_calls(tree: ast.Module) -> list[tuple[int, str]]:
    return [(node.lineno, node.func.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("_") and not node.func.attr.startswith("__")]


def test_no_classic_part_calls_another_modules_underscore_methods():
    classic = sorted((REPO / "coordinator" / "classic").glob("*.py"))
    trees = {p: ast.parse(p.read_text(), str(p)) for p in _sources()}
    defined = {p: _underscore_methods(trees[p]) for p in classic}
    assert set().union(*defined.values()), "the walk found no classic methods: is the path right?"
    found = []
    for path, tree in trees.items():
        own = _underscore_methods(tree)
        for line, name in _underscore_calls(tree):
            owners = [p.name for p, names in defined.items() if name in names and p != path]
            if owners and name not in own:
                found.append(f"{path.relative_to(REPO)}:{line}: {name} (defined in classic/{', '.join(owners)})")
    assert found == [], "call the part's public method instead:\n" + "\n".join(found)
