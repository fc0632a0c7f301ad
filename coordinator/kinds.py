"""Group kinds as one interface, and the registry of the kinds a shard serves.

A group kind (the classic protocol's groups in classic/, KIP-848's consumer groups in consumer/) is one shard's
handler of its groups of that kind: the APIs it answers, the records it replays, the timers it arms, what a
load and an unload do to its groups, the rules it imposes on committed offsets, how the admin APIs and controls
see its groups (`info`: one of its groups as inspection.py's read model). `Group` is what the shard's
kind-agnostic parts read of a group of any kind. The shard (shard.py) dispatches to the kinds through this
interface only: a new kind is a folder with a class that satisfies `GroupKind`, plus one line in `KINDS`.

A kind a plain server does not serve until a client asks (KIP-848's consumer groups, the share groups) is
registered as a `LazyKind`: its
name, its APIs and where its class is. Its module is imported (tenure/deferred.py), and its instance in a shard
made, the first time that shard needs it: a request of one of its APIs, or one of its records, timers or group
values (whose types exist only once its module is imported). Until then the shard routes its APIs to a first-use
step and asks it nothing else: a kind not yet made has no groups, timers or parked requests.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from tenure.deferred import deferred

from .classic import ClassicGroups
from .result import RequestContext, Result
from .timers import TimerKey

if TYPE_CHECKING:
    from tenure.inspection import GroupInfo

    from .shard import GroupShard


class Group(Protocol):
    """A group value of any kind, as the shard's kind-agnostic parts (replay, offsets, the admin APIs, the runtime)
    read it; everything else about a group is its kind's business."""
    @property
    def group_id(self) -> str: ...
    @property
    def kind(self) -> str: ...                    # its kind's name
    @property
    def state(self) -> str: ...                   # "Dead", "Empty", ... as ListGroups names it
    @property
    def generation(self) -> int: ...
    @property
    def protocol_type(self) -> str | None: ...
    @property
    def members(self) -> Mapping[str, object]: ...
    @property
    def static_members(self) -> Mapping[str, str]: ...   # group.instance.id -> member id

    def is_empty(self) -> bool: ...
    def in_session(self, member_id: str) -> bool: ...
    def copy(self) -> Group: ...


class GroupKind(Protocol):
    name: ClassVar[str]                            # ListGroups' group type ("classic", "consumer", "share")
    group_type: ClassVar[type]                     # the value of one of its groups
    apis: ClassVar[frozenset[int]]                 # the API keys it answers
    record_types: ClassVar[tuple[type, ...]]       # the __consumer_offsets records it replays
    timer_keys: ClassVar[tuple[type, ...]]         # the timers it arms

    def __init__(self, shard: GroupShard) -> None: ...     # one per shard

    def handlers(self) -> Mapping[int, Callable[[RequestContext, Any], Result]]: ...   # API key -> its handler
    def replay(self, record: Any) -> None: ...
    def on_timer(self, key: TimerKey, now_ms: int) -> Result: ...
    def loaded(self, res: Result, g: Any, now_ms: int) -> None: ...
    def unloaded(self, res: Result, code: int) -> None: ...
    def session_key(self, group_id: str, member_id: str) -> TimerKey: ...
    # a classic-protocol request (JoinGroup 11, Heartbeat 12, LeaveGroup 13, SyncGroup 14) naming one of its
    # groups: the classic kind hands those to a group of another kind (online migration, migration.py)
    def classic_request(self, api_key: int, ctx: RequestContext, req: Any) -> Result: ...

    # the rules committed offsets follow (offsets.py)
    def validate_commit(self, res: Result, g: Any, ctx: RequestContext, generation: int, member_id: str,
                        instance_id: str | None, transactional: bool = False) -> tuple[int, Any]: ...
    def committed(self, res: Result, g: Any, member: Any, now_ms: int) -> None: ...
    def validate_fetch(self, g: Any, member_id: str | None, epoch: int) -> int: ...
    def offset_delete_error(self, g: Any) -> int: ...
    def subscribed_topics(self, g: Any) -> set[str] | None: ...

    # inspection (inspection.py): one of its groups as the read model the control surface's views are made of
    def info(self, g: Any) -> GroupInfo: ...

    # the admin APIs and controls (group_admin.py)
    def delete_records(self, g: Any) -> list: ...
    def force_rebalance(self, group_id: str, now_ms: int) -> Result: ...


class LazyKind:
    """A registered kind made on first use (see above): what the shard knows of it before, its `name` and `apis`,
    and its class, `cls_name` in `module`, imported when a shard first makes it."""

    __slots__ = ("name", "apis", "module", "cls_name")

    def __init__(self, name: str, apis: frozenset[int], module: str, cls_name: str) -> None:
        self.name, self.apis, self.cls_name = name, apis, cls_name
        self.module = deferred(module)

    def __repr__(self) -> str:
        return f"LazyKind({self.name!r}, {self.module!r})"

    def load(self) -> type[GroupKind]:
        """The kind's class (its module imported now if it was not yet)."""
        cls = getattr(self.module, self.cls_name)
        assert (cls.name, cls.apis) == (self.name, self.apis), f"the {self.name} kind's registry line is not its class"
        return cls


# The kinds, in the order the shard asks them. One line per kind.
KINDS: tuple[type[GroupKind] | LazyKind, ...] = (
    ClassicGroups,
    LazyKind("consumer", frozenset({68, 69}), "tenure.coordinator.consumer.heartbeat", "ConsumerGroups"),
    LazyKind("share", frozenset({76, 77}), "tenure.coordinator.share.heartbeat", "ShareGroups"),
)


class _Routes(dict[type, GroupKind]):
    """A type -> kind table of a shard; a type no kind made yet owns makes the shard's lazy kinds, then looks
    again (a record, timer or group of a lazy kind exists only once its module is imported)."""

    __slots__ = ("_kinds",)

    def __init__(self, kinds: ShardKinds) -> None:
        super().__init__()
        self._kinds = kinds

    def __missing__(self, key: type) -> GroupKind:
        if not self._kinds.make_lazy_kinds():
            raise KeyError(key)
        return self[key]


class ShardKinds:
    """One shard's kinds (one instance of each registered kind, a `LazyKind` made on first use) and what routes to
    each: its APIs' handlers, its record types, its timer key types, its group values. Routing tables only: no
    state of their own. `all`: the kinds made so far, in registry order for the eager ones; `registered`: every
    registry line."""

    def __init__(self, shard: GroupShard,
                 kinds: Sequence[Callable[[GroupShard], GroupKind] | LazyKind] = ()) -> None:
        self.shard = shard
        self.registered = tuple(kinds or KINDS)
        self.all: tuple[GroupKind, ...] = ()
        self.of_record: dict[type, GroupKind] = _Routes(self)
        self.of_timer: dict[type, GroupKind] = _Routes(self)
        self.of_group: dict[type, GroupKind] = _Routes(self)
        self.handlers: dict[int, Callable[[RequestContext, Any], Result]] = {}
        self._lazy: list[LazyKind] = []
        for entry in self.registered:
            if isinstance(entry, LazyKind):
                self._lazy.append(entry)
                self.handlers.update({api: self._first_use(api) for api in entry.apis})
            else:
                self._add(entry(shard))

    def _add(self, k: GroupKind) -> None:
        handlers = k.handlers()
        assert set(handlers) == k.apis, f"the {k.name} kind's handlers are not its apis"
        self.all = (*self.all, k)
        self.of_record.update((t, k) for t in k.record_types)
        self.of_timer.update((t, k) for t in k.timer_keys)
        self.of_group[k.group_type] = k
        self.handlers.update(handlers)
        routes = getattr(self.shard, "routes", None)   # (the shard's own table, once it has one)
        if routes is not None:
            routes.update(handlers)

    def make_lazy_kinds(self) -> bool:
        """Make this shard's lazy kinds not made yet (their modules imported if no shard has yet); whether any
        was."""
        made = bool(self._lazy)
        while self._lazy:
            self._add(self._lazy[0].load()(self.shard))
            del self._lazy[0]
        return made

    def _first_use(self, api: int) -> Callable[[RequestContext, Any], Result]:
        def first_request(ctx: RequestContext, req: Any) -> Result:
            self.make_lazy_kinds()
            return self.handlers[api](ctx, req)
        return first_request
