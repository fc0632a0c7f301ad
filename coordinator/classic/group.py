"""A classic group's value: its state, members, instance map and soft state, and the one table of the
state transitions a classic group can make (Kafka's ClassicGroupState.validPreviousStates).

Handlers change only a copy (`ClassicGroup.copy`, a draft) that the shard installs by replaying a
`GroupSnapshot` once the handler has returned.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
ALL_STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)

# state -> the states a group may enter it from
VALID_PREVIOUS: dict[str, frozenset[str]] = {
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),   # a rebalance starts (J8-J12)
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),                  # every member joined (J14)
    STABLE: frozenset({COMPLETING_REBALANCE}),                               # the leader's assignment (S2)
    EMPTY: frozenset({PREPARING_REBALANCE}),                                 # nobody joined (J15)
    DEAD: frozenset(ALL_STATES),
}


class IllegalTransition(AssertionError):
    """A coordinator bug: a group asked to make a state change the table does not allow."""


@dataclass
class Member:
    """A member of a classic group, as its records hold it, with what the coordinator keeps of it meanwhile."""

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

    def copy(self) -> Member:
        """A shallow copy (every field is immutable: strings, numbers, bytes, a tuple of tuples), made without
        `dataclasses.replace`'s per-field work."""
        new = object.__new__(Member)
        new.__dict__.update(self.__dict__)
        return new

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


@dataclass(frozen=True)
class Parked:
    """A JoinGroup or SyncGroup request waiting for its answer (soft state: never in a record)."""
    token: int
    api_version: int
    client_id: str = ""
    client_host: str = ""


@dataclass
class ClassicGroup:
    """A classic group: its state (changed only along VALID_PREVIOUS), generation, protocol, members and the
    instance-id map of its static members."""

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
    # soft state, as Kafka keeps it in memory only (no record carries it; a loaded group has none):
    joins: dict[str, Parked] = field(default_factory=dict)          # member id -> its parked JoinGroup
    syncs: dict[str, Parked] = field(default_factory=dict)          # member id -> its parked SyncGroup
    initial_remaining: int | None = None    # J12: the initial delay's time left to extend by, while it runs
    new_member_added: bool = False          # J12: a member joined since the delay was last (re)armed
    sync_generation: int | None = None      # J16: the generation the sync timer was armed for
    expansion_deadline: int | None = None   # the KIP-345 draft's expansion window, while open

    kind = "classic"   # KIP-848 "consumer" groups are the second kind

    def copy(self) -> ClassicGroup:
        """A draft: its own members and containers, the rest shared (strings, numbers, tuples, frozen values).
        Made without the per-field work of `dataclasses.replace`: every JoinGroup and SyncGroup copies its group
        and each of its members."""
        new = object.__new__(ClassicGroup)
        d = new.__dict__
        d.update(self.__dict__)
        d["members"] = {k: m.copy() for k, m in self.members.items()}
        d["static_members"] = dict(self.static_members)
        d["pending_members"] = set(self.pending_members)
        d["pending_sync"] = set(self.pending_sync)
        d["offline_since"] = dict(self.offline_since)
        d["joins"] = dict(self.joins)
        d["syncs"] = dict(self.syncs)
        return new

    # ---- derived views
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def in_session(self, member_id: str) -> bool:
        """A member whose session has not expired: one of the group and not kept offline (registration
        timeout)."""
        return member_id in self.members and member_id not in self.offline_since

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
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"group {self.group_id!r}: {self.state} -> {state} is not a transition")
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


def request_ids(ctx, req, instance_since: int) -> tuple[int, str, str, str | None]:
    """(version, group id, member id, group.instance.id) of a classic group request; the instance id only from
    the version that carries it (JoinGroup v5, SyncGroup and Heartbeat v3: KIP-345)."""
    v = ctx.api_version
    return v, req.group_id, req.member_id, (req.group_instance_id if v >= instance_since else None)
