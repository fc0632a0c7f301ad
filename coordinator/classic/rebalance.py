"""The classic rebalance machinery every classic request and timer shares (J8-J16, T1): identity
checks, the join phase and its completion, the sync phase, member removal, parked requests, the answers a
rebalance gives to parked members, and the join, sync and pending-member timers.

`Rebalance` is one part of the classic group kind (`ClassicGroups`, coordinator/classic/__init__.py), the
one the others (join.py, members.py, static.py, options.py) are handed and call through its public methods.
Its methods change only a draft group and the Result: the shard replays the Result's events afterwards.
Labels in comments (J23, S2, ...) refer to items of docs/behaviour.md.
"""
from __future__ import annotations

from kafka.protocol.consumer.group import JoinGroupResponse, SyncGroupResponse

from tenure.protocol import records as rec
from tenure.protocol.error_responses import join_group_error, sync_group_error
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import GroupMetadataRecord, MemberRecord

from ..handler import ShardHandler
from ..result import RequestContext, Result, TimerOp
from ..timers import ExpansionKey, HeartbeatKey, JoinKey, SyncKey
from .group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup, Member, Parked
from .static import static_event

# A member's session key, made once and found again at each of its heartbeats: the timer wheel's and the shard's
# dicts then find the very key they hold (an identity check) instead of comparing two equal frozen dataclasses
# field by field three times per heartbeat. Up to SESSION_KEYS_KEPT (then the table starts again).
SESSION_KEYS_KEPT = 65536
_session_keys: dict[tuple[str, str], HeartbeatKey] = {}


def session_key(group_id: str, member_id: str) -> HeartbeatKey:
    """The `HeartbeatKey` of a member's session (one equal to any other made for it)."""
    ids = (group_id, member_id)
    key = _session_keys.get(ids)
    if key is None:
        if len(_session_keys) >= SESSION_KEYS_KEPT:
            _session_keys.clear()
        key = _session_keys[ids] = HeartbeatKey(group_id, member_id)
    return key


class Rebalance(ShardHandler):
    """The machinery of a classic group's rebalance, over one shard's groups."""

    def group(self, group_id: str) -> ClassicGroup | None:
        """The classic group of that id (None if unknown, or a group of another kind)."""
        g = self.groups.get(group_id)
        return g if isinstance(g, ClassicGroup) else None

    def new_member_id(self, prefix: str) -> str:
        return self.shard.new_member_id(prefix)

    @staticmethod
    def _all_joined(g: ClassicGroup) -> bool:
        return all(mid in g.joins for mid in g.members) and not g.pending_members

    def _expectation_met(self, res: Result, g: ClassicGroup) -> bool:
        """During a group's initial delay (J12): a test said the group starts with N members (`expect_group`)
        and N have joined, with nobody else to wait for: the join phase may end now, with no delay."""
        n = self.expected_members(g.group_id)
        if n is None or g.initial_remaining is None or len(g.joins) < n or not self._all_joined(g):
            return False
        res.notes.append((g.group_id, f"the {len(g.joins)} expected member(s) joined: the first rebalance "
                                      f"ends now, without the initial delay"))
        return True

    @staticmethod
    def validate_member(g: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        """Identity check shared by Join/Sync/Heartbeat/Leave/OffsetCommit (J17, J31)."""
        if instance_id is not None:
            mapped = g.static_members.get(instance_id)
            if mapped is None:
                return E.UNKNOWN_MEMBER_ID
            if mapped != member_id:
                return E.FENCED_INSTANCE_ID
            return E.NONE
        return E.NONE if member_id in g.members else E.UNKNOWN_MEMBER_ID

    def reset_heartbeat(self, res: Result, g: ClassicGroup, m: Member, now_ms: int) -> None:
        timeout = self.shard.config.new_member_join_timeout_ms if m.is_new else m.session_timeout_ms
        res.timers.append(TimerOp(session_key(g.group_id, m.member_id), now_ms + timeout))    # res.set_timer

    def group_record(self, g: ClassicGroup, now_ms: int) -> GroupMetadataRecord:
        return GroupMetadataRecord(
            group_id=g.group_id, protocol_type=g.protocol_type or "", generation=g.generation,
            protocol=g.protocol_name, leader=g.leader_id, current_state_timestamp=g.state_timestamp,
            members=tuple(MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                       m.rebalance_timeout_ms, m.session_timeout_ms,
                                       m.metadata(g.protocol_name), m.assignment)
                          for m in g.members.values()))

    @staticmethod
    def _join_members(g: ClassicGroup) -> list:
        M = JoinGroupResponse.JoinGroupResponseMember
        return [M(member_id=m.member_id, group_instance_id=m.group_instance_id,
                  metadata=m.metadata(g.protocol_name)) for m in g.members.values()]

    def join_ok(self, g: ClassicGroup, member_id: str, version: int, *, leader: str | None = None,
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
    def sync_ok(g: ClassicGroup, assignment: bytes) -> SyncGroupResponse:
        return SyncGroupResponse(throttle_time_ms=0, error_code=0, protocol_type=g.protocol_type,
                                 protocol_name=g.protocol_name, assignment=assignment)

    def prepare_rebalance(self, res: Result, g: ClassicGroup, now_ms: int, cause: str) -> None:
        gid = g.group_id
        res.rebalances.append((gid, cause))
        if g.state == COMPLETING_REBALANCE:                  # J10: parked syncs get 27, assignments reset
            for p in g.syncs.values():
                res.respond(p.token, sync_group_error(E.REBALANCE_IN_PROGRESS))
            g.syncs = {}
            for m in g.members.values():
                m.assignment = b""
        g.pending_sync.clear()
        res.cancel_timer(SyncKey(gid))
        if g.expansion_deadline is not None:                # this rebalance takes in the new members
            g.expansion_deadline = None
            res.cancel_timer(ExpansionKey(gid))
        initial = g.state == EMPTY
        g.transition(PREPARING_REBALANCE, now_ms)
        if initial:                                          # J12: the initial delay
            delay = self.config.initial_rebalance_delay_ms
            g.initial_remaining = max(g.rebalance_timeout_ms() - delay, 0)
            g.new_member_added = False
            res.set_timer(JoinKey(gid), now_ms + delay)
            if self._expectation_met(res, g):
                self._complete_join(res, g, now_ms)
        else:
            g.initial_remaining = None
            if self._all_joined(g):                          # J9: completes early
                self._complete_join(res, g, now_ms)
            else:
                res.set_timer(JoinKey(gid), now_ms + g.rebalance_timeout_ms())

    def maybe_complete_join(self, res: Result, g: ClassicGroup, now_ms: int) -> None:
        if g.state != PREPARING_REBALANCE:
            return
        if (g.initial_remaining is None and self._all_joined(g)) or self._expectation_met(res, g):
            self._complete_join(res, g, now_ms)

    def rebalance_or_complete(self, res: Result, g: ClassicGroup, now_ms: int, cause: str) -> None:
        if g.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self.prepare_rebalance(res, g, now_ms, cause)
        elif g.state == PREPARING_REBALANCE:
            self.maybe_complete_join(res, g, now_ms)

    def _complete_join(self, res: Result, g: ClassicGroup, now_ms: int) -> None:
        gid = g.group_id
        joined = g.joins
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
        g.initial_remaining = None
        g.generation += 1
        if not g.members:                                    # J15
            g.protocol_name = None
            g.leader_id = None
            g.transition(EMPTY, now_ms)
            res.emit(self.group_record(g, now_ms))
            return
        g.protocol_name = g.select_protocol()                # J14
        g.transition(COMPLETING_REBALANCE, now_ms)
        for mid, p in g.joins.items():
            res.respond(p.token, self.join_ok(g, mid, p.api_version))
        g.joins = {}
        for m in g.members.values():
            m.is_new = False
            self.reset_heartbeat(res, g, m, now_ms)
        g.pending_sync = set(g.members)
        g.sync_generation = g.generation
        res.set_timer(SyncKey(gid), now_ms + g.rebalance_timeout_ms())

    def remove_member(self, res: Result, g: ClassicGroup, member_id: str, join_error: int, cause: str,
                       now_ms: int, ctx: RequestContext | None = None) -> Member:
        """Remove a member; a static one's instance id leaves the map with a `cause` event (client: the
        request's, or with no request the member's own)."""
        m = g.members[member_id]
        iid = m.group_instance_id
        if iid is not None and g.static_members.get(iid) == member_id:
            static_event(res, g, cause, iid, member_id, None, now_ms,
                               ctx.client_id if ctx else m.client_id, ctx.client_host if ctx else m.client_host)
        m = g.remove_member(member_id)
        res.cancel_timer(HeartbeatKey(g.group_id, member_id))
        p = g.joins.pop(member_id, None)
        if p is not None:                                   # a removed member is unknown: memberId ""
            res.respond(p.token, join_group_error(p.api_version, join_error, ""))
        p = g.syncs.pop(member_id, None)
        if p is not None:
            res.respond(p.token, sync_group_error(join_error))
        return m

    def park_join(self, res: Result, g: ClassicGroup, member_id: str, ctx: RequestContext) -> None:
        joins = g.joins
        old = joins.get(member_id)
        if old is not None and old.token != ctx.token:       # a duplicate JoinGroup supersedes the first
            res.respond(old.token, join_group_error(old.api_version, E.REBALANCE_IN_PROGRESS, member_id))
        joins[member_id] = Parked(ctx.token, ctx.api_version, ctx.client_id or "", ctx.client_host)

    def join_expired(self, gid: str, now_ms: int) -> Result:
        res = Result()
        live = self.group(gid)
        if live is None or live.state != PREPARING_REBALANCE:
            return res
        g = live.copy()
        remaining = g.initial_remaining
        if remaining is not None:                                          # J12
            if g.new_member_added and remaining > 0:
                delay = min(self.config.initial_rebalance_delay_ms, remaining)
                g.initial_remaining = max(remaining - delay, 0)
                g.new_member_added = False
                res.set_timer(JoinKey(gid), now_ms + delay)
                res.install(g.group_id, g)
                return res
            g.initial_remaining = None
            n = self.expected_members(gid)
            if n is not None and len(g.joins) < n:
                res.notes.append((gid, f"expected {n} member(s), {len(g.joins)} joined within the initial "
                                       f"rebalance delay: the rebalance completes with them"))
        self._complete_join(res, g, now_ms)
        res.install(g.group_id, g)
        return res

    def pending_expired(self, gid: str, mid: str, now_ms: int) -> Result:
        res = Result()
        live = self.group(gid)
        if live is None or mid not in live.pending_members:
            return res
        g = live.copy()
        g.pending_members.discard(mid)
        self.maybe_complete_join(res, g, now_ms)
        res.install(g.group_id, g)
        return res

    def sync_expired(self, gid: str, now_ms: int) -> Result:                # J16
        res = Result()
        live = self.group(gid)
        if (live is None or live.state not in (COMPLETING_REBALANCE, STABLE)
                or live.sync_generation != live.generation or not live.pending_sync):
            return res
        g = live.copy()
        for mid in sorted(g.pending_sync):
            self.remove_member(res, g, mid, E.UNKNOWN_MEMBER_ID, rec.SYNC_EXPIRED, now_ms)
        self.prepare_rebalance(res, g, now_ms, "sync_timeout")
        res.install(g.group_id, g)
        return res
