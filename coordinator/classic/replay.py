"""What replaying its one record type does to the classic groups: a GroupMetadata record is the full value of a
stable group (members with their protocols and assignments, the static members' instance map); its tombstone
removes the group, or leaves an offsets-only group where offsets remain (as Kafka's loader sees it)."""
from __future__ import annotations

from tenure.protocol.records import GroupMetadataRecord

from .group import EMPTY, STABLE, ClassicGroup, Member


def replay_group_metadata(groups: dict, offsets: dict, event: GroupMetadataRecord) -> None:
    if event.tombstone:
        # a group exists through its metadata or through its offsets (as Kafka's loader sees it)
        if event.group_id in offsets:
            groups[event.group_id] = ClassicGroup(event.group_id)
        else:
            groups.pop(event.group_id, None)
        return
    g = ClassicGroup(event.group_id, state=STABLE if event.members else EMPTY,
                     generation=event.generation, protocol_type=event.protocol_type,
                     protocol_name=event.protocol, leader_id=event.leader,
                     state_timestamp=event.current_state_timestamp)
    for mr in event.members:
        g.members[mr.member_id] = Member(
            mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host,
            mr.rebalance_timeout_ms, mr.session_timeout_ms, event.protocol_type,
            ((event.protocol or "", mr.subscription),), mr.assignment)
        if mr.group_instance_id is not None:
            g.static_members[mr.group_instance_id] = mr.member_id
    groups[event.group_id] = g
