"""What a group kind tells inspection about one of its groups: a plain, frozen read model, the same shape for
every kind (`GroupKind.info`). A leaf module, as tenure/counters.py: the coordinator builds it, and the control
surface (tenure/control/views.py) adds what is not the group's (committed offsets, rebalance counts) without
importing the coordinator or ever looking at a kind's group values."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemberInfo:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: dict[str, list[int]] | None      # {topic name: partitions}; None: not the consumer protocol
    assignment_bytes: int                        # the size of a classic member's assignment as it was sent
    member_epoch: int | None = None              # a KIP-848 consumer group member's epoch

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    kind: str                       # the kind's name ("classic", "consumer")
    state: str
    generation: int                 # a consumer group's: its group epoch
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    members: tuple[MemberInfo, ...]
    static_members: dict[str, str]  # group.instance.id -> member id
