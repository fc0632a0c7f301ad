"""Group kinds as one interface, and the registry of the kinds a shard serves.

A group kind (the classic protocol's groups in classic/, KIP-848's consumer groups in consumer/) is one shard's
handler of its groups of that kind: the APIs it answers, the records it replays, the timers it arms, what a
load and an unload do to its groups, the rules it imposes on committed offsets, how the admin APIs and controls
see its groups (`info`: one of its groups as inspection.py's read model). `Group` is what the shard's
kind-agnostic parts read of a group of any kind. The shard (shard.py) dispatches to the kinds through this
interface only: a new kind is a folder with a class that satisfies `GroupKind`, plus one line in `KINDS`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from tenure.inspection import GroupInfo

from .classic import ClassicGroups
from .consumer.heartbeat import ConsumerGroups
from .result import RequestContext, Result
from .share.heartbeat import ShareGroups
from .timers import TimerKey

if TYPE_CHECKING:
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


# The kinds, in the order the shard asks them. One line per kind.
KINDS: tuple[type[GroupKind], ...] = (ClassicGroups, ConsumerGroups, ShareGroups)


class ShardKinds:
    """One shard's kinds (one instance of each registered kind) and what routes to each: its APIs' handlers, its
    record types, its timer key types, its group values. Routing tables only: no state of their own."""

    def __init__(self, shard: GroupShard, kinds: Sequence[Callable[[GroupShard], GroupKind]] = ()) -> None:
        self.all: tuple[GroupKind, ...] = tuple(kind(shard) for kind in kinds or KINDS)
        self.of_record = {t: k for k in self.all for t in k.record_types}
        self.of_timer = {t: k for k in self.all for t in k.timer_keys}
        self.of_group = {k.group_type: k for k in self.all}
        self.handlers = {api: handler for k in self.all for api, handler in k.handlers().items()}
        for k in self.all:
            assert set(k.handlers()) == k.apis, f"the {k.name} kind's handlers are not its apis"
