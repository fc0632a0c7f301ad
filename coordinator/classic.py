"""The classic group coordinator with static membership (KIP-345), as a pure state machine.

Inputs: a decoded request with a `RequestContext` (token, api version, client id/host, now_ms), or a
timer expiry with now_ms. Output: a `Result` (responses by token - possibly to other, parked requests -
durable records, timer changes). No sockets, no asyncio, no wall clock.

Handlers never mutate live state: they copy a group into a draft, change the draft, and commit it
with a `GroupSnapshot` event through `replay`, the only mutator. Kafka's own records (GroupMetadata,
OffsetCommit) go through `replay` too, and are what the runtime persists. Parked JoinGroup/SyncGroup
requests, and the bookkeeping of the initial-rebalance delay, are soft state, as in Kafka.

Static-member events (`StaticMemberEventRecord`, this project's own record type, key version 345) log
the history of each group's `group.instance.id -> member.id` map with its causes; the rule for each
cause is in `tenure.protocol.records`. They go through `_emit` like every record, so they are in
Result.records and replayed, but replaying one never changes a group: it only records which instance
ids of a group have an event key in the log (`static_event_keys`), so that deleting the group can
tombstone every one of them.

Labels in comments (J23, S2, ...) refer to items of docs/behaviour.md.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

from kafka.protocol.admin.groups import (
    DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, OffsetCommitResponse,
    OffsetDeleteResponse, OffsetFetchResponse, SyncGroupResponse,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.protocol.producer import TxnOffsetCommitResponse

from tenure.protocol.acl import authorized_operations
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol import records as rec
from tenure.protocol.records import (
    GroupMetadataRecord, MemberRecord, OffsetCommitRecord, StaticMemberEventRecord, TransactionalOffsetCommit,
    TransactionEnd,
)

from .timers import (
    ExpansionKey, HeartbeatKey, JoinKey, PendingKey, RegistrationKey, SyncKey, TimerKey,
)
from .state import (
    COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup, GroupSnapshot,
    Member, Result,
)

ALL_STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)


@dataclass(frozen=True)
class CoordinatorConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 0          # the server's default is ServerConfig's (1000, Kafka 3000); the
                                                 # state machine's stays 0: scenario tests drive the clock
    max_group_size: int | None = None
    new_member_join_timeout_ms: int = 300000
    offset_metadata_max_bytes: int = 4096
    # KIP-345 draft ideas with no shipped wire equivalent, opt-in (None = Kafka's shipped behaviour):
    # new static members joining a Stable group within this window share ONE rebalance, counted from
    # the first new join;
    static_expansion_timeout_ms: int | None = None
    # static members whose session expired are kept (offline) until the earliest of them has been gone
    # this long; then one rebalance removes every member offline at that moment.
    static_registration_timeout_ms: int | None = None


@dataclass(frozen=True)
class RequestContext:
    token: int
    api_version: int
    client_id: str
    client_host: str
    now_ms: int


@dataclass(frozen=True)
class Parked:
    token: int
    api_version: int
    client_id: str = ""
    client_host: str = ""


def default_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class AdminError(Exception):
    """An admin operation refused, with the Kafka error code that best names why."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig = CoordinatorConfig(),
                 member_id_generator: Callable[[str], str] = default_member_id, *, partition: int = 0) -> None:
        self.config = config
        self.partition = partition            # the __consumer_offsets partition whose groups this shard owns
        self._new_id = member_id_generator
        # replayed state
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitRecord]] = {}
        self.static_event_keys: dict[str, set[str]] = {}   # group -> instance ids with an event key in the log
        # offsets committed in open transactions: producer id -> group -> (topic, partition) -> record
        self.pending_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetCommitRecord]]] = {}
        # soft state
        self._joins: dict[str, dict[str, Parked]] = {}
        self._syncs: dict[str, dict[str, Parked]] = {}
        self._initial_remaining: dict[str, int] = {}
        self._new_member_added: dict[str, bool] = {}
        self._sync_generation: dict[str, int] = {}
        self._expansion_deadline: dict[str, int] = {}
        self._armed: set[TimerKey] = set()    # timers this shard asked for and that have not fired or been cancelled
        self.journal: list | None = None      # set to [] to record every replayed event (tests, audit)

    # ================================================================== the one mutator
    def replay(self, event) -> None:
        if self.journal is not None:
            self.journal.append(event)
        if isinstance(event, GroupSnapshot):
            if event.group is None:
                self.groups.pop(event.group_id, None)
            else:
                self.groups[event.group_id] = event.group
        elif isinstance(event, GroupMetadataRecord):
            if event.tombstone:
                # a group exists through its metadata or through its offsets (as Kafka's loader sees it)
                if event.group_id in self.offsets:
                    self.groups[event.group_id] = ClassicGroup(event.group_id)
                else:
                    self.groups.pop(event.group_id, None)
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
            self.groups[event.group_id] = g
        elif isinstance(event, OffsetCommitRecord):
            offsets = self.offsets.setdefault(event.group_id, {})
            if event.tombstone:
                offsets.pop((event.topic, event.partition), None)
                if not offsets:
                    del self.offsets[event.group_id]
                    # an offsets-only ("simple") group exists through its offsets alone: with the last one
                    # gone it is gone, as Kafka's loader would not create it - so replay's result does not
                    # depend on commits that compaction removes (fold(compact(log)) == fold(log))
                    if self.groups.get(event.group_id) == ClassicGroup(event.group_id):
                        del self.groups[event.group_id]
            else:
                offsets[(event.topic, event.partition)] = event
                if event.group_id not in self.groups:      # offsets-only ("simple") group
                    self.groups[event.group_id] = ClassicGroup(event.group_id)
        elif isinstance(event, TransactionalOffsetCommit):
            r = event.record
            self.pending_offsets.setdefault(event.producer_id, {}).setdefault(r.group_id, {})[
                (r.topic, r.partition)] = r
        elif isinstance(event, TransactionEnd):
            for gid, held in self.pending_offsets.pop(event.producer_id, {}).items():
                if event.commit:
                    for r in held.values():
                        self.replay(r)
        elif isinstance(event, StaticMemberEventRecord):
            # history only: group state comes from GroupMetadata records; remember the key for deletion
            if event.tombstone:
                keys = self.static_event_keys.get(event.group_id)
                if keys is not None:
                    keys.discard(event.group_instance_id)
                    if not keys:
                        del self.static_event_keys[event.group_id]
            else:
                self.static_event_keys.setdefault(event.group_id, set()).add(event.group_instance_id)
        else:
            raise TypeError(f"not a coordinator event: {event!r}")

    def _emit(self, res: Result, record) -> None:
        self.replay(record)
        res.records.append(record)

    def _static_event(self, res: Result, g: ClassicGroup, cause: str, instance_id: str, old: str | None,
                      new: str | None, now_ms: int, client_id: str, client_host: str) -> None:
        """Log one change (or challenge) of the instance map; `g.generation` is the generation now."""
        self._emit(res, StaticMemberEventRecord(g.group_id, instance_id, cause, old, new, g.generation, now_ms,
                                                client_id or "", client_host or ""))

    def _fenced(self, res: Result, g: ClassicGroup, instance_id: str, presented: str,
                ctx: RequestContext) -> None:
        """A request naming a mapped instance id with another member id is answered 82: log it."""
        self._static_event(res, g, rec.FENCED, instance_id, presented, g.static_members[instance_id],
                           ctx.now_ms, ctx.client_id, ctx.client_host)

    def _commit(self, g: ClassicGroup | None, group_id: str | None = None) -> None:
        self.replay(GroupSnapshot(group_id if g is None else g.group_id, g))

    def loaded(self, now_ms: int) -> Result:
        """After replaying a log at start-up: every member's heartbeat timer restarts."""
        res = Result()
        for g in self.groups.values():
            for m in g.members.values():
                res.set_timer(HeartbeatKey(g.group_id, m.member_id), now_ms + m.session_timeout_ms)
        return self._track(res)

    def unload(self, now_ms: int) -> Result:
        """Give up this partition's groups (another coordinator takes them over): every parked JoinGroup
        and SyncGroup is answered NOT_COORDINATOR (16) in its version's error shape, so its client looks
        up the coordinator again; every timer this shard armed is cancelled; all state, replayed and soft,
        is dropped (the records stay in the log for the next owner to load). Kafka's onUnloaded does the
        same for classic groups."""
        res = Result()
        for gid in sorted(self._joins):
            for mid, p in self._joins[gid].items():
                res.respond(p.token, self._join_error(p.api_version, E.NOT_COORDINATOR, mid))
        for gid in sorted(self._syncs):
            for p in self._syncs[gid].values():
                res.respond(p.token, self._sync_resp(None, E.NOT_COORDINATOR))
        for key in sorted(self._armed):
            res.cancel_timer(key)
        self._armed.clear()
        self.groups.clear()
        self.offsets.clear()
        self.static_event_keys.clear()
        self.pending_offsets.clear()
        for soft in (self._joins, self._syncs, self._initial_remaining, self._new_member_added,
                     self._sync_generation, self._expansion_deadline):
            soft.clear()
        return res

    def _track(self, res: Result) -> Result:
        """Keep the set of armed timers in step with the timer changes a Result asks for."""
        for op in res.timers:
            if op.deadline_ms is None:
                self._armed.discard(op.key)
            else:
                self._armed.add(op.key)
        return res

    # ================================================================== queries (read-only, copies)
    def group_ids(self) -> list[str]:
        """The ids of the groups this shard holds, sorted."""
        return sorted(self.groups)

    def group(self, group_id: str) -> ClassicGroup | None:
        """A copy of one group's state (changing it changes nothing here); None if unknown."""
        g = self.groups.get(group_id)
        return None if g is None else g.copy()

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetCommitRecord]:
        """A copy of one group's committed offsets: (topic, partition) -> the (frozen) commit record."""
        return dict(self.offsets.get(group_id, {}))

    # ================================================================== dispatch
    def handle(self, api_key: int, ctx: RequestContext, body) -> Result:
        return self._track(self._handlers[api_key](self, ctx, body))

    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        self._armed.discard(key)
        return self._track(self._on_timer(key, now_ms))

    def _on_timer(self, key: TimerKey, now_ms: int) -> Result:
        gid = key.group_id
        if isinstance(key, HeartbeatKey):
            return self._session_expired(gid, key.member_id, now_ms)
        if isinstance(key, PendingKey):
            return self._pending_expired(gid, key.member_id, now_ms)
        if isinstance(key, JoinKey):
            return self._join_timer(gid, now_ms)
        if isinstance(key, SyncKey):
            return self._sync_expired(gid, now_ms)
        if isinstance(key, ExpansionKey):
            return self._expansion_expired(gid, now_ms)
        if isinstance(key, RegistrationKey):
            return self._registration_expired(gid, now_ms)
        raise ValueError(f"unknown timer {key!r}")

    # ================================================================== helpers
    def _parked_joins(self, gid: str) -> dict[str, Parked]:
        return self._joins.setdefault(gid, {})

    def _parked_syncs(self, gid: str) -> dict[str, Parked]:
        return self._syncs.setdefault(gid, {})

    def _all_joined(self, g: ClassicGroup) -> bool:
        joined = self._joins.get(g.group_id, {})
        return all(mid in joined for mid in g.members) and not g.pending_members

    @staticmethod
    def _validate_member(g: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        """Identity check shared by Join/Sync/Heartbeat/Leave/OffsetCommit (J17, J31)."""
        if instance_id is not None:
            mapped = g.static_members.get(instance_id)
            if mapped is None:
                return E.UNKNOWN_MEMBER_ID
            if mapped != member_id:
                return E.FENCED_INSTANCE_ID
            return E.NONE
        return E.NONE if member_id in g.members else E.UNKNOWN_MEMBER_ID

    def _reset_heartbeat(self, res: Result, g: ClassicGroup, m: Member, now_ms: int) -> None:
        timeout = self.config.new_member_join_timeout_ms if m.is_new else m.session_timeout_ms
        res.set_timer(HeartbeatKey(g.group_id, m.member_id), now_ms + timeout)

    def _group_record(self, g: ClassicGroup, now_ms: int) -> GroupMetadataRecord:
        return GroupMetadataRecord(
            group_id=g.group_id, protocol_type=g.protocol_type or "", generation=g.generation,
            protocol=g.protocol_name, leader=g.leader_id, current_state_timestamp=g.state_timestamp,
            members=tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                       m.rebalance_timeout_ms, m.session_timeout_ms,
                                       m.metadata(g.protocol_name), m.assignment)
                          for m in g.members.values()))

    # ---- JoinGroup responses (J4, J14, J25, J26)
    @staticmethod
    def _join_error(version: int, code: int, member_id: str) -> JoinGroupResponse:
        return JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1,
                                 protocol_type=None, protocol_name=None if version >= 7 else "",
                                 leader="", skip_assignment=False, member_id=member_id, members=[])

    @staticmethod
    def _join_members(g: ClassicGroup) -> list:
        M = JoinGroupResponse.JoinGroupResponseMember
        return [M(member_id=m.member_id, group_instance_id=m.group_instance_id,
                  metadata=m.metadata(g.protocol_name)) for m in g.members.values()]

    def _join_ok(self, g: ClassicGroup, member_id: str, version: int, *, leader: str | None = None,
                 with_members: bool | None = None, skip_assignment: bool = False) -> JoinGroupResponse:
        leader = g.leader_id if leader is None else leader
        if with_members is None:
            with_members = member_id == g.leader_id
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=0, generation_id=g.generation, protocol_type=g.protocol_type,
            protocol_name=g.protocol_name if (g.protocol_name is not None or version >= 7) else "",
            leader=leader or "", skip_assignment=skip_assignment, member_id=member_id,
            members=self._join_members(g) if with_members else [])

    @staticmethod
    def _sync_resp(g: ClassicGroup | None, code: int, assignment: bytes = b"") -> SyncGroupResponse:
        return SyncGroupResponse(throttle_time_ms=0, error_code=code,
                                 protocol_type=g.protocol_type if (g and code == 0) else None,
                                 protocol_name=g.protocol_name if (g and code == 0) else None,
                                 assignment=assignment)

    # ================================================================== rebalance machinery
    def _prepare_rebalance(self, res: Result, g: ClassicGroup, now_ms: int, cause: str) -> None:
        gid = g.group_id
        res.rebalances.append((gid, cause))
        if g.state == COMPLETING_REBALANCE:                  # J10: parked syncs get 27, assignments reset
            for mid, p in self._syncs.pop(gid, {}).items():
                res.respond(p.token, self._sync_resp(None, E.REBALANCE_IN_PROGRESS))
            for m in g.members.values():
                m.assignment = b""
        g.pending_sync.clear()
        res.cancel_timer(SyncKey(gid))
        if self._expansion_deadline.pop(gid, None) is not None:   # this rebalance takes in the new members
            res.cancel_timer(ExpansionKey(gid))
        initial = g.state == EMPTY
        g.transition(PREPARING_REBALANCE, now_ms)
        if initial:                                          # J12: the initial delay
            delay = self.config.initial_rebalance_delay_ms
            self._initial_remaining[gid] = max(g.rebalance_timeout_ms() - delay, 0)
            self._new_member_added[gid] = False
            res.set_timer(JoinKey(gid), now_ms + delay)
        else:
            self._initial_remaining.pop(gid, None)
            if self._all_joined(g):                          # J9: completes early
                self._complete_join(res, g, now_ms)
            else:
                res.set_timer(JoinKey(gid), now_ms + g.rebalance_timeout_ms())

    def _maybe_complete_join(self, res: Result, g: ClassicGroup, now_ms: int) -> None:
        if (g.state == PREPARING_REBALANCE and g.group_id not in self._initial_remaining
                and self._all_joined(g)):
            self._complete_join(res, g, now_ms)

    def _rebalance_or_complete(self, res: Result, g: ClassicGroup, now_ms: int, cause: str) -> None:
        if g.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self._prepare_rebalance(res, g, now_ms, cause)
        elif g.state == PREPARING_REBALANCE:
            self._maybe_complete_join(res, g, now_ms)

    def _complete_join(self, res: Result, g: ClassicGroup, now_ms: int) -> None:
        gid = g.group_id
        joined = self._joins.get(gid, {})
        for mid, m in list(g.members.items()):               # J13: dynamic laggards go, static stay
            if mid not in joined and not m.is_static:
                g.remove_member(mid)
                res.cancel_timer(HeartbeatKey(gid, mid))
        if g.members and g.leader_id not in joined:
            new_leader = next((mid for mid in g.members if mid in joined), None)
            if new_leader is None:                           # J13: nobody rejoined: wait again
                res.set_timer(JoinKey(gid), now_ms + g.rebalance_timeout_ms())
                return
            g.leader_id = new_leader
        res.cancel_timer(JoinKey(gid))
        self._initial_remaining.pop(gid, None)
        g.generation += 1
        if not g.members:                                    # J15
            g.protocol_name = None
            g.leader_id = None
            g.transition(EMPTY, now_ms)
            self._emit(res, self._group_record(g, now_ms))
            return
        g.protocol_name = g.select_protocol()                # J14
        g.transition(COMPLETING_REBALANCE, now_ms)
        for mid, p in self._joins.pop(gid, {}).items():
            res.respond(p.token, self._join_ok(g, mid, p.api_version))
        for m in g.members.values():
            m.is_new = False
            self._reset_heartbeat(res, g, m, now_ms)
        g.pending_sync = set(g.members)
        self._sync_generation[gid] = g.generation
        res.set_timer(SyncKey(gid), now_ms + g.rebalance_timeout_ms())

    def _remove_member(self, res: Result, g: ClassicGroup, member_id: str, join_error: int, cause: str,
                       now_ms: int, ctx: RequestContext | None = None) -> Member:
        """Remove a member; a static one's instance id leaves the map with a `cause` event (client: the
        request's, or with no request the member's own)."""
        m = g.members[member_id]
        iid = m.group_instance_id
        if iid is not None and g.static_members.get(iid) == member_id:
            self._static_event(res, g, cause, iid, member_id, None, now_ms,
                               ctx.client_id if ctx else m.client_id, ctx.client_host if ctx else m.client_host)
        m = g.remove_member(member_id)
        res.cancel_timer(HeartbeatKey(g.group_id, member_id))
        p = self._joins.get(g.group_id, {}).pop(member_id, None)
        if p is not None:                                   # a removed member is unknown: memberId ""
            res.respond(p.token, self._join_error(p.api_version, join_error, ""))
        p = self._syncs.get(g.group_id, {}).pop(member_id, None)
        if p is not None:
            res.respond(p.token, self._sync_resp(None, join_error))
        return m

    def _park_join(self, res: Result, g: ClassicGroup, member_id: str, ctx: RequestContext) -> None:
        joins = self._parked_joins(g.group_id)
        old = joins.get(member_id)
        if old is not None and old.token != ctx.token:       # a duplicate JoinGroup supersedes the first
            res.respond(old.token, self._join_error(old.api_version, E.REBALANCE_IN_PROGRESS, member_id))
        joins[member_id] = Parked(ctx.token, ctx.api_version, ctx.client_id or "", ctx.client_host)

    # ================================================================== JoinGroup (J1-J31)
    def join_group(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid, mid = ctx.api_version, req.group_id, req.member_id
        iid = req.group_instance_id if v >= 5 else None
        rebalance_timeout = req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms

        def error(code: int, member_id: str = mid) -> Result:
            res.respond(ctx.token, self._join_error(v, code, member_id))
            return res

        if not gid:
            return error(E.INVALID_GROUP_ID)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return error(E.INVALID_SESSION_TIMEOUT)                       # J1
        live = self.groups.get(gid)
        if live is None:
            if mid:
                return error(E.UNKNOWN_MEMBER_ID)                          # J2
            g = ClassicGroup(gid)
        elif live.state == DEAD:
            return error(E.COORDINATOR_NOT_AVAILABLE)
        else:
            g = live.copy()
        if not self._accept_joining(g, mid):                               # J5 (Kafka checks size first)
            if mid in g.members:
                self._remove_member(res, g, mid, E.GROUP_MAX_SIZE_REACHED, rec.GROUP_FULL, ctx.now_ms, ctx)
                self._commit(g)
            return error(E.GROUP_MAX_SIZE_REACHED, "")
        protocols = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
        if not g.supports_protocols(req.protocol_type, [n for n, _ in protocols]):
            return error(E.INCONSISTENT_GROUP_PROTOCOL)                    # J3
        member = Member(mid, iid, ctx.client_id or "", ctx.client_host, rebalance_timeout,
                        req.session_timeout_ms, req.protocol_type, protocols)
        if not mid:
            if iid is None:
                self._join_new_dynamic(res, g, member, ctx)                # J6
            elif iid in g.static_members:
                self._replace_static(res, g, member, ctx)                  # J23-J30
            else:
                member.member_id = self._new_id(iid)                       # J7
                member.is_new = True
                self._add_and_rebalance(res, g, member, ctx)
        elif mid in g.pending_members:                                     # J6: second join of KIP-394
            g.pending_members.discard(mid)
            res.cancel_timer(PendingKey(gid, mid))
            member.is_new = True
            self._add_and_rebalance(res, g, member, ctx)
        else:
            self._join_known(res, g, member, ctx)                          # J17-J22
        self._commit(g)
        return res

    def _accept_joining(self, g: ClassicGroup, member_id: str) -> bool:
        limit = self.config.max_group_size
        if limit is None or g.state in (EMPTY, DEAD):
            return True
        if g.state == PREPARING_REBALANCE:
            joined = self._joins.get(g.group_id, {})
            return (bool(member_id) and member_id in joined) or len(joined) < limit
        return (bool(member_id) and member_id in g.members) or len(g.members) < limit

    def _join_new_dynamic(self, res: Result, g: ClassicGroup, member: Member, ctx: RequestContext) -> None:
        new_id = self._new_id(ctx.client_id or "")
        if ctx.api_version >= 4:                                           # KIP-394 handshake
            g.pending_members.add(new_id)
            res.set_timer(PendingKey(g.group_id, new_id), ctx.now_ms + member.session_timeout_ms)
            res.respond(ctx.token, self._join_error(ctx.api_version, E.MEMBER_ID_REQUIRED, new_id))
            return
        member.member_id = new_id
        member.is_new = True
        self._add_and_rebalance(res, g, member, ctx)

    def _add_and_rebalance(self, res: Result, g: ClassicGroup, member: Member, ctx: RequestContext) -> None:
        if g.state == PREPARING_REBALANCE and g.group_id in self._initial_remaining:
            self._new_member_added[g.group_id] = True
        iid = member.group_instance_id
        if iid is not None:
            old = g.static_members.get(iid)
            self._static_event(res, g, rec.JOINED if old is None else rec.REPLACED, iid, old, member.member_id,
                               ctx.now_ms, ctx.client_id, ctx.client_host)
        g.add_member(member)
        self._park_join(res, g, member.member_id, ctx)
        self._reset_heartbeat(res, g, member, ctx.now_ms)
        window = self.config.static_expansion_timeout_ms
        if window is not None and member.is_static and g.state == STABLE:
            # expansion timeout: batch new static members into one rebalance, counted from the first
            deadline = self._expansion_deadline.get(g.group_id)
            if deadline is None:
                deadline = self._expansion_deadline[g.group_id] = ctx.now_ms + window
                res.set_timer(ExpansionKey(g.group_id), deadline)
            # a member parked for the window must outlive it
            res.set_timer(HeartbeatKey(g.group_id, member.member_id),
                          deadline + self.config.new_member_join_timeout_ms)
            return
        self._rebalance_or_complete(res, g, ctx.now_ms, "member_joined")

    def _join_known(self, res: Result, g: ClassicGroup, req_member: Member, ctx: RequestContext) -> None:
        mid, v = req_member.member_id, ctx.api_version
        code = self._validate_member(g, mid, req_member.group_instance_id)
        if code == E.FENCED_INSTANCE_ID:
            self._fenced(res, g, req_member.group_instance_id, mid, ctx)
        if code == E.NONE and g.state == EMPTY:
            code = E.UNKNOWN_MEMBER_ID                                     # J22
        if code:
            res.respond(ctx.token, self._join_error(v, code, mid))
            return
        m = g.members[mid]
        same = m.protocols == req_member.protocols

        def update_and_park():
            m.protocols = req_member.protocols
            m.rebalance_timeout_ms = req_member.rebalance_timeout_ms
            m.session_timeout_ms = req_member.session_timeout_ms
            self._park_join(res, g, mid, ctx)

        if g.state == PREPARING_REBALANCE:                                 # J18
            update_and_park()
            self._maybe_complete_join(res, g, ctx.now_ms)
        elif g.state == COMPLETING_REBALANCE:                              # J19
            if same:
                res.respond(ctx.token, self._join_ok(g, mid, v))
            else:
                update_and_park()
                self._prepare_rebalance(res, g, ctx.now_ms, "member_metadata_changed")
        elif g.state == STABLE:                                            # J20, J21
            if mid == g.leader_id or not same:
                update_and_park()
                self._prepare_rebalance(res, g, ctx.now_ms,
                                        "member_metadata_changed" if not same else "leader_rejoined")
            else:
                res.respond(ctx.token, self._join_ok(g, mid, v, with_members=False))

    def _replace_static(self, res: Result, g: ClassicGroup, req_member: Member, ctx: RequestContext) -> None:
        gid, iid, v = g.group_id, req_member.group_instance_id, ctx.api_version
        old_id = g.static_members[iid]
        new_id = self._new_id(iid)
        old_leader = g.leader_id
        self._static_event(res, g, rec.REPLACED, iid, old_id, new_id, ctx.now_ms, ctx.client_id, ctx.client_host)
        # J23: fence the old member; each parked request answered 82 is a fenced event too (a live holder
        # of the old id was told so), after the replacement that fenced it
        p = self._joins.get(gid, {}).pop(old_id, None)
        if p is not None:
            res.respond(p.token, self._join_error(p.api_version, E.FENCED_INSTANCE_ID, old_id))
            self._static_event(res, g, rec.FENCED, iid, old_id, new_id, ctx.now_ms, p.client_id, p.client_host)
        p = self._syncs.get(gid, {}).pop(old_id, None)
        if p is not None:
            res.respond(p.token, self._sync_resp(None, E.FENCED_INSTANCE_ID))
            self._static_event(res, g, rec.FENCED, iid, old_id, new_id, ctx.now_ms, p.client_id, p.client_host)
        res.cancel_timer(HeartbeatKey(gid, old_id))
        m = g.replace_static_member(iid, old_id, new_id)
        m.protocols = req_member.protocols
        m.protocol_type = req_member.protocol_type
        m.rebalance_timeout_ms = req_member.rebalance_timeout_ms
        m.session_timeout_ms = req_member.session_timeout_ms
        m.is_new = False
        self._reset_heartbeat(res, g, m, ctx.now_ms)
        if self.config.static_registration_timeout_ms is not None:
            self._arm_registration(res, g)                                 # it may have been offline
        if g.state == STABLE:
            if g.select_protocol() == g.protocol_name:                     # J24: no rebalance
                self._emit(res, self._group_record(g, ctx.now_ms))
                if v >= 9:                                                 # J25: KIP-814
                    leads = g.leader_id == new_id
                    res.respond(ctx.token, self._join_ok(g, new_id, v, with_members=leads,
                                                         skip_assignment=leads))
                else:                                                      # J26
                    res.respond(ctx.token, self._join_ok(g, new_id, v, leader=old_leader,
                                                         with_members=False))
            else:                                                          # J28
                self._park_join(res, g, new_id, ctx)
                self._prepare_rebalance(res, g, ctx.now_ms, "static_member_protocol_changed")
        elif g.state == COMPLETING_REBALANCE:                              # J29
            self._park_join(res, g, new_id, ctx)
            self._prepare_rebalance(res, g, ctx.now_ms, "static_member_replaced_during_rebalance")
        else:                                                              # J30
            self._park_join(res, g, new_id, ctx)
            self._maybe_complete_join(res, g, ctx.now_ms)

    # ================================================================== timers
    def _join_timer(self, gid: str, now_ms: int) -> Result:
        res = Result()
        live = self.groups.get(gid)
        if live is None or live.state != PREPARING_REBALANCE:
            return res
        g = live.copy()
        remaining = self._initial_remaining.get(gid)
        if remaining is not None:                                          # J12
            if self._new_member_added.get(gid) and remaining > 0:
                delay = min(self.config.initial_rebalance_delay_ms, remaining)
                self._initial_remaining[gid] = max(remaining - delay, 0)
                self._new_member_added[gid] = False
                res.set_timer(JoinKey(gid), now_ms + delay)
                return res
            del self._initial_remaining[gid]
        self._complete_join(res, g, now_ms)
        self._commit(g)
        return res

    def _session_expired(self, gid: str, mid: str, now_ms: int) -> Result:   # T2
        res = Result()
        live = self.groups.get(gid)
        if live is None or mid not in live.members:
            return res
        m = live.members[mid]
        parked = mid in self._joins.get(gid, {}) or mid in self._syncs.get(gid, {})
        if parked and not m.is_new:
            return res
        g = live.copy()
        if m.is_static and self.config.static_registration_timeout_ms is not None and not m.is_new:
            # registration timeout: tolerate the static member offline; it replaces the session timeout,
            # so it counts from the member's last sign of life (the session timer was armed then, one
            # session timeout ago), not from now; track the earliest offline member
            g.offline_since.setdefault(mid, now_ms - m.session_timeout_ms)
            self._arm_registration(res, g)
            self._commit(g)
            return res
        self._remove_member(res, g, mid, E.UNKNOWN_MEMBER_ID, rec.EXPIRED, now_ms)
        self._rebalance_or_complete(res, g, now_ms, "session_expired")
        self._commit(g)
        return res

    def _arm_registration(self, res: Result, g: ClassicGroup) -> None:
        if g.offline_since:
            earliest = min(g.offline_since.values())
            res.set_timer(RegistrationKey(g.group_id), earliest + self.config.static_registration_timeout_ms)
        else:
            res.cancel_timer(RegistrationKey(g.group_id))

    def _registration_expired(self, gid: str, now_ms: int) -> Result:
        res = Result()
        live = self.groups.get(gid)
        if live is None or not live.offline_since:
            return res
        g = live.copy()
        if min(g.offline_since.values()) + self.config.static_registration_timeout_ms > now_ms:
            self._arm_registration(res, g)
            return res
        for mid in sorted(g.offline_since):              # ONE rebalance removes all offline now
            self._remove_member(res, g, mid, E.UNKNOWN_MEMBER_ID, rec.REGISTRATION_EXPIRED, now_ms)
        self._rebalance_or_complete(res, g, now_ms, "registration_expired")
        self._commit(g)
        return res

    def _expansion_expired(self, gid: str, now_ms: int) -> Result:
        res = Result()
        self._expansion_deadline.pop(gid, None)
        live = self.groups.get(gid)
        if live is None or live.state != STABLE:
            return res
        g = live.copy()
        self._prepare_rebalance(res, g, now_ms, "expansion_timeout")
        self._commit(g)
        return res

    # ================================================================== admin operations (Python API)
    def force_rebalance(self, group_id: str, now_ms: int) -> Result:
        """The KIP-345 draft's forceStaticRebalance: one rebalance of a static group, now."""
        live = self.groups.get(group_id)
        if live is None or live.state == DEAD:
            raise AdminError(E.GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist")
        if live.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE):
            raise AdminError(E.REBALANCE_IN_PROGRESS, f"group {group_id!r} is already rebalancing ({live.state})")
        if live.state == EMPTY:
            raise AdminError(E.INVALID_REQUEST, f"group {group_id!r} has no members")
        dynamic = [m.member_id for m in live.members.values() if not m.is_static]
        if dynamic:
            raise AdminError(E.INVALID_REQUEST,
                             f"group {group_id!r} has dynamic members ({len(dynamic)}); only static groups can be forced")
        res = Result()
        g = live.copy()
        for m in g.members.values():                     # one event per (static) member, map unchanged
            self._static_event(res, g, rec.FORCED_REBALANCE, m.group_instance_id, m.member_id, m.member_id,
                               now_ms, m.client_id, m.client_host)
        self._prepare_rebalance(res, g, now_ms, "forced")
        self._commit(g)
        return self._track(res)

    def _pending_expired(self, gid: str, mid: str, now_ms: int) -> Result:
        res = Result()
        live = self.groups.get(gid)
        if live is None or mid not in live.pending_members:
            return res
        g = live.copy()
        g.pending_members.discard(mid)
        self._maybe_complete_join(res, g, now_ms)
        self._commit(g)
        return res

    def _sync_expired(self, gid: str, now_ms: int) -> Result:                # J16
        res = Result()
        live = self.groups.get(gid)
        if (live is None or live.state not in (COMPLETING_REBALANCE, STABLE)
                or self._sync_generation.get(gid) != live.generation or not live.pending_sync):
            return res
        g = live.copy()
        for mid in sorted(g.pending_sync):
            self._remove_member(res, g, mid, E.UNKNOWN_MEMBER_ID, rec.SYNC_EXPIRED, now_ms)
        self._prepare_rebalance(res, g, now_ms, "sync_timeout")
        self._commit(g)
        return res

    # ================================================================== SyncGroup (S1-S3)
    def sync_group(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid, mid = ctx.api_version, req.group_id, req.member_id
        iid = req.group_instance_id if v >= 3 else None

        def error(code: int) -> Result:
            res.respond(ctx.token, self._sync_resp(None, code))
            return res

        if not gid:
            return error(E.INVALID_GROUP_ID)
        live = self.groups.get(gid)
        if live is None:
            return error(E.UNKNOWN_MEMBER_ID)
        if live.state == DEAD:
            return error(E.COORDINATOR_NOT_AVAILABLE)
        code = self._validate_member(live, mid, iid)
        if code == E.FENCED_INSTANCE_ID:
            self._fenced(res, live, iid, mid, ctx)
        if code:
            return error(code)
        if req.generation_id != live.generation:
            return error(E.ILLEGAL_GENERATION)
        if v >= 5 and (req.protocol_type != live.protocol_type or req.protocol_name != live.protocol_name):
            return error(E.INCONSISTENT_GROUP_PROTOCOL)
        if live.state == PREPARING_REBALANCE:
            return error(E.REBALANCE_IN_PROGRESS)
        g = live.copy()
        g.pending_sync.discard(mid)
        if g.state == STABLE:                                              # S3
            res.respond(ctx.token, self._sync_resp(g, 0, g.members[mid].assignment))
            self._reset_heartbeat(res, g, g.members[mid], ctx.now_ms)
        else:                                                              # S2: CompletingRebalance
            self._parked_syncs(gid)[mid] = Parked(ctx.token, v, ctx.client_id or "", ctx.client_host)
            if mid == g.leader_id:
                given = {a.member_id: bytes(a.assignment) for a in req.assignments}
                for m in g.members.values():
                    m.assignment = given.get(m.member_id, b"")
                self._emit(res, self._group_record(g, ctx.now_ms))
                g.transition(STABLE, ctx.now_ms)
                for pmid, p in self._syncs.pop(gid, {}).items():
                    m = g.members[pmid]
                    res.respond(p.token, self._sync_resp(g, 0, m.assignment))
                    self._reset_heartbeat(res, g, m, ctx.now_ms)
        if not g.pending_sync:
            res.cancel_timer(SyncKey(gid))
        self._commit(g)
        return res

    # ================================================================== Heartbeat (H1)
    def heartbeat(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid, mid = ctx.api_version, req.group_id, req.member_id
        iid = req.group_instance_id if v >= 3 else None
        g = self.groups.get(gid)
        if not gid:
            code = E.INVALID_GROUP_ID
        elif g is None:
            code = E.UNKNOWN_MEMBER_ID
        elif g.state == DEAD:
            code = E.COORDINATOR_NOT_AVAILABLE
        else:
            code = self._validate_member(g, mid, iid)
            if code == E.FENCED_INSTANCE_ID:
                self._fenced(res, g, iid, mid, ctx)
            if not code and req.generation_id != g.generation:
                code = E.ILLEGAL_GENERATION
            if not code and g.state == EMPTY:
                code = E.UNKNOWN_MEMBER_ID
            if not code:
                self._reset_heartbeat(res, g, g.members[mid], ctx.now_ms)
                if mid in g.offline_since:                   # alive after all (registration timeout)
                    g = g.copy()
                    del g.offline_since[mid]
                    self._arm_registration(res, g)
                    self._commit(g)
                if g.state == PREPARING_REBALANCE:
                    code = E.REBALANCE_IN_PROGRESS
        res.respond(ctx.token, HeartbeatResponse(throttle_time_ms=0, error_code=code))
        return res

    # ================================================================== LeaveGroup (L1-L3)
    def leave_group(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid = ctx.api_version, req.group_id
        R = LeaveGroupResponse
        identities = ([(req.member_id, None)] if v < 3
                      else [(m.member_id, m.group_instance_id) for m in req.members])

        def answer(top: int, per: list[tuple[str, str | None, int]]) -> Result:
            if v < 3:
                top = top or (per[0][2] if per else 0)
                res.respond(ctx.token, R(throttle_time_ms=0, error_code=top))
            else:
                res.respond(ctx.token, R(throttle_time_ms=0, error_code=top, members=[
                    R.MemberResponse(member_id=m, group_instance_id=i, error_code=c) for m, i, c in per]))
            return res

        if not gid:
            return answer(E.INVALID_GROUP_ID, [])
        live = self.groups.get(gid)
        if live is None:                                                   # L1
            return answer(0, [(m, i, E.UNKNOWN_MEMBER_ID) for m, i in identities])
        if live.state == DEAD:
            return answer(E.COORDINATOR_NOT_AVAILABLE, [])
        g = live.copy()
        per = []
        changed: str | bool = False          # the cause of the rebalance the batch starts, once it changes anything
        for mid, iid in identities:                                        # L2
            target = None
            if not mid:
                target = g.static_members.get(iid) if iid is not None else None
                code = E.NONE if target else E.UNKNOWN_MEMBER_ID
            elif mid in g.pending_members:
                g.pending_members.discard(mid)
                res.cancel_timer(PendingKey(gid, mid))
                code, changed = E.NONE, changed or "member_left"
            else:
                code = self._validate_member(g, mid, iid)
                if code == E.FENCED_INSTANCE_ID:
                    self._fenced(res, g, iid, mid, ctx)
                target = mid if code == E.NONE else None
            if target is not None and target in g.members:
                # member id "" + instance id is the Admin client's removeMembersFromConsumerGroup (L4);
                # a member leaving by itself names its own member id
                self._remove_member(res, g, target, E.UNKNOWN_MEMBER_ID, rec.LEFT if mid else rec.REMOVED,
                                    ctx.now_ms, ctx)
                changed = changed or ("member_left" if mid else "member_removed")
            per.append((mid, iid, code))
        if changed:                                                        # L3: one decision per batch
            if g.state != EMPTY:                 # an Empty group (a pending id left) needs no rebalance
                self._rebalance_or_complete(res, g, ctx.now_ms, changed)
            self._commit(g)
        return answer(0, per)

    # ================================================================== offsets (O1-O6)
    # OffsetCommit v0-9 and OffsetFetch v0-9 share ONE offset store (the OffsetCommit records). Kafka
    # before KIP-896 (4.0 dropped both v0s and OffsetCommit v1) kept v0 commits in ZooKeeper and served
    # v0 fetches from there, a store separate from __consumer_offsets; a single store is right here: there
    # is no ZooKeeper, and a group's offsets must not depend on the version that committed them.
    # v0 carries no generation, member id or instance id: it is a commit with generation -1 and member
    # "" (O1-O3: accepted for an unknown or Empty group, 25 on a group with members). v1 adds a
    # per-partition commit timestamp: -1 means now, anything else is stored as given (Kafka's
    # OffsetAndMetadata.fromRequest). The leader epoch exists from v6, -1 before.
    def offset_commit(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid = ctx.api_version, req.group_id
        generation, mid = req.generation_id_or_member_epoch, req.member_id
        iid = req.group_instance_id if v >= 7 else None
        live = self.groups.get(gid)
        code, member = self._check_committer(res, ctx, live, generation, mid, iid,
                                             E.GROUP_ID_NOT_FOUND if v >= 9 else E.ILLEGAL_GENERATION)
        def record(topic: str, p, meta: str) -> OffsetCommitRecord:
            stamp = p.commit_timestamp if v == 1 and p.commit_timestamp != -1 else ctx.now_ms
            return OffsetCommitRecord(gid, topic, p.partition_index, p.committed_offset,
                                      p.committed_leader_epoch if v >= 6 else -1, meta, stamp)

        topics = self._commit_partitions(res, req.topics, code, OffsetCommitResponse.OffsetCommitResponseTopic,
                                         record)
        if not code and live is None:                                      # O1: a simple group
            self._commit(ClassicGroup(gid, state_timestamp=ctx.now_ms))
        if member is not None and live.state in (STABLE, PREPARING_REBALANCE):
            self._reset_heartbeat(res, live, member, ctx.now_ms)          # T1
        res.respond(ctx.token, OffsetCommitResponse(throttle_time_ms=0, topics=topics))
        return res

    def _check_committer(self, res: Result, ctx: RequestContext, live: ClassicGroup | None, generation: int,
                         mid: str, iid: str | None, unknown_group: int) -> tuple[int, Member | None]:
        """Who may commit offsets to a group (OffsetCommit and TxnOffsetCommit): (error, the member)."""
        code = E.NONE
        member = None
        if live is None:
            if generation >= 0:                                            # O1
                code = unknown_group
        elif live.state == DEAD:
            code = E.COORDINATOR_NOT_AVAILABLE
        elif live.state == EMPTY and generation < 0:                       # O2
            pass
        elif generation >= 0 or mid or iid is not None:                    # O3
            code = self._validate_member(live, mid, iid)
            if code == E.FENCED_INSTANCE_ID:
                self._fenced(res, live, iid, mid, ctx)
            if not code and generation != live.generation:
                code = E.ILLEGAL_GENERATION
            if not code and live.state == COMPLETING_REBALANCE:            # O4
                code = E.REBALANCE_IN_PROGRESS
            if not code:
                member = live.members[mid]
        else:
            code = E.UNKNOWN_MEMBER_ID
        return code, member

    # TxnOffsetCommit: offsets committed inside the producer's transaction (KIP-98; v3+ carries the member id,
    # generation and group instance id, checked as OffsetCommit checks them, so a fenced static member cannot
    # commit - KIP-447). They are written as the producer's transactional batch and count for the group only
    # once its commit marker follows (replay of TransactionEnd); an abort drops them. Before v3 (no member
    # fields) the commit is accepted whatever the group's generation, as Kafka does for old producers.
    def txn_offset_commit(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid = ctx.api_version, req.group_id
        generation, mid = (req.generation_id, req.member_id) if v >= 3 else (-1, "")
        iid = req.group_instance_id if v >= 3 else None
        live = self.groups.get(gid)
        if live is not None and generation < 0 and not mid and iid is None and live.state != DEAD:
            code, member = E.NONE, None
        else:
            code, member = self._check_committer(res, ctx, live, generation, mid, iid, E.ILLEGAL_GENERATION)
        def record(topic: str, p, meta: str) -> TransactionalOffsetCommit:
            return TransactionalOffsetCommit(req.producer_id, req.producer_epoch, OffsetCommitRecord(
                gid, topic, p.partition_index, p.committed_offset, p.committed_leader_epoch if v >= 2 else -1,
                meta, ctx.now_ms))

        topics = self._commit_partitions(res, req.topics, code, TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic,
                                         record)
        if not code and live is None:                                      # a simple group
            self._commit(ClassicGroup(gid, state_timestamp=ctx.now_ms))
        res.respond(ctx.token, TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics))
        return res

    def _commit_partitions(self, res: Result, topics_in, code: int, T, record_of) -> list:
        """The answer of each partition of an OffsetCommit or TxnOffsetCommit: `code`, else the metadata size
        check (O5), else NONE with the record `record_of(topic, partition, metadata)` emitted."""
        P = T.fields["partitions"].data_class
        topics = []
        for t in topics_in:
            parts = []
            for p in t.partitions:
                pcode = code
                meta = p.committed_metadata or ""
                if not pcode and len(meta.encode()) > self.config.offset_metadata_max_bytes:
                    pcode = E.OFFSET_METADATA_TOO_LARGE                    # O5
                if not pcode:
                    self._emit(res, record_of(t.name, p, meta))
                parts.append(P(partition_index=p.partition_index, error_code=pcode))
            topics.append(T(name=t.name, partitions=parts))
        return topics

    def has_pending_offsets(self, group_id: str, topic: str | None = None, partition: int | None = None) -> bool:
        """Whether an open transaction holds offsets for the group (for that partition, if named)."""
        for groups in self.pending_offsets.values():
            held = groups.get(group_id)
            if held and (topic is None or (topic, partition) in held):
                return True
        return False

    def offset_fetch(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v = ctx.api_version
        R = OffsetFetchResponse
        if v >= 8:
            G = R.OffsetFetchResponseGroup
            T, P = G.OffsetFetchResponseTopics, G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
            # a group asked for all its offsets twice is answered once (see describe_groups)
            wanted = list({(q.group_id, None) if q.topics is None else (q.group_id, i): q
                           for i, q in enumerate(req.groups)}.values())
            groups = [G(group_id=q.group_id, error_code=0,
                        topics=self._fetch_offsets(q.group_id, q.topics, T, P, req.require_stable))
                      for q in wanted]
            res.respond(ctx.token, R(throttle_time_ms=0, groups=groups))
        else:
            T, P = R.OffsetFetchResponseTopic, R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
            res.respond(ctx.token, R(throttle_time_ms=0, error_code=0, topics=self._fetch_offsets(
                req.group_id, req.topics, T, P, v >= 7 and req.require_stable)))
        return res

    def _fetch_offsets(self, gid: str, topics, T, P, require_stable: bool = False) -> list:
        """require_stable (v7+, a read_committed consumer): a partition whose offset an open transaction
        holds is answered UNSTABLE_OFFSET_COMMIT (88) until the transaction ends (the client retries)."""
        have = self.offsets.get(gid, {})
        if require_stable and self.has_pending_offsets(gid):
            def unstable(topic, idx):
                return self.has_pending_offsets(gid, topic, idx)
        else:
            def unstable(topic, idx):
                return False
        if topics is None:                                                 # all committed offsets
            by_topic: dict[str, list] = {}
            for (topic, part), rec in sorted(have.items()):
                by_topic.setdefault(topic, []).append(rec)
            return [T(name=topic, partitions=[
                P(partition_index=r.partition, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                  error_code=E.UNSTABLE_OFFSET_COMMIT) if unstable(topic, r.partition) else
                P(partition_index=r.partition, committed_offset=r.offset, committed_leader_epoch=r.leader_epoch,
                  metadata=r.metadata, error_code=0) for r in recs])
                    for topic, recs in by_topic.items()]
        out = []
        for t in topics:                                                   # O6
            parts = []
            for idx in t.partition_indexes:
                if unstable(t.name, idx):
                    parts.append(P(partition_index=idx, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                                   error_code=E.UNSTABLE_OFFSET_COMMIT))
                    continue
                r = have.get((t.name, idx))
                parts.append(P(partition_index=idx, committed_offset=r.offset if r else -1,
                               committed_leader_epoch=r.leader_epoch if r else -1,
                               metadata=r.metadata if r else "", error_code=0))
            out.append(T(name=t.name, partitions=parts))
        return out

    def offset_delete(self, ctx: RequestContext, req) -> Result:
        """Kafka 4's OffsetMetadataManager.deleteOffsets for a classic group: unknown -> 69; non-empty and
        not "consumer" -> 68; else per partition 86 if the group subscribes to the topic, otherwise 0 with
        a tombstone if an offset exists. Kafka snapshots the subscribed topics when a generation starts;
        this reads the current members' subscriptions (they differ only mid-rebalance)."""
        res = Result()
        R = OffsetDeleteResponse
        T, P = R.OffsetDeleteResponseTopic, R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition
        g = self.groups.get(req.group_id)
        if g is None or g.state == DEAD:
            res.respond(ctx.token, R(error_code=E.GROUP_ID_NOT_FOUND, throttle_time_ms=0, topics=[]))
            return res
        if g.state != EMPTY and g.protocol_type != "consumer":
            res.respond(ctx.token, R(error_code=E.NON_EMPTY_GROUP, throttle_time_ms=0, topics=[]))
            return res
        subscribed = self._subscribed_topics(g) if g.state != EMPTY else set()
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if subscribed is None or t.name in subscribed:
                    parts.append(P(partition_index=p.partition_index, error_code=E.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                if (t.name, p.partition_index) in self.offsets.get(g.group_id, {}):
                    self._emit(res, OffsetCommitRecord(g.group_id, t.name, p.partition_index, tombstone=True))
                parts.append(P(partition_index=p.partition_index, error_code=0))
            topics.append(T(name=t.name, partitions=parts))
        res.respond(ctx.token, R(error_code=0, throttle_time_ms=0, topics=topics))
        return res

    @staticmethod
    def _subscribed_topics(g: ClassicGroup) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None if a subscription is unreadable,
        in which case every topic counts as subscribed (nothing is deleted by guesswork)."""
        topics: set[str] = set()
        for m in g.members.values():
            meta = m.metadata(g.protocol_name) if g.protocol_name else (m.protocols[0][1] if m.protocols else b"")
            try:
                topics.update(ConsumerProtocolSubscription.decode(bytes(meta)).topics)
            except Exception:
                return None
        return topics

    # ================================================================== admin (A1, A2)
    def describe_groups(self, ctx: RequestContext, req) -> Result:
        res = Result()
        D = DescribeGroupsResponse.DescribedGroup
        M = D.DescribedGroupMember
        ops = authorized_operations("group", ctx.api_version >= 3 and req.include_authorized_operations)
        out = []
        # Each group once, in first-asked order. Kafka answers a repeated id again, but one 50 KB request
        # naming a group of 10 KB members 10,000 times then makes a 190 MiB answer; no client repeats an
        # id (librdkafka refuses "Duplicate groups not allowed", Java keys its requests by group id).
        for gid in dict.fromkeys(req.groups):
            g = self.groups.get(gid)
            if g is None:
                out.append(D(error_code=0, error_message=None, group_id=gid, group_state=DEAD, protocol_type="",
                             protocol_data="", members=[], authorized_operations=ops))
                continue
            stable = g.state == STABLE
            out.append(D(error_code=0, error_message=None, group_id=gid, group_state=g.state,
                         protocol_type=g.protocol_type or "", protocol_data=(g.protocol_name or "") if stable else "",
                         members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                    client_id=m.client_id, client_host=m.client_host,
                                    member_metadata=m.metadata(g.protocol_name) if stable else b"",
                                    member_assignment=m.assignment if stable else b"")
                                  for m in g.members.values()],
                         authorized_operations=ops))
        res.respond(ctx.token, DescribeGroupsResponse(throttle_time_ms=0, groups=out))
        return res

    def list_groups(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v = ctx.api_version
        states = {s.lower() for s in (req.states_filter or [])} if v >= 4 else set()
        types = {t.lower() for t in (req.types_filter or [])} if v >= 5 else set()
        L = ListGroupsResponse.ListedGroup
        out = [L(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state,
                 group_type=g.kind)
               for g in self.groups.values()
               if (not states or g.state.lower() in states) and (not types or g.kind in types)]
        res.respond(ctx.token, ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=out))
        return res

    def delete_groups(self, ctx: RequestContext, req) -> Result:
        res = Result()
        D = DeleteGroupsResponse.DeletableGroupResult
        out = []
        for gid in req.groups_names:
            g = self.groups.get(gid)
            if g is None or g.state == DEAD:
                out.append(D(group_id=gid, error_code=E.GROUP_ID_NOT_FOUND))
                continue
            if g.state != EMPTY:
                out.append(D(group_id=gid, error_code=E.NON_EMPTY_GROUP))
                continue
            for (topic, part) in sorted(self.offsets.get(gid, {})):
                self._emit(res, OffsetCommitRecord(gid, topic, part, tombstone=True))
            for iid in sorted(self.static_event_keys.get(gid, ())):       # compaction can drop it all
                self._emit(res, StaticMemberEventRecord(gid, iid, tombstone=True))
            self._emit(res, GroupMetadataRecord(gid, tombstone=True))
            self._commit(None, gid)
            for soft in (self._joins, self._syncs, self._initial_remaining, self._new_member_added,
                         self._sync_generation):
                soft.pop(gid, None)
            self._expansion_deadline.pop(gid, None)
            out.append(D(group_id=gid, error_code=0))
        res.respond(ctx.token, DeleteGroupsResponse(throttle_time_ms=0, results=out))
        return res

    _handlers = {
        11: join_group, 12: heartbeat, 13: leave_group, 14: sync_group,
        8: offset_commit, 9: offset_fetch, 47: offset_delete, 28: txn_offset_commit,
        15: describe_groups, 16: list_groups, 42: delete_groups,
    }
