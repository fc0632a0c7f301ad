"""The classic group kind: the classic rebalance protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
with static membership (KIP-345) and the KIP-345 draft's options, as a pure state machine.

`ClassicGroups` is one shard's handler of its classic groups, assembled from one part per concern, each
handed the parts it uses and calling them through their public methods only: rebalance.py (`Rebalance`, the
machinery and its join, sync and pending-member timers), options.py (`DraftOptions`, the draft's
registration and expansion timeouts), static.py (the instance map's history, `StaticMembership`: replacement),
join.py (`JoinRequests`), members.py (`MemberRequests`: sync, heartbeat, leave, the session timer),
describe.py (`DescribeRequests`: DescribeGroups).
group.py holds the group value and its state transition table. The shard (coordinator/shard.py) routes
requests and timers here and replays what they return; offsets.py asks the group kind for its commit rules.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from tenure.deferred import deferred
from tenure.protocol import records as rec
from tenure.protocol.error_responses import join_group_error, sync_group_error
from tenure.protocol.errors import AdminError
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import GroupMetadataRecord

from ..handler import ShardHandler
from ..result import RequestContext, Result
from ..timers import ExpansionKey, HeartbeatKey, JoinKey, PendingKey, RegistrationKey, SyncKey, TimerKey
from .describe import DescribeRequests
from .group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup, Member
from .join import JoinRequests
from .members import MemberRequests
from .options import DraftOptions
from .rebalance import Rebalance
from .replay import replay_group_metadata
from .static import StaticMembership, fenced, static_event

if TYPE_CHECKING:
    from kafka.protocol.consumer import metadata as consumer_protocol

    from tenure.inspection import GroupInfo

    from ..shard import GroupShard
else:   # the consumer protocol's subscription and assignment: at a group's first OffsetDelete or `info` (deferred.py)
    consumer_protocol = deferred("kafka.protocol.consumer.metadata")

# the read model of a group (GroupInfo): imported by the first control or view that asks for one (`info`)
inspection = deferred("tenure.inspection")

__all__ = ["ClassicGroups"]          # the kind; its group value and states are in group.py

# timer key type -> what its expiry does (the part whose timer it is)
_ON_TIMER: dict[type, Callable[[ClassicGroups, Any, int], Result]] = {
    HeartbeatKey: lambda c, k, now: c.member_requests.session_expired(k.group_id, k.member_id, now),
    PendingKey: lambda c, k, now: c.rebalance.pending_expired(k.group_id, k.member_id, now),
    JoinKey: lambda c, k, now: c.rebalance.join_expired(k.group_id, now),
    SyncKey: lambda c, k, now: c.rebalance.sync_expired(k.group_id, now),
    ExpansionKey: lambda c, k, now: c.options.expansion_expired(k.group_id, now),
    RegistrationKey: lambda c, k, now: c.options.registration_expired(k.group_id, now),
}


def decode_assignment(raw: bytes | None) -> dict[str, list[int]] | None:
    """A member's assignment in the consumer protocol as {topic: partitions}; None if not that protocol."""
    if not raw:
        return {}
    try:
        a = consumer_protocol.ConsumerProtocolAssignment.decode(bytes(raw))
        return {t.topic: sorted(t.partitions) for t in a.assigned_partitions}
    except Exception:
        return None


class ClassicGroups(ShardHandler):
    """The classic group kind (coordinator/kinds.py's GroupKind): its parts assembled, its APIs, timers and
    rules answered by them."""
    name: ClassVar[str] = "classic"
    group_type: ClassVar[type] = ClassicGroup
    apis: ClassVar[frozenset[int]] = frozenset({11, 12, 13, 14, 15})
    record_types: ClassVar[tuple[type, ...]] = (GroupMetadataRecord,)
    timer_keys: ClassVar[tuple[type, ...]] = tuple(_ON_TIMER)

    rebalance: Rebalance
    options: DraftOptions
    static: StaticMembership
    join_requests: JoinRequests
    member_requests: MemberRequests
    describe_requests: DescribeRequests

    def __init__(self, shard: GroupShard) -> None:
        super().__init__(shard)
        self.rebalance = Rebalance(shard)
        self.options = DraftOptions(self.rebalance)
        self.static = StaticMembership(self.rebalance, self.options)
        self.join_requests = JoinRequests(self.rebalance, self.static, self.options)
        self.member_requests = MemberRequests(self.rebalance, self.options)
        self.describe_requests = DescribeRequests(self.rebalance)

    # ---- the APIs (`apis`)
    def handlers(self) -> dict[int, Callable[[RequestContext, Any], Result]]:
        return {11: self.join_group, 12: self.member_requests.heartbeat, 13: self.leave_group, 14: self.sync_group,
                15: self.describe_groups}

    def join_group(self, ctx: RequestContext, req) -> Result:
        return self.join_requests.join_group(ctx, req)

    def heartbeat(self, ctx: RequestContext, req) -> Result:
        return self.member_requests.heartbeat(ctx, req)

    def leave_group(self, ctx: RequestContext, req) -> Result:
        return self.member_requests.leave_group(ctx, req)

    def sync_group(self, ctx: RequestContext, req) -> Result:
        return self.member_requests.sync_group(ctx, req)

    def describe_groups(self, ctx: RequestContext, req) -> Result:
        return self.describe_requests.describe_groups(ctx, req)

    def replay(self, record: GroupMetadataRecord) -> None:
        replay_group_metadata(self.groups, self.offsets, record)

    def loaded(self, res: Result, g: ClassicGroup, now_ms: int) -> None:
        """After a load: every member's session restarts."""
        for m in g.members.values():
            res.set_timer(HeartbeatKey(g.group_id, m.member_id), now_ms + m.session_timeout_ms)

    def unloaded(self, res: Result, code: int) -> None:
        self.answer_parked(res, code)

    @staticmethod
    def session_key(group_id: str, member_id: str) -> TimerKey:
        return HeartbeatKey(group_id, member_id)

    def classic_request(self, api_key: int, ctx: RequestContext, req) -> Result:
        return self.handlers()[api_key](ctx, req)

    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        expire = _ON_TIMER.get(type(key))
        if expire is None:
            raise ValueError(f"unknown timer {key!r}")
        return expire(self, key, now_ms)

    def answer_parked(self, res: Result, code: int) -> None:
        """Answer every parked JoinGroup and SyncGroup with `code` in its version's error shape."""
        for g in self.groups.values():
            if not isinstance(g, ClassicGroup):
                continue
            for mid, p in g.joins.items():
                res.respond(p.token, join_group_error(p.api_version, code, mid))
            for p in g.syncs.values():
                res.respond(p.token, sync_group_error(code))

    # ---- the offsets' rules for a classic group (coordinator/offsets.py)
    def validate_commit(self, res: Result, g: ClassicGroup, ctx: RequestContext, generation: int,
                        member_id: str, instance_id: str | None,
                        transactional: bool = False) -> tuple[int, Member | None]:
        """(error code, the committing member if it proved to be one) for a commit to a live group. A
        transactional commit (TxnOffsetCommit) is not refused during CompletingRebalance, as Kafka's."""
        if g.state == EMPTY and generation < 0:                            # O2
            return E.NONE, None
        if not (generation >= 0 or member_id or instance_id is not None):
            return E.UNKNOWN_MEMBER_ID, None
        code = self.rebalance.validate_member(g, member_id, instance_id)   # O3
        if code == E.FENCED_INSTANCE_ID:
            fenced(res, g, instance_id, member_id, ctx)
        if not code and generation != g.generation:
            code = E.ILLEGAL_GENERATION
        if not code and not transactional and g.state == COMPLETING_REBALANCE:   # O4
            code = E.REBALANCE_IN_PROGRESS
        return code, (g.members[member_id] if not code else None)

    def committed(self, res: Result, g: ClassicGroup, member: Member, now_ms: int) -> None:
        """A member's accepted commit: in Stable or PreparingRebalance it keeps the session alive (T1)."""
        if g.state in (STABLE, PREPARING_REBALANCE):
            self.rebalance.reset_heartbeat(res, g, member, now_ms)

    @staticmethod
    def validate_fetch(g: ClassicGroup, member_id: str | None, epoch: int) -> int:
        """An OffsetFetch's member and epoch: a classic group ignores them, as Kafka's."""
        return E.NONE

    @staticmethod
    def offset_delete_error(g: ClassicGroup) -> int:
        """Kafka 4's classic rule: a non-empty group that is not a consumer group keeps its offsets (68)."""
        return E.NON_EMPTY_GROUP if g.state != EMPTY and g.protocol_type != "consumer" else E.NONE

    def subscribed_topics(self, g: ClassicGroup) -> set[str] | None:
        """Topics whose offsets OffsetDelete must keep (86); None: all of them. Kafka snapshots the
        subscribed topics when a generation starts; this reads the current members' subscriptions (they
        differ only mid-rebalance)."""
        return self._subscribed_topics(g) if g.state != EMPTY else set()

    @staticmethod
    def _subscribed_topics(g: ClassicGroup) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None if a subscription is unreadable,
        in which case every topic counts as subscribed (nothing is deleted by guesswork)."""
        topics: set[str] = set()
        for m in g.members.values():
            meta = m.metadata(g.protocol_name) if g.protocol_name else (m.protocols[0][1] if m.protocols else b"")
            try:
                topics.update(consumer_protocol.ConsumerProtocolSubscription.decode(bytes(meta)).topics)
            except Exception:
                return None
        return topics

    # ---- inspection (tenure/inspection.py)
    @staticmethod
    def info(g: ClassicGroup) -> GroupInfo:
        members = tuple(inspection.MemberInfo(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.session_timeout_ms, m.rebalance_timeout_ms, decode_assignment(m.assignment),
                                   len(m.assignment or b""))
                        for m in g.members.values())
        return inspection.GroupInfo(g.group_id, g.kind, g.state, g.generation, g.protocol_type, g.protocol_name, g.leader_id,
                         members, dict(g.static_members))

    # ---- the admin APIs and controls (coordinator/group_admin.py)
    @staticmethod
    def delete_records(g: ClassicGroup) -> list:
        """What deleting an empty classic group writes after its offsets' tombstones."""
        return [GroupMetadataRecord(g.group_id, tombstone=True)]

    def force_rebalance(self, group_id: str, now_ms: int) -> Result:
        """The KIP-345 draft's forceStaticRebalance: one rebalance of a static group, now; AdminError if the
        group cannot be forced."""
        live = self.rebalance.group(group_id)
        assert live is not None, "the shard asks a group's own kind (GroupAdmin.force_rebalance)"
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
            assert m.group_instance_id is not None, "only a static group is forced"
            static_event(res, g, rec.FORCED_REBALANCE, m.group_instance_id, m.member_id, m.member_id,
                         now_ms, m.client_id, m.client_host)
        self.rebalance.prepare_rebalance(res, g, now_ms, "forced")
        res.install(g.group_id, g)
        return res
