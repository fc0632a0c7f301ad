"""Classic-protocol members served inside a KIP-848 consumer group, and the group's conversions to and from a
classic group (online migration, coordinator/migration.py), as Kafka 4.x's GroupMetadataManager serves them.

A classic consumer's JoinGroup, SyncGroup, Heartbeat and LeaveGroup to a consumer group with members reach the
consumer kind here (the classic kind hands them over: `ConsumerGroups.classic_request`):

- JoinGroup: a new dynamic member gets MEMBER_ID_REQUIRED with a member id (v4+); then the member joins like a
  consumer-protocol member (the subscription and owned partitions of its first protocol's metadata, its session
  timeout and protocols kept as its classic metadata): the group epoch, the target assignment and its
  reconciliation are the consumer group's. The answer comes at once: generation = its member epoch, no leader,
  no member list. A static member joining with an instance id another member holds replaces it at once (a
  classic member sends no leave); when the replaced member was the last one speaking the consumer protocol the
  group becomes a classic group, with no rebalance. It must send SyncGroup within its rebalance timeout.
- SyncGroup: its current assignment in the classic form (the consumer protocol's Assignment, in its own
  subscription's version); REBALANCE_IN_PROGRESS while the group epoch is ahead of its member epoch (unless it
  is revoking partitions).
- Heartbeat: REBALANCE_IN_PROGRESS when it must rejoin - the group epoch is ahead of its member epoch, it has
  partitions to revoke, or partitions it waits for are free - and it must then rejoin within its rebalance
  timeout.
- LeaveGroup: the members leave (fenced), one group epoch bump; or the group becomes a classic group and
  rebalances when only classic members are left.

Session, join and sync timers fence the member (heartbeat.py's on_timer).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kafka.protocol.consumer.group import JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse

from tenure.protocol.consumer_group_records import ClassicMemberMetadata
from tenure.protocol.error_responses import heartbeat_error, join_group_error, leave_group_error, sync_group_error
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import FENCED, LEFT, REMOVED

from ..classic import ClassicGroups
from ..classic.group import ClassicGroup, request_ids
from ..migration import (
    CONSUMER_PROTOCOL_TYPE,
    classic_subscription,
    downgraded_group,
    encode_assignment,
    may_downgrade,
    protocol_version,
    upgrade_records,
    upgrade_refusal,
)
from ..result import RequestContext, Result
from ..timers import (
    ConsumerJoinKey,
    ConsumerSessionKey,
    ConsumerSyncKey,
    ExpansionKey,
    HeartbeatKey,
    JoinKey,
    PendingKey,
    RegistrationKey,
    SyncKey,
)
from .group import UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, ConsumerGroup, ConsumerMember, pairs
from .hash import epoch_records
from .replay import replay_consumer_record

if TYPE_CHECKING:
    from .heartbeat import ConsumerGroups


class ClassicMembers:
    """The classic protocol's requests to a consumer group, and the conversions, over the consumer kind."""

    def __init__(self, kind: ConsumerGroups) -> None:
        self.kind = kind
        self.shard = kind.shard

    def handle(self, api_key: int, ctx: RequestContext, req) -> Result:
        return {11: self.join, 12: self.heartbeat, 13: self.leave, 14: self.sync}[api_key](ctx, req)

    # ---------------------------------------------------------------- helpers
    def _topic_id(self, name: str):
        t = self.shard.topics.get(name)
        return None if t is None else t.topic_id

    def _topic_name(self, tid) -> str | None:
        t = self.shard.topics.by_id(tid)
        return None if t is None else t.name

    def _classic_kind(self) -> ClassicGroups:
        return cast(ClassicGroups, self.shard.kinds.of_group[ClassicGroup])

    @property
    def _policy(self) -> str:
        return self.shard.config.consumer_migration_policy

    def _group(self, gid: str) -> ConsumerGroup:
        g = self.kind.groups.get(gid)
        assert isinstance(g, ConsumerGroup), "the classic kind hands over requests to consumer groups only"
        return g

    def _validate(self, res: Result, g: ConsumerGroup, mid: str, iid: str | None,
                  ctx: RequestContext) -> tuple[int, ConsumerMember | None]:
        """Kafka's validateConsumerGroupMember: the instance id must be held by that member id (82, with a
        `fenced` event; an unknown one is 25), or the member id must be one of the group (25)."""
        if iid is not None:
            holder = g.static_members.get(iid)
            if holder is None:
                return E.UNKNOWN_MEMBER_ID, None
            if holder != mid:
                res.emit(self.kind.member_event(g, iid, FENCED, mid, holder, ctx))
                return E.FENCED_INSTANCE_ID, None
        member = g.members.get(mid)
        return (E.NONE, member) if member is not None else (E.UNKNOWN_MEMBER_ID, None)

    @staticmethod
    def _supports(g: ConsumerGroup, protocol_type: str | None, names: list[str]) -> bool:
        """Kafka's supportsClassicProtocols: the consumer protocol type, and a protocol every classic member
        of the group supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        classic = [m for m in g.members.values() if m.classic is not None]
        return any(all(n in {p for p, _ in m.classic.protocols} for m in classic if m.classic is not None)
                   for n in names)

    def _must_rejoin(self, g: ConsumerGroup, m: ConsumerMember) -> bool:
        """A classic member must rejoin: the group epoch is ahead of its own, it has partitions to revoke, or
        the partitions it waits for are free now."""
        if m.member_epoch < g.group_epoch or m.state == UNREVOKED_PARTITIONS:
            return True
        if m.state == UNRELEASED_PARTITIONS:
            waiting = pairs(g.targets.get(m.member_id, {})) - pairs(m.assigned)
            return not any(g.owners.get(tp) not in (None, m.member_id) for tp in waiting)
        return False

    def _join_timer(self, res: Result, gid: str, m: ConsumerMember, now_ms: int) -> None:
        key = ConsumerJoinKey(gid, m.member_id)
        if not self.shard.is_armed(key):                   # if absent, as Kafka's
            res.set_timer(key, now_ms + max(m.rebalance_timeout_ms, 0))

    def _assignment(self, m: ConsumerMember) -> bytes:
        meta = m.classic.protocols[0][1] if m.classic is not None and m.classic.protocols else b""
        return encode_assignment(m.assigned, self._topic_name, protocol_version(meta))

    # ---------------------------------------------------------------- JoinGroup
    def join(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid, mid, iid = request_ids(ctx, req, 5)
        g = self._group(gid)

        def error(code: int, member_id: str = mid) -> Result:
            res.respond(ctx.token, join_group_error(v, code, member_id))
            return res

        new_id = mid or self.shard.new_member_id(ctx.client_id or "")
        limit = self.shard.config.max_group_size
        if limit is not None and new_id not in g.members and len(g.members) >= limit:
            return error(E.GROUP_MAX_SIZE_REACHED, "")
        protocols = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
        if not self._supports(g, req.protocol_type, [n for n, _ in protocols]):
            return error(E.INCONSISTENT_GROUP_PROTOCOL)
        if not mid and iid is None and v >= 4:             # a dynamic member asks for its id first (KIP-394)
            return error(E.MEMBER_ID_REQUIRED, new_id)
        replaced: ConsumerMember | None = None
        member: ConsumerMember
        if iid is None:
            member = g.members.get(new_id) or ConsumerMember(new_id)
        elif not mid:
            holder = g.static_members.get(iid)
            if holder is None:
                member = ConsumerMember(new_id)
            else:                                          # replaced at once, whatever its epoch
                replaced = g.members[holder]
                member = replaced.replace(member_id=new_id, member_epoch=0, previous_member_epoch=0)
        else:
            code, found = self._validate(res, g, mid, iid, ctx)
            if found is None:
                return error(code)
            member = found
        try:
            sub = classic_subscription(protocols)
        except ValueError:         # Kafka's deserializeSubscription throws IllegalStateException: unknown error
            return error(E.UNKNOWN_SERVER_ERROR)
        is_new = member.member_id not in g.members and replaced is None
        rack = getattr(sub, "rack_id", None)
        updated_in = member.replace(
            instance_id=iid if iid is not None else member.instance_id,
            rack_id=rack if rack is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(sub.topics))), client_id=ctx.client_id,
            client_host=ctx.client_host, classic=ClassicMemberMetadata(req.session_timeout_ms, protocols))
        owned = {(tid, p) for tp in (getattr(sub, "owned_partitions", None) or [])
                 if (tid := self._topic_id(tp.topic)) is not None for p in tp.partitions}
        updated, _ = self.kind.update_member(res, ctx, g, updated_in, member, is_new, replaced, owned)
        gid, now = g.group_id, ctx.now_ms
        res.cancel_timer(ConsumerJoinKey(gid, updated.member_id))
        if replaced is not None and self.may_downgrade(g, {replaced.member_id}, replacement=True):
            self.downgrade(res, g, set(), now, rebalance=False)
        else:                                              # it must send SyncGroup within its rebalance timeout
            res.set_timer(ConsumerSyncKey(gid, updated.member_id), now + max(updated.rebalance_timeout_ms, 0))
        res.respond(ctx.token, JoinGroupResponse(
            throttle_time_ms=0, error_code=0, generation_id=updated.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0], leader="", skip_assignment=False,
            member_id=updated.member_id, members=[]))
        return res

    # ---------------------------------------------------------------- SyncGroup
    def sync(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid, mid, iid = request_ids(ctx, req, 3)
        g = self._group(gid)

        def error(code: int) -> Result:
            res.respond(ctx.token, sync_group_error(code))
            return res

        code, m = self._validate(res, g, mid, iid, ctx)
        if m is None:
            return error(code)
        if m.classic is None:
            return error(E.UNKNOWN_MEMBER_ID)              # it speaks the consumer protocol
        if req.generation_id != m.member_epoch:
            return error(E.ILLEGAL_GENERATION)
        ptype, pname = getattr(req, "protocol_type", None), getattr(req, "protocol_name", None)
        if (ptype is not None and ptype != CONSUMER_PROTOCOL_TYPE) or (
                pname is not None and pname != m.classic.protocols[0][0]):
            return error(E.INCONSISTENT_GROUP_PROTOCOL)
        if g.group_epoch > m.member_epoch and m.state != UNREVOKED_PARTITIONS:
            self._join_timer(res, gid, m, ctx.now_ms)
            return error(E.REBALANCE_IN_PROGRESS)
        res.cancel_timer(ConsumerSyncKey(gid, mid))
        res.set_timer(ConsumerSessionKey(gid, mid), ctx.now_ms + m.classic.session_timeout_ms)
        res.respond(ctx.token, SyncGroupResponse(throttle_time_ms=0, error_code=0, protocol_type=ptype,
                                                 protocol_name=pname, assignment=self._assignment(m)))
        return res

    # ---------------------------------------------------------------- Heartbeat
    def heartbeat(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid, mid, iid = request_ids(ctx, req, 3)
        g = self._group(gid)
        code, m = self._validate(res, g, mid, iid, ctx)
        if m is not None:
            if m.classic is None:
                code = E.UNKNOWN_MEMBER_ID
            elif req.generation_id != m.member_epoch:
                code = E.ILLEGAL_GENERATION
            else:
                res.set_timer(ConsumerSessionKey(gid, mid), ctx.now_ms + m.classic.session_timeout_ms)
                if self._must_rejoin(g, m):
                    code = E.REBALANCE_IN_PROGRESS
                    self._join_timer(res, gid, m, ctx.now_ms)
        res.respond(ctx.token, heartbeat_error(code))
        return res

    # ---------------------------------------------------------------- LeaveGroup
    def leave(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid = ctx.api_version, req.group_id
        g = self._group(gid)
        identities = ([(req.member_id, None)] if v < 3 else [(m.member_id, m.group_instance_id) for m in req.members])
        per: list[tuple[str, str | None, int]] = []
        leaving: list[ConsumerMember] = []
        by_admin = False
        for mid, iid in identities:
            member: ConsumerMember | None = None
            if iid is not None:
                holder = g.static_members.get(iid)
                if holder is None:
                    code = E.UNKNOWN_MEMBER_ID
                elif mid and holder != mid:
                    res.emit(self.kind.member_event(g, iid, FENCED, mid, holder, ctx))
                    code = E.FENCED_INSTANCE_ID
                else:
                    code, member = E.NONE, g.members[holder]
            else:
                member = g.members.get(mid)
                code = E.NONE if member is not None else E.UNKNOWN_MEMBER_ID
            if member is not None and all(x.member_id != member.member_id for x in leaving):
                leaving.append(member)
                by_admin = by_admin or not mid
            per.append((mid, iid, code))
        if leaving:
            self.kind.remove_members(res, g, leaving, REMOVED if by_admin else LEFT, ctx.client_id,
                                     ctx.client_host, ctx.now_ms)
        R = LeaveGroupResponse
        if v < 3:
            res.respond(ctx.token, leave_group_error(per[0][2]))
        else:
            res.respond(ctx.token, R(throttle_time_ms=0, error_code=0, members=[
                R.MemberResponse(member_id=m, group_instance_id=i, error_code=c) for m, i, c in per]))
        return res

    # ---------------------------------------------------------------- upgrade: classic -> consumer
    def upgrade_refusal(self, g: ClassicGroup) -> str | None:
        return upgrade_refusal(self._policy, g, self.shard.config.max_group_size)

    def upgrade(self, res: Result, ctx: RequestContext, g: ClassicGroup) -> ConsumerGroup:
        """Convert a classic group with members (Kafka's convertToConsumerGroup): its parked JoinGroup and
        SyncGroup requests answered REBALANCE_IN_PROGRESS, its timers cancelled, its records replaced by the
        consumer group's, each member's session timer armed with its own session timeout. The consumer group
        value, as replaying those records builds it. ValueError if a member's embedded protocol is malformed."""
        gid = g.group_id
        records = upgrade_records(g, self._topic_id, lambda epoch, subscribed: epoch_records(
            self.shard.config.consumer_group_metadata_hash, self.shard.topic_hashes, gid, epoch, subscribed))
        for mid, p in g.joins.items():
            res.respond(p.token, join_group_error(p.api_version, E.REBALANCE_IN_PROGRESS, mid))
        for p in g.syncs.values():
            res.respond(p.token, sync_group_error(E.REBALANCE_IN_PROGRESS))
        for key in (JoinKey(gid), SyncKey(gid), ExpansionKey(gid), RegistrationKey(gid)):
            res.cancel_timer(key)
        for mid in g.pending_members:
            res.cancel_timer(PendingKey(gid, mid))
        for mid in g.members:
            res.cancel_timer(HeartbeatKey(gid, mid))
        for r in records:
            res.emit(r)
        scratch: dict = {}
        for r in records[1:]:
            replay_consumer_record(scratch, {}, r, lambda _gid: None)
        cg = scratch[gid]
        for m in cg.members.values():
            res.set_timer(ConsumerSessionKey(gid, m.member_id), ctx.now_ms + self.kind.session_ms(gid, m))
        res.notes.append((gid, f"classic group of {len(g.members)} member(s) upgraded to a consumer group at "
                               f"generation {g.generation}"))
        return cg

    # ---------------------------------------------------------------- downgrade: consumer -> classic
    def may_downgrade(self, g: ConsumerGroup, leaving: set[str], *, replacement: bool = False) -> bool:
        return may_downgrade(self._policy, g, leaving, self.shard.config.max_group_size, replacement=replacement)

    def _view(self, g: ConsumerGroup, res: Result) -> ConsumerGroup:
        """The group as the consumer records `res` holds so far leave it (a static replacement's)."""
        scratch: dict = {g.group_id: g.copy()}
        for ev in res.events:
            if type(ev) in self.kind.record_types and getattr(ev, "group_id", None) == g.group_id:
                replay_consumer_record(scratch, {}, ev, lambda _gid: None)
        view = scratch.get(g.group_id)
        assert isinstance(view, ConsumerGroup)
        return view

    def downgrade(self, res: Result, g: ConsumerGroup, leaving: set[str], now_ms: int, *,
                  rebalance: bool = True) -> None:
        """Convert to a classic group (Kafka's convertToClassicGroup): the consumer group's tombstones, the
        classic group's GroupMetadata record, every member's classic session timer; a rebalance when a member
        left (`rebalance`), none when a static member was replaced."""
        gid = g.group_id
        view = self._view(g, res)
        for mid in set(view.members) | leaving:
            self.kind.cancel_member_timers(res, gid, mid)
        for r in self.kind.delete_records(view):
            res.emit(r)
        classic = downgraded_group(view, leaving, self._topic_name, now_ms)
        ck = self._classic_kind()
        res.emit(ck.rebalance.group_record(classic, now_ms))
        for m in classic.members.values():
            ck.rebalance.reset_heartbeat(res, classic, m, now_ms)
        res.notes.append((gid, f"consumer group downgraded to a classic group of {len(classic.members)} member(s) "
                               f"at generation {classic.generation}"))
        if rebalance:
            ck.rebalance.prepare_rebalance(res, classic, now_ms, "downgraded_to_classic")
        res.install(gid, classic)
