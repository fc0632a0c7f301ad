"""The base of a shard's parts (the group kinds, the offsets, the admin APIs)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenure.protocol.records import OffsetCommitRecord

    from .config import CoordinatorConfig
    from .kinds import Group
    from .shard import GroupShard


class ShardHandler:
    """Reads its shard's live state and returns Results; holds no state of its own (the shard replays
    what a part returns)."""

    def __init__(self, shard: GroupShard) -> None:
        self.shard = shard

    @property
    def groups(self) -> dict[str, Group]:
        """Every group of the shard, of every kind (a kind narrows to its own: `isinstance` in its folder)."""
        return self.shard.groups

    @property
    def offsets(self) -> dict[str, dict[tuple[str, int], OffsetCommitRecord]]:
        return self.shard.offsets

    @property
    def static_event_keys(self) -> dict[str, set[str]]:
        return self.shard.static_event_keys

    @property
    def config(self) -> CoordinatorConfig:
        return self.shard.config

    def expected_members(self, group_id: str) -> int | None:
        """How many members a test said group `group_id` starts with (`expect_group`), or None."""
        return self.shard.expectations.get(group_id)
