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

from tenure.coordinator import GroupShard, GroupInfo, MemberInfo, RequestContext, Result, TimerKey
from tenure.coordinator import kinds as kinds_module
from tenure.coordinator.config import AdminError
from tenure.coordinator.kinds import KINDS
from tenure.coordinator.handler import ShardHandler
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
    assert len(c.kinds.all) == len(KINDS) + 1
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
