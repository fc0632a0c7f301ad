"""What replaying a KIP-848 consumer group record does: full-value upserts of the group's epoch and hash, its
subscribed topics' metadata as Kafka 4.0 keeps it (type 4, whatever the release served: the release decides what is
compared and written, heartbeat.py), a member's subscription, its target, its current assignment, a regular expression's resolution; a tombstone removes what its key names (the group's
metadata tombstone the group itself, leaving an offsets-only group if it has offsets)."""
from __future__ import annotations

from collections.abc import Callable

from tenure.protocol.consumer_group_records import (
    ConsumerGroupMetadataRecord,
    ConsumerGroupPartitionMetadataRecord,
    ConsumerMemberRecord,
    RegularExpressionRecord,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
)

from .group import METADATA_FIELDS, ConsumerGroup, ConsumerMember, ResolvedRegex, thaw


def replay_consumer_record(groups: dict, offsets: dict, event, offsets_only_group: Callable[[str], object]) -> None:
    gid = event.group_id
    g = groups.get(gid)
    if not isinstance(g, ConsumerGroup):
        if event.tombstone:
            return
        g = groups[gid] = ConsumerGroup(gid)          # replaces an empty classic group (conversion)
    if isinstance(event, ConsumerGroupMetadataRecord):
        if event.tombstone:
            if gid in offsets:
                groups[gid] = offsets_only_group(gid)
            else:
                del groups[gid]
        else:
            g.group_epoch, g.metadata_hash = event.epoch, event.metadata_hash
    elif isinstance(event, ConsumerGroupPartitionMetadataRecord):
        g.subscription_metadata = () if event.tombstone else event.topics
        g.has_subscription_metadata_record = not event.tombstone
    elif isinstance(event, RegularExpressionRecord):
        if event.tombstone:
            g.regexes.pop(event.regex, None)
        else:
            g.regexes[event.regex] = ResolvedRegex(frozenset(event.topics), event.version, event.timestamp)
    elif isinstance(event, TargetAssignmentMetadataRecord):
        g.assignment_epoch = 0 if event.tombstone else event.assignment_epoch
    elif isinstance(event, TargetAssignmentMemberRecord):
        if event.tombstone:
            g.targets.pop(event.member_id, None)
        else:
            g.targets[event.member_id] = thaw(event.partitions)
    elif isinstance(event, ConsumerMemberRecord):
        if event.tombstone:
            g.drop_member(event.member_id)
        else:
            m = g.members.get(event.member_id) or ConsumerMember(event.member_id)
            g.put_member(m.replace(**{f: getattr(event, f) for f in METADATA_FIELDS}))
    else:                                             # CurrentAssignmentRecord
        current = g.members.get(event.member_id)
        if event.tombstone:
            if current is not None:
                g.put_member(current.replace(member_epoch=0, previous_member_epoch=0, state=0, assigned={},
                                       pending_revocation={}))
        else:
            g.put_member((current or ConsumerMember(event.member_id)).replace(
                member_epoch=event.member_epoch, previous_member_epoch=event.previous_member_epoch,
                state=event.state, assigned=thaw(event.assigned), pending_revocation=thaw(event.pending_revocation)))
