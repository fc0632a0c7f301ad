"""Inspection: the coordinator's state as plain, frozen Python objects.

What a test asks of a group - who is in it, which member holds which partitions, the generation, the
committed offsets, how many rebalances happened and why - in one line:

    g = tenure_server.group("orders")
    assert g.generation == 1 and g.rebalances == 1
    assert g.assignments == {"c-1": {"t": [0, 1, 2]}, "c-2": {"t": [3, 4, 5]}}

The views are copies taken on the server's loop (ServerThread does that), so reading them from a test
thread is safe. `to_dict()` is the admin endpoint's JSON.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from tenure.inspection import GroupInfo, MemberInfo

MemberView = MemberInfo             # a member as its group's kind describes it (tenure/inspection.py)


@dataclass(frozen=True)
class OffsetView:
    topic: str
    partition: int
    offset: int
    metadata: str | None
    commit_timestamp: int


@dataclass(frozen=True)
class GroupView(GroupInfo):
    """A group as its kind describes it (GroupInfo: kind "classic" or "consumer", whose generation is its group
    epoch; members; the static members' instance ids), with what is not the group's: its committed offsets and
    the rebalances it started since this server process started."""
    offsets: tuple[OffsetView, ...]
    rebalances: int
    rebalance_causes: dict[str, int]

    def member(self, key: str) -> MemberView | None:
        """A member by group.instance.id or member id."""
        for m in self.members:
            if key in (m.group_instance_id, m.member_id):
                return m
        return None

    @property
    def assignments(self) -> dict[str, dict[str, list[int]] | None]:
        """{instance id (or member id of a dynamic member): {topic: partitions}}."""
        return {m.group_instance_id or m.member_id: m.assignment for m in self.members}

    def offset(self, topic: str, partition: int) -> int | None:
        for o in self.offsets:
            if (o.topic, o.partition) == (topic, partition):
                return o.offset
        return None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["members"] = [asdict(m) for m in self.members]
        d["offsets"] = [asdict(o) for o in self.offsets]
        return d


def group_view(server, group_id: str) -> GroupView | None:
    """The view of one group of a `tenure.server.Server` (call on its loop); None if unknown. The group's kind
    describes it (`GroupInfo`, tenure/inspection.py); the offsets and rebalance counts are added here."""
    info = server.runtime.group_info(group_id)
    if info is None:
        return None
    offsets = server.runtime.committed_offsets(group_id)
    return GroupView(
        info.group_id, info.kind, info.state, info.generation, info.protocol_type, info.protocol, info.leader,
        info.members, dict(info.static_members),
        tuple(OffsetView(t, p, r.offset, r.metadata, r.commit_timestamp) for (t, p), r in sorted(offsets.items())),
        server.metrics.rebalance_count(info.group_id), server.metrics.rebalance_causes(info.group_id))


def groups_view(server) -> list[GroupView]:
    return [v for v in (group_view(server, gid) for gid in server.runtime.group_ids()) if v is not None]
