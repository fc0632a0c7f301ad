"""Group state values and the events that change them.

Every change to coordinator state is an event applied by `GroupCoordinator.replay`. Two kinds:
- records (`tenure.protocol.records`): Kafka's __consumer_offsets records, persisted and replayed on
  load; replaying them alone gives the state Kafka itself would load (a group with members is Stable);
- `GroupSnapshot`: the full in-memory value of one group after a handler's change (state, members with
  all their protocols, pending members...). It is a full-value upsert, never a delta, so replaying the
  whole event stream reproduces the live coordinator exactly. Snapshots are not persisted: what Kafka
  keeps only in memory (a PreparingRebalance group, its joined members) stays in memory here too.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .timers import TimerKey

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise AssertionError("member supports none of the candidate protocols")


@dataclass
class ClassicGroup:
    group_id: str
    state: str = EMPTY
    previous_state: str = EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    state_timestamp: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)   # group.instance.id -> member.id
    pending_members: set[str] = field(default_factory=set)          # KIP-394 ids handed out, not joined
    pending_sync: set[str] = field(default_factory=set)             # members yet to send SyncGroup
    offline_since: dict[str, int] = field(default_factory=dict)     # static members past their session -> last heard from

    kind = "classic"   # KIP-848 "consumer" groups are the second kind

    def copy(self) -> "ClassicGroup":
        return dataclasses.replace(
            self, members={k: dataclasses.replace(m) for k, m in self.members.items()},
            static_members=dict(self.static_members), pending_members=set(self.pending_members),
            pending_sync=set(self.pending_sync), offline_since=dict(self.offline_since))

    # ---- derived views
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_empty():
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            p = m.vote(candidates)
            votes[p] = votes.get(p, 0) + 1
        best = max(votes.values())
        # ties resolve by the first member's preference order, so the choice is deterministic
        first = next(iter(self.members.values()))
        for name in first.protocol_names():
            if votes.get(name) == best:
                return name
        raise AssertionError("no protocol selected")

    # ---- draft mutations (only ever on a copy that a GroupSnapshot will install)
    def transition(self, state: str, now_ms: int) -> None:
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = now_ms

    def add_member(self, m: Member) -> None:
        if not self.members:
            self.protocol_type = m.protocol_type
        self.members[m.member_id] = m
        if m.group_instance_id is not None:
            self.static_members[m.group_instance_id] = m.member_id
        if self.leader_id is None:
            self.leader_id = m.member_id

    def remove_member(self, member_id: str) -> Member:
        m = self.members.pop(member_id)
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        self.pending_sync.discard(member_id)
        self.offline_since.pop(member_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return m

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        old = self.members.pop(old_id)
        new = dataclasses.replace(old, member_id=new_id)
        # keep member order stable: the replacement takes the old member's place
        self.members[new_id] = new
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.offline_since.pop(old_id, None)       # back online under a new member id
        return new


@dataclass(frozen=True)
class GroupSnapshot:
    """Install `group` (a full value) as the state of `group_id`; None removes the group."""
    group_id: str
    group: ClassicGroup | None


@dataclass(frozen=True)
class TimerOp:
    key: TimerKey             # a typed key (coordinator.timers)
    deadline_ms: int | None   # None cancels


@dataclass
class Result:
    """What one input produced: responses (by request token, possibly for other parked requests),
    durable records to append before any response leaves, and timer changes."""
    responses: list[tuple[int, object]] = field(default_factory=list)
    records: list = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    # (group id, cause) of each rebalance this input started: for metrics and inspection, not state
    rebalances: list[tuple[str, str]] = field(default_factory=list)

    def respond(self, token: int, body: object) -> None:
        self.responses.append((token, body))

    def set_timer(self, key: TimerKey, deadline_ms: int) -> None:
        self.timers.append(TimerOp(key, deadline_ms))

    def cancel_timer(self, key: TimerKey) -> None:
        self.timers.append(TimerOp(key, None))

    def merge(self, other: "Result") -> None:
        self.responses += other.responses
        self.records += other.records
        self.timers += other.timers
        self.rebalances += other.rebalances
