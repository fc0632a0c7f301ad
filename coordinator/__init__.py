"""The group coordinator: one shard per `__consumer_offsets` partition, each a deterministic,
event-sourced state machine (no I/O, no wall clock), and the runtime that drives the shards.

Import from here, not from the files inside: shard.py (routing, replay, load/unload, queries),
classic/ (the classic group kind), consumer/ (the KIP-848 consumer group kind), kinds.py (the
GroupKind interface and the registry of kinds), inspection.py (a group's read model), offsets.py, group_admin.py, timers.py, result.py, config.py, routing.py
(Kafka's group hash: the offsets partition, and so the shard, of a group); the runtime
(`tenure.coordinator.runtime`), the one writer to `__consumer_offsets` (`writer.py`).
"""
from typing import TYPE_CHECKING, Any

import tenure.protocol  # noqa: F401 - first: it loads kafka-python without its import-time warning

from .classic import ClassicGroups  # noqa: E402
from .classic.group import (  # noqa: E402
    ALL_STATES,
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    VALID_PREVIOUS,
    ClassicGroup,
    IllegalTransition,
    Member,
    Parked,
)
from .config import AdminError, CoordinatorConfig, default_member_id  # noqa: E402
from .result import GroupSnapshot, RequestContext, Result, TimerOp  # noqa: E402
from .routing import java_string_hash, partition_for  # noqa: E402
from .shard import GROUP_APIS, ROUTES, GroupShard  # noqa: E402
from .timers import (  # noqa: E402
    KEY_TYPES,
    ExpansionKey,
    HeartbeatKey,
    JoinKey,
    PendingKey,
    RegistrationKey,
    SyncKey,
    TimerKey,
    TimerWheel,
)

if TYPE_CHECKING:
    from tenure.inspection import GroupInfo, MemberInfo


def __getattr__(name: str) -> Any:
    """GroupInfo and MemberInfo (tenure/inspection.py, the read model of a group): imported the first time either
    is asked of this package, as the group kinds import them at their first `info`."""
    if name in ("GroupInfo", "MemberInfo"):
        from tenure import inspection
        return getattr(inspection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALL_STATES", "COMPLETING_REBALANCE", "DEAD", "EMPTY", "PREPARING_REBALANCE", "STABLE", "VALID_PREVIOUS",
    "ClassicGroup", "ClassicGroups", "IllegalTransition", "Member", "Parked",
    "AdminError", "CoordinatorConfig", "default_member_id", "GroupInfo", "MemberInfo",
    "GroupSnapshot", "RequestContext", "Result", "TimerOp", "java_string_hash", "partition_for",
    "GROUP_APIS", "ROUTES", "GroupShard",
    "KEY_TYPES", "ExpansionKey", "HeartbeatKey", "JoinKey", "PendingKey", "RegistrationKey", "SyncKey", "TimerKey",
    "TimerWheel",
]
