"""A share group's value: its epoch, its members (subscription, epoch, assigned partitions), its target
assignment and that assignment's epoch.

Built by the shard's `replay` from Kafka's share group records alone (types 10-14), so a restart, a coordinator
move and the audit see the group the live coordinator had. A share member has nothing to revoke: its
assignment is its target as soon as it heartbeats (a partition may be shared by several members), so a group
with members is Stable and one without is Empty (Kafka's ShareGroupState).
"""
from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field

from tenure.protocol.share_group_records import (
    ShareAssignmentRecord,
    ShareGroupMetadataRecord,
    ShareIgnoredRecord,
    ShareMemberRecord,
    ShareTargetMemberRecord,
    ShareTargetMetadataRecord,
)

EMPTY, STABLE, DEAD = "Empty", "Stable", "Dead"
LEAVE_EPOCH = -1

Partitions = dict[uuid.UUID, frozenset[int]]


def freeze(assignment: Partitions) -> tuple:
    """A Partitions dict as records carry it: ((topic id, (partition, ...)), ...), both sorted."""
    return tuple(sorted((tid, tuple(sorted(parts))) for tid, parts in assignment.items() if parts))


def thaw(assignment) -> Partitions:
    return {tid: frozenset(parts) for tid, parts in assignment if parts}


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    # the current assignment (record type 14)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Partitions = field(default_factory=dict)

    def replace(self, **kw) -> ShareMember:
        return dataclasses.replace(self, **kw)

    def metadata(self) -> tuple:
        return self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)

    kind = "share"
    protocol_type = "share"

    @property
    def generation(self) -> int:
        """The group epoch, under the name classic groups give their generation (inspection, logs)."""
        return self.group_epoch

    @property
    def static_members(self) -> dict[str, str]:
        return {}                       # share groups have no static membership

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def is_empty(self) -> bool:
        return not self.members

    def in_session(self, member_id: str) -> bool:
        return member_id in self.members

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def copy(self) -> ShareGroup:
        return dataclasses.replace(self, members=dict(self.members), targets=dict(self.targets))


def replay_share_record(groups: dict, event) -> None:
    """What replaying a share group record does: full-value upserts of the group's epoch, a member's
    subscription, its target, its current assignment; a tombstone removes what its key names (the group's
    metadata tombstone, the group)."""
    if isinstance(event, ShareIgnoredRecord):
        return
    gid = event.group_id
    g = groups.get(gid)
    if not isinstance(g, ShareGroup):
        if event.tombstone:
            return
        g = groups[gid] = ShareGroup(gid)
    if isinstance(event, ShareGroupMetadataRecord):
        if event.tombstone:
            del groups[gid]
        else:
            g.group_epoch = event.epoch
    elif isinstance(event, ShareTargetMetadataRecord):
        g.assignment_epoch = 0 if event.tombstone else event.assignment_epoch
    elif isinstance(event, ShareTargetMemberRecord):
        if event.tombstone:
            g.targets.pop(event.member_id, None)
        else:
            g.targets[event.member_id] = thaw(event.partitions)
    elif isinstance(event, ShareMemberRecord):
        if event.tombstone:
            g.members.pop(event.member_id, None)
        else:
            m = g.members.get(event.member_id) or ShareMember(event.member_id)
            g.members[event.member_id] = m.replace(rack_id=event.rack_id, client_id=event.client_id,
                                                   client_host=event.client_host,
                                                   subscribed_topic_names=event.subscribed_topic_names)
    elif isinstance(event, ShareAssignmentRecord):
        current = g.members.get(event.member_id)
        if event.tombstone:
            if current is not None:
                g.members[event.member_id] = current.replace(member_epoch=0, previous_member_epoch=0, assigned={})
        else:
            g.members[event.member_id] = (current or ShareMember(event.member_id)).replace(
                member_epoch=event.member_epoch, previous_member_epoch=event.previous_member_epoch,
                assigned=thaw(event.assigned))
