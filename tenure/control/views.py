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


@dataclass(frozen=True)
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: dict[str, list[int]] | None      # {topic: partitions}; None: not the consumer protocol
    assignment_bytes: int
    member_epoch: int | None = None              # a consumer group (KIP-848) member's epoch

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


@dataclass(frozen=True)
class OffsetView:
    topic: str
    partition: int
    offset: int
    metadata: str | None
    commit_timestamp: int


@dataclass(frozen=True)
class GroupView:
    group_id: str
    kind: str                       # "classic", or "consumer" (KIP-848; generation is its group epoch)
    state: str
    generation: int
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    members: tuple[MemberView, ...]
    static_members: dict[str, str]  # group.instance.id -> member id
    offsets: tuple[OffsetView, ...]
    rebalances: int                 # rebalances started since this server process started
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
    describes it (`GroupInfo`, coordinator/inspection.py); the offsets and rebalance counts are added here."""
    info = server.runtime.group_info(group_id)
    if info is None:
        return None
    offsets = server.runtime.committed_offsets(group_id)
    members = tuple(MemberView(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                               m.rebalance_timeout_ms, m.assignment, m.assignment_bytes, m.member_epoch)
                    for m in info.members)
    return GroupView(
        info.group_id, info.kind, info.state, info.generation, info.protocol_type, info.protocol, info.leader,
        members, dict(info.static_members),
        tuple(OffsetView(t, p, r.offset, r.metadata, r.commit_timestamp) for (t, p), r in sorted(offsets.items())),
        server.metrics.rebalance_count(info.group_id), server.metrics.rebalance_causes(info.group_id))


def groups_view(server) -> list[GroupView]:
    return [v for v in (group_view(server, gid) for gid in server.runtime.group_ids()) if v is not None]
