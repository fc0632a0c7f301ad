"""ShareGroupHeartbeat (76) and the share group kind's rules for the offsets and admin parts of a shard.

A heartbeat, in order: validation (42: an empty group id or member id, a first heartbeat without topics, an
epoch below -1); find or create the group (69 for an unknown group unless the epoch is 0, and for a group of
another kind: "is not a share group"); find the member (25 for an unknown one unless the epoch is 0) and check
its epoch (110 unless it is the member's epoch or, a response lost, its previous one); merge what the request
changed; bump the group epoch when a member joins, a subscription changes or the simple assignor's answer for
the topics as they are now differs from the target; when the group epoch is ahead of the target assignment's,
write the new targets; the member takes its target at once (a share member revokes nothing: a partition may be
shared) and gets the group's epoch; answer with the assignment when it is new to the member. -1 leaves: the
member's records are tombstoned and the group epoch bumped. A member whose session timer fires is removed the
same way.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

from tenure.inspection import GroupInfo
from tenure.protocol import share_group as wire
from tenure.protocol.error_responses import (
    heartbeat_error,
    join_group_error,
    leave_group_error,
    share_group_heartbeat_error,
    sync_group_error,
)
from tenure.protocol.errors import AdminError
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.share_group_records import (
    ShareAssignmentRecord,
    ShareGroupMetadataRecord,
    ShareIgnoredRecord,
    ShareMemberRecord,
    ShareTargetMemberRecord,
    ShareTargetMetadataRecord,
)

from ..handler import ShardHandler
from ..result import RequestContext, Result
from ..timers import ShareSessionKey, TimerKey
from .assignor import assign
from .describe import describe_groups, group_info
from .group import LEAVE_EPOCH, Partitions, ShareGroup, ShareMember, freeze, replay_share_record
from .group_config import share_timeouts


@functools.cache
def _answer_classes() -> tuple[Any, Any, Any]:
    """ShareGroupHeartbeat's response, its assignment and topic-partitions classes: built at the first answer
    (protocol/structs.py LazySchemas), not at import."""
    hb = wire.ShareGroupHeartbeatResponse
    return hb, hb.Assignment, hb.Assignment.fields["topic_partitions"].data_class


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _blank(s: str | None) -> bool:
    return s is None or not s.strip()


class ShareGroups(ShardHandler):
    """The KIP-932 share group kind (coordinator/kinds.py's GroupKind)."""
    name: ClassVar[str] = "share"
    group_type: ClassVar[type] = ShareGroup
    apis: ClassVar[frozenset[int]] = frozenset({76, 77})
    record_types: ClassVar[tuple[type, ...]] = (
        ShareGroupMetadataRecord, ShareMemberRecord, ShareTargetMetadataRecord, ShareTargetMemberRecord,
        ShareAssignmentRecord, ShareIgnoredRecord)
    timer_keys: ClassVar[tuple[type, ...]] = (ShareSessionKey,)

    def replay(self, record) -> None:
        replay_share_record(self.groups, record)

    def unloaded(self, res: Result, code: int) -> None:
        """Nothing is parked in a share group: its members heartbeat again elsewhere."""

    @staticmethod
    def session_key(group_id: str, member_id: str) -> TimerKey:
        return ShareSessionKey(group_id, member_id)

    def handlers(self) -> dict[int, Callable[[RequestContext, Any], Result]]:
        return {76: self.heartbeat, 77: self.describe}

    def classic_request(self, api_key: int, ctx: RequestContext, req) -> Result:
        """A classic-protocol request naming a share group, which never serves classic members: JoinGroup
        INCONSISTENT_GROUP_PROTOCOL (23), SyncGroup, Heartbeat and LeaveGroup UNKNOWN_MEMBER_ID (25), as Kafka's
        coordinator answers a group of another type."""
        res = Result()
        if api_key == 11:
            res.respond(ctx.token, join_group_error(ctx.api_version, E.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        else:
            error = {12: heartbeat_error, 13: leave_group_error, 14: sync_group_error}[api_key]
            res.respond(ctx.token, error(E.UNKNOWN_MEMBER_ID))
        return res

    # ================================================================ ShareGroupHeartbeat
    def heartbeat(self, ctx: RequestContext, req) -> Result:
        res = Result()
        try:
            self._validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                self._leave(res, ctx, req)
            else:
                self._join_or_heartbeat(res, ctx, req)
        except HeartbeatError as exc:
            res = Result()
            res.respond(ctx.token, share_group_heartbeat_error(exc.code, exc.message))
        return res

    @staticmethod
    def _validate(req) -> None:
        def invalid(msg: str):
            raise HeartbeatError(E.INVALID_REQUEST, msg)
        if _blank(req.group_id):
            invalid("GroupId can't be empty.")
        if _blank(req.member_id):
            invalid("MemberId can't be empty.")
        if req.rack_id is not None and _blank(req.rack_id):
            invalid("RackId can't be empty.")
        if req.member_epoch == 0:
            if not req.subscribed_topic_names:
                invalid("SubscribedTopicNames must be set in first request.")
        elif req.member_epoch < LEAVE_EPOCH:
            invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -1.")
        if req.subscribed_topic_names is not None and any(_blank(t) for t in req.subscribed_topic_names):
            invalid("SubscribedTopicNames can't contain an empty topic name.")

    def _share_group(self, gid: str, create: bool) -> ShareGroup:
        g = self.groups.get(gid)
        if isinstance(g, ShareGroup):
            return g
        if g is not None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
        if not create:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        return ShareGroup(gid)

    def _member(self, g: ShareGroup, mid: str) -> ShareMember:
        member = g.members.get(mid)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {g.group_id}.")
        return member

    def _join_or_heartbeat(self, res: Result, ctx: RequestContext, req) -> None:
        gid, mid, epoch, now = req.group_id, req.member_id, req.member_epoch, ctx.now_ms
        g = self._share_group(gid, create=epoch == 0)
        is_new = mid not in g.members
        if epoch == 0:
            old = g.members.get(mid) or ShareMember(mid)
        else:
            old = self._member(g, mid)
            if epoch not in (old.member_epoch, old.previous_member_epoch):
                raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                                     f"The share group member has a {'greater' if epoch > old.member_epoch else 'smaller'}"
                                     f" member epoch ({epoch}) than the one known by the group coordinator "
                                     f"({old.member_epoch}).")
        updated = old.replace(
            rack_id=req.rack_id if req.rack_id is not None else old.rack_id,
            client_id=ctx.client_id, client_host=ctx.client_host,
            subscribed_topic_names=tuple(sorted(set(req.subscribed_topic_names)))
            if req.subscribed_topic_names is not None else old.subscribed_topic_names)
        if is_new or updated.metadata() != old.metadata():
            res.emit(ShareMemberRecord(gid, mid, updated.rack_id, updated.client_id, updated.client_host,
                                       updated.subscribed_topic_names))
        members = {**g.members, mid: updated}

        # the target assignment for the topics as they are now; a new one bumps the group epoch
        group_epoch, assignment_epoch, targets = g.group_epoch, g.assignment_epoch, g.targets
        new_targets = self._assign(members)
        subscription_changed = updated.subscribed_topic_names != old.subscribed_topic_names
        stale = group_epoch == assignment_epoch and new_targets != {k: targets.get(k, {}) for k in members}
        if group_epoch == 0 or is_new or subscription_changed or stale:
            group_epoch += 1
            res.emit(ShareGroupMetadataRecord(gid, group_epoch))
            res.rebalances.append((gid, "share member joined" if is_new else "share subscription changed"
                                   if subscription_changed else "share metadata changed"))
        if group_epoch > assignment_epoch:
            for tmid in sorted(new_targets):
                if new_targets[tmid] != targets.get(tmid) or tmid not in targets:
                    res.emit(ShareTargetMemberRecord(gid, tmid, freeze(new_targets[tmid])))
            res.emit(ShareTargetMetadataRecord(gid, group_epoch))
            targets, assignment_epoch = new_targets, group_epoch

        # the member takes its target at once
        target = targets.get(mid, {})
        if updated.member_epoch != assignment_epoch or updated.assigned != target or is_new:
            updated = updated.replace(member_epoch=assignment_epoch, previous_member_epoch=updated.member_epoch,
                                      assigned=target)
            res.emit(ShareAssignmentRecord(gid, mid, updated.member_epoch, updated.previous_member_epoch, 0,
                                           freeze(updated.assigned)))
        session_ms, interval_ms = share_timeouts(self.shard.topics, self.config, gid)   # the group's own configs
        res.set_timer(ShareSessionKey(gid, mid), now + session_ms)
        send = epoch == 0 or updated.assigned != old.assigned or updated.member_epoch != epoch
        answer, assignment, topic_partitions = _answer_classes()
        res.respond(ctx.token, answer(
            throttle_time_ms=0, error_code=0, error_message=None, member_id=mid, member_epoch=updated.member_epoch,
            heartbeat_interval_ms=interval_ms,
            assignment=assignment(topic_partitions=[topic_partitions(topic_id=tid, partitions=list(ps))
                                                    for tid, ps in freeze(updated.assigned)]) if send else None))

    def _assign(self, members: dict[str, ShareMember]) -> dict[str, Partitions]:
        topics = {}
        for name in {t for m in members.values() for t in m.subscribed_topic_names}:
            t = self.shard.topics.get(name)
            if t is not None and not getattr(t, "internal", False):
                topics[name] = (t.topic_id, len(t.partitions))
        return assign({mid: frozenset(m.subscribed_topic_names) for mid, m in members.items()}, topics)

    # ---------------------------------------------------------------- leaving, session expiry
    def _leave(self, res: Result, ctx: RequestContext, req) -> None:
        g = self._share_group(req.group_id, create=False)
        member = self._member(g, req.member_id)
        self._remove(res, g, member)
        res.respond(ctx.token, _answer_classes()[0](throttle_time_ms=0, error_code=0, error_message=None,
                                                    member_id=req.member_id, member_epoch=LEAVE_EPOCH,
                                                    heartbeat_interval_ms=0, assignment=None))

    def _remove(self, res: Result, g: ShareGroup, member: ShareMember) -> None:
        """Tombstones for the member's assignment, target and subscription, and one group epoch bump (the next
        heartbeat computes the new target assignment)."""
        gid, mid = g.group_id, member.member_id
        res.emit(ShareAssignmentRecord(gid, mid, tombstone=True))
        res.emit(ShareTargetMemberRecord(gid, mid, tombstone=True))
        res.emit(ShareMemberRecord(gid, mid, tombstone=True))
        res.emit(ShareGroupMetadataRecord(gid, g.group_epoch + 1))
        res.cancel_timer(ShareSessionKey(gid, mid))
        res.rebalances.append((gid, "share member left"))

    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        res = Result()
        g = self.groups.get(key.group_id)
        if not isinstance(g, ShareGroup) or not isinstance(key, ShareSessionKey):
            return res
        member = g.members.get(key.member_id)
        if member is not None:
            self._remove(res, g, member)
        return res

    def loaded(self, res: Result, g: ShareGroup, now_ms: int) -> None:
        """After a load: every member's session restarts."""
        for m in g.members.values():
            res.set_timer(ShareSessionKey(g.group_id, m.member_id),
                          now_ms + share_timeouts(self.shard.topics, self.config, g.group_id)[0])

    # ================================================================ ShareGroupDescribe, inspection (describe.py)
    def describe(self, ctx: RequestContext, req) -> Result:
        return describe_groups(self, ctx, req)

    def info(self, g: ShareGroup) -> GroupInfo:
        return group_info(self, g)

    # ================================================================ the offsets' and admin's rules
    def validate_commit(self, res: Result, g: ShareGroup, ctx: RequestContext, epoch: int, member_id: str,
                        instance_id: str | None, transactional: bool = False) -> tuple[int, None]:
        """A share group commits no offsets (its progress is its share partitions' state): refused as Kafka
        refuses a commit to a group that is not a consumer group."""
        return E.GROUP_ID_NOT_FOUND, None

    def committed(self, res: Result, g: ShareGroup, member: Any, now_ms: int) -> None:
        """Never called: no commit is accepted."""

    def validate_fetch(self, g: ShareGroup, member_id: str | None, epoch: int) -> int:
        return E.GROUP_ID_NOT_FOUND

    @staticmethod
    def offset_delete_error(g: ShareGroup) -> int:
        return E.GROUP_ID_NOT_FOUND

    def subscribed_topics(self, g: ShareGroup) -> set[str] | None:
        return g.subscribed_topics()

    def delete_records(self, g: ShareGroup) -> list:
        """What deleting an empty share group writes."""
        out: list = []
        for mid in sorted(set(g.members) | set(g.targets)):
            out += [ShareAssignmentRecord(g.group_id, mid, tombstone=True),
                    ShareTargetMemberRecord(g.group_id, mid, tombstone=True),
                    ShareMemberRecord(g.group_id, mid, tombstone=True)]
        return out + [ShareTargetMetadataRecord(g.group_id, tombstone=True),
                      ShareGroupMetadataRecord(g.group_id, tombstone=True)]

    def force_rebalance(self, group_id: str, now_ms: int) -> Result:
        raise AdminError(E.INVALID_REQUEST, f"group {group_id!r} is a share group: only classic groups "
                         f"rebalance when forced (a share group's assignment follows its members)")
