"""The base of a shard's parts (the classic group kind, the offsets, the admin APIs)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenure.protocol.records import OffsetCommitRecord

    from .classic.group import ClassicGroup
    from .config import CoordinatorConfig
    from .shard import GroupCoordinator


class ShardPart:
    """Reads its shard's live state and returns Results; holds no state of its own (the shard replays
    what a part returns)."""

    def __init__(self, shard: GroupCoordinator) -> None:
        self.shard = shard

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.shard.groups

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        """The group if it is a classic one (a consumer group is no classic group's business)."""
        g = self.shard.groups.get(group_id)
        return g if g is not None and self.shard.kind_of(g).classic_protocol else None

    @property
    def offsets(self) -> dict[str, dict[tuple[str, int], OffsetCommitRecord]]:
        return self.shard.offsets

    @property
    def static_event_keys(self) -> dict[str, set[str]]:
        return self.shard.static_event_keys

    @property
    def config(self) -> CoordinatorConfig:
        return self.shard.config
