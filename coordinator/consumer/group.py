"""A KIP-848 consumer group's value: its epoch and metadata hash, its members (subscription, epoch,
reconciliation state, owned partitions), its target assignment, and the owner of every partition.

The value is built by the shard's `replay` from Kafka's consumer group records alone (types 3-8, 16), so a
restart, a failover and the audit all see the same group the live coordinator had. Handlers never change
it: they read it, work on copies and return records.
"""
from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field

from tenure.protocol.consumer_group_records import ClassicMemberMetadata

# a member's reconciliation state (Kafka's MemberState byte)
STABLE_MEMBER, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 0, 1, 2
MEMBER_STATES = {STABLE_MEMBER: "stable", UNREVOKED_PARTITIONS: "unrevoked_partitions",
                 UNRELEASED_PARTITIONS: "unreleased_partitions"}

# the group's state as ConsumerGroupDescribe and ListGroups name it
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"

LEAVE_EPOCH = -1            # a member leaving for good
STATIC_LEAVE_EPOCH = -2     # a static member closing that will come back with its instance id

# partitions by topic id
Partitions = dict[uuid.UUID, frozenset[int]]


def freeze(assignment) -> tuple:
    """A Partitions dict as records carry it: ((topic id, (partition, ...)), ...), both sorted."""
    return tuple(sorted((tid, tuple(sorted(parts))) for tid, parts in assignment.items() if parts))


def thaw(assignment) -> Partitions:
    return {tid: frozenset(parts) for tid, parts in assignment if parts}


def pairs(assignment: Partitions) -> set[tuple[uuid.UUID, int]]:
    return {(tid, p) for tid, parts in assignment.items() for p in parts}


def from_pairs(items) -> Partitions:
    out: dict[uuid.UUID, set[int]] = {}
    for tid, p in items:
        out.setdefault(tid, set()).add(p)
    return {tid: frozenset(ps) for tid, ps in out.items()}


@dataclass(frozen=True)
class ResolvedRegex:
    """What a subscribed regular expression resolved to (record type 16): topic names, the topic table's
    version then, and when (regex.py)."""
    topics: frozenset[str]
    version: int = 0
    timestamp: int = 0


# the fields a member metadata record (type 5) carries, under the same names in the record and the member
METADATA_FIELDS = ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                   "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor", "classic")


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # a member speaking the classic protocol inside the group (online migration): its session timeout and JoinGroup
    # protocols (None: it speaks the consumer protocol)
    classic: ClassicMemberMetadata | None = None
    # the current assignment (record type 8)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE_MEMBER
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)

    def replace(self, **kw) -> ConsumerMember:
        return dataclasses.replace(self, **kw)

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def uses_classic(self) -> bool:
        return self.classic is not None

    def metadata(self) -> dict:
        """What the member metadata record (type 5) holds of it."""
        return {f: getattr(self, f) for f in METADATA_FIELDS}

    def same_metadata(self, other: ConsumerMember) -> bool:
        return self.metadata() == other.metadata()

    def same_assignment(self, other: ConsumerMember) -> bool:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned,
                self.pending_revocation) == (other.member_epoch, other.previous_member_epoch, other.state,
                                             other.assigned, other.pending_revocation)


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    # as Kafka 4.0 keeps it (record type 4, before KIP-1101's hash): the subscribed topics' (id, name, partition
    # count), sorted by name; and whether the log holds such a record no tombstone has removed yet (a 4.1+
    # coordinator writes that tombstone at the group's next epoch bump)
    subscription_metadata: tuple[tuple[uuid.UUID, str, int], ...] = ()
    has_subscription_metadata_record: bool = False
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    targets: dict[str, Partitions] = field(default_factory=dict)
    # the subscribed regular expressions' resolutions (record type 16), by expression
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    # derived while replaying: instance id -> member id; partition -> the member owning it (assigned or
    # pending revocation), so no partition is ever given to two members
    static_members: dict[str, str] = field(default_factory=dict)
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)

    kind = "consumer"
    protocol_type = "consumer"

    @property
    def generation(self) -> int:
        """The group epoch, under the name classic groups give their generation (inspection, logs)."""
        return self.group_epoch

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE_MEMBER for m in self.members.values()):
            return RECONCILING
        return STABLE

    def is_empty(self) -> bool:
        return not self.members

    def all_classic_except(self, member_ids) -> bool:
        """Whether every member but those named speaks the classic protocol (Kafka's
        allMembersUseClassicProtocolExcept): the condition of a downgrade."""
        return all(m.uses_classic for mid, m in self.members.items() if mid not in member_ids)

    def in_session(self, member_id: str) -> bool:
        """A member whose session has not expired: one of the group (a member whose session expires is
        fenced - removed -, a static one too)."""
        return member_id in self.members

    def subscribed_topics(self) -> set[str]:
        """The topics its members subscribe to: by name, and what their regular expressions resolved to."""
        out = {t for m in self.members.values() for t in m.subscribed_topic_names}
        for m in self.members.values():
            r = self.regexes.get(m.subscribed_topic_regex) if m.subscribed_topic_regex else None
            if r is not None:
                out |= r.topics
        return out

    def copy(self) -> ConsumerGroup:
        return dataclasses.replace(self, members=dict(self.members), targets=dict(self.targets),
                                   regexes=dict(self.regexes), static_members=dict(self.static_members),
                                   owners=dict(self.owners))

    # ---- used by replay only
    def put_member(self, m: ConsumerMember) -> None:
        old = self.members.get(m.member_id)
        if old is not None:
            for key in pairs(old.assigned) | pairs(old.pending_revocation):
                if self.owners.get(key) == m.member_id:
                    del self.owners[key]
            if old.instance_id is not None and self.static_members.get(old.instance_id) == m.member_id:
                del self.static_members[old.instance_id]
        self.members[m.member_id] = m
        for key in pairs(m.assigned) | pairs(m.pending_revocation):
            self.owners[key] = m.member_id
        if m.instance_id is not None:
            self.static_members[m.instance_id] = m.member_id

    def drop_member(self, member_id: str) -> None:
        old = self.members.get(member_id)
        if old is None:
            return
        self.put_member(old.replace(assigned={}, pending_revocation={}, instance_id=None))
        del self.members[member_id]
