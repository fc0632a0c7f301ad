"""ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69) and the consumer group kind's rules for the
offsets and admin parts of a shard.

A heartbeat, in order: validation (42, 112); find or create the group (69 for an unknown group unless the
epoch is 0; an empty classic group is replaced, one with members upgraded when the migration policy allows -
classic_members.py, coordinator/migration.py); find the member (static
membership below) and check its epoch (110); merge what the request changed; bump the group epoch when the
group is new, a subscription changed or the KIP-1101 metadata hash of the subscribed topics changed; when the
group epoch is ahead of the target assignment's, run the assignor; reconcile the member; answer.

Static members: epoch 0 with an instance id whose member is at -2 takes that member over under the new member
id with its partitions and target, with no epoch bump (unless its subscription or the hash changed); so does
one whose member speaks the classic protocol, at any epoch (a classic member sends no leave); a live
consumer-protocol owner (any other epoch) answers UNRELEASED_INSTANCE_ID (111); a non-zero epoch naming an instance another
member id holds answers FENCED_INSTANCE_ID (82). Epoch -2 keeps the member and its partitions, its session
timer running from its last heartbeat: not back in time, it is fenced like any member (tombstones and one
epoch bump). A member leaving or fenced that was the last one speaking the consumer protocol, with classic
members left, turns the group into a classic group instead (the downgrade).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any, ClassVar

from tenure.inspection import GroupInfo
from tenure.protocol import consumer_group as wire
from tenure.protocol.consumer_group_records import (
    ConsumerGroupMetadataRecord,
    ConsumerGroupPartitionMetadataRecord,
    ConsumerMemberRecord,
    CurrentAssignmentRecord,
    RegularExpressionRecord,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
)
from tenure.protocol.error_responses import consumer_group_heartbeat_error
from tenure.protocol.errors import AdminError
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import (
    EXPIRED,
    FENCED,
    JOINED,
    LEFT,
    REPLACED,
    GroupMetadataRecord,
    StaticMemberEventRecord,
)

from ..classic.group import ClassicGroup
from ..handler import ShardHandler
from ..result import RequestContext, Result
from ..timers import (
    ConsumerHoldKey,
    ConsumerJoinKey,
    ConsumerRebalanceKey,
    ConsumerSessionKey,
    ConsumerSyncKey,
    TimerKey,
)
from .assignors import ASSIGNORS, DEFAULT_ASSIGNOR, AssignorMember, TopicInfo
from .classic_members import ClassicMembers
from .describe import describe_groups, group_info
from .expectation import Expectation
from .group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerMember,
    Partitions,
    ResolvedRegex,
    freeze,
    pairs,
)
from .group_config import consumer_timeouts
from .hash import epoch_records, existing
from .reconcile import reconcile
from .regex import InvalidRegex, TopicRegexes, subscribed_union, topic_sets
from .replay import replay_consumer_record


@functools.cache
def _answer_classes() -> tuple[Any, Any, Any]:
    """ConsumerGroupHeartbeat's response, its assignment and topic-partitions classes: built at the first answer
    (protocol/structs.py LazySchemas), not at import."""
    hb = wire.ConsumerGroupHeartbeatResponse
    return hb, hb.Assignment, hb.Assignment.fields["topic_partitions"].data_class


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str, records: tuple = ()) -> None:
        super().__init__(message)
        self.code, self.message, self.records = code, message, records


def _blank(s: str | None) -> bool:
    return s is None or not s.strip()


class ConsumerGroups(ShardHandler):
    """The KIP-848 consumer group kind (coordinator/kinds.py's GroupKind)."""
    name: ClassVar[str] = "consumer"
    group_type: ClassVar[type] = ConsumerGroup
    apis: ClassVar[frozenset[int]] = frozenset({68, 69})
    record_types: ClassVar[tuple[type, ...]] = (
        ConsumerGroupMetadataRecord, ConsumerMemberRecord, TargetAssignmentMetadataRecord, TargetAssignmentMemberRecord,
        CurrentAssignmentRecord, ConsumerGroupPartitionMetadataRecord, RegularExpressionRecord)
    timer_keys: ClassVar[tuple[type, ...]] = (ConsumerSessionKey, ConsumerRebalanceKey, ConsumerJoinKey,
                                               ConsumerSyncKey, ConsumerHoldKey)

    def __init__(self, shard) -> None:
        super().__init__(shard)
        # the shard's regular-expression resolver (regex.py): like the topic-hash cache, a cache over the topic
        # table, not group state
        self.regexes = TopicRegexes(shard.topics)
        # classic-protocol members served inside its groups, and the conversions (online migration)
        self.classic_members = ClassicMembers(self)
        # a new group waiting for the members a test said it starts (expect_group)
        self.expectation = Expectation(self)

    def classic_request(self, api_key: int, ctx: RequestContext, req) -> Result:
        """A classic-protocol request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) to one of its groups."""
        return self.classic_members.handle(api_key, ctx, req)

    def replay(self, record) -> None:
        replay_consumer_record(self.groups, self.offsets, record, self.shard.offsets_only_group)

    def unloaded(self, res: Result, code: int) -> None:
        """Nothing is parked in a consumer group: its members heartbeat again elsewhere."""

    @staticmethod
    def session_key(group_id: str, member_id: str) -> TimerKey:
        return ConsumerSessionKey(group_id, member_id)

    def handlers(self) -> dict[int, Callable[[RequestContext, Any], Result]]:
        return {68: self.heartbeat, 69: self.describe}

    # ================================================================ ConsumerGroupHeartbeat
    def heartbeat(self, ctx: RequestContext, req) -> Result:
        res = Result()
        try:
            self._validate(ctx, req)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                self._leave(res, ctx, req)
            else:
                self._join_or_heartbeat(res, ctx, req)
        except HeartbeatError as exc:
            res = Result()
            for r in exc.records:
                res.emit(r)
            res.respond(ctx.token, consumer_group_heartbeat_error(exc.code, exc.message))
        return res

    @staticmethod
    def _validate(ctx: RequestContext, req) -> None:
        def invalid(msg: str):
            raise HeartbeatError(E.INVALID_REQUEST, msg)
        epoch = req.member_epoch
        if _blank(req.group_id):
            invalid("GroupId can't be empty.")
        if req.instance_id is not None and _blank(req.instance_id):
            invalid("InstanceId can't be empty.")
        if req.rack_id is not None and _blank(req.rack_id):
            invalid("RackId can't be empty.")
        if (ctx.api_version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and _blank(req.member_id):
            invalid("MemberId can't be empty.")
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and getattr(req, "subscribed_topic_regex", None) is None:
                invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                invalid("InstanceId can't be null.")
        elif epoch < STATIC_LEAVE_EPOCH:
            invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                                 f"{', '.join(sorted(ASSIGNORS))}.")

    def _consumer_group(self, res: Result, ctx: RequestContext, gid: str, create: bool) -> ConsumerGroup:
        """The consumer group `gid`: a new one (an empty classic group with a metadata record is replaced, its
        record tombstoned), or a classic group with members upgraded (classic_members.py) when the policy
        and Kafka's conditions allow it - its records emitted to `res`."""
        g = self.groups.get(gid)
        if isinstance(g, ConsumerGroup):
            return g
        if g is not None and g.kind == "share":          # a share group is never converted
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        if g is None and not create:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if g is not None and not g.is_empty():
            assert isinstance(g, ClassicGroup), "a group of a third kind"
            if not create or self.classic_members.upgrade_refusal(g) is not None:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group")
            try:
                return self.classic_members.upgrade(res, ctx, g)
            except ValueError:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND,
                                     f"Cannot upgrade the classic group {gid} to consumer group because the embedded "
                                     f"consumer protocol is malformed.") from None
        # a new group; an empty classic group with a metadata record is converted (its record tombstoned)
        if g is not None and (g.generation > 0 or g.protocol_type):
            res.emit(GroupMetadataRecord(gid, tombstone=True))
        return ConsumerGroup(gid)

    def _join_or_heartbeat(self, res: Result, ctx: RequestContext, req) -> None:
        gid, epoch, mid, iid = req.group_id, req.member_epoch, req.member_id, req.instance_id
        g = self._consumer_group(res, ctx, gid, create=epoch == 0)
        replaced: ConsumerMember | None = None
        member: ConsumerMember | None = None
        if epoch == 0:
            if iid is not None and iid in g.static_members:
                holder = g.members[g.static_members[iid]]
                # live, even under the same member id; a classic holder is replaced at once (it sends no leave)
                if holder.member_epoch != STATIC_LEAVE_EPOCH and holder.classic is None:
                    raise HeartbeatError(E.UNRELEASED_INSTANCE_ID,
                                         f"Static member {mid or '(new)'} with instance id {iid} cannot join "
                                         f"the group because the instance id is owned by {holder.member_id} "
                                         f"member.")
                if holder.member_id == mid:                            # back under its own member id
                    member = holder.replace(member_epoch=0, previous_member_epoch=0)
                else:                                                  # takes over the member at -2
                    replaced = holder
                    member = holder.replace(member_id=mid or self.shard.new_member_id(ctx.client_id or "consumer"),
                                            member_epoch=0, previous_member_epoch=0)
            elif not _blank(mid) and mid in g.members:
                # a known member id rejoining (fenced, or its join's answer lost): Kafka (KAFKA-19233) accepts epoch
                # 0 and reconciles from where the member is - owning nothing now, what it had to revoke is revoked
                member = g.members[mid]
            if member is None:
                if self.config.max_group_size is not None and len(g.members) >= self.config.max_group_size:
                    raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED,
                                         f"The consumer group has reached its maximum capacity of "
                                         f"{self.config.max_group_size} members.")
                member = ConsumerMember(mid or self.shard.new_member_id(ctx.client_id or "consumer"))
        else:
            member = self._member(g, mid, iid, ctx)
            self._check_epoch(member, epoch, req.topic_partitions)
        is_new = member.member_id not in g.members and replaced is None
        old = member
        regex = getattr(req, "subscribed_topic_regex", None)     # v1+; "" is none (librdkafka sends it with names)

        # merge what the request changed (null / -1: unchanged)
        member = member.replace(
            instance_id=iid if iid is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=self._shared_names(g, req.subscribed_topic_names)
            if req.subscribed_topic_names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=(regex or None) if regex is not None else member.subscribed_topic_regex,
            client_id=ctx.client_id, client_host=ctx.client_host, classic=None)
        owned = None if req.topic_partitions is None else {
            (t.topic_id, p) for t in req.topic_partitions for p in t.partitions}
        updated, interval_ms = self.update_member(res, ctx, g, member, old, is_new, replaced, owned)

        full = epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                              and req.topic_partitions is not None)
        send = full or updated.assigned != old.assigned
        answer, assignment, topic_partitions = _answer_classes()
        res.respond(ctx.token, answer(
            throttle_time_ms=0, error_code=0, error_message=None, member_id=updated.member_id,
            member_epoch=updated.member_epoch, heartbeat_interval_ms=interval_ms,
            assignment=assignment(topic_partitions=[topic_partitions(topic_id=tid, partitions=list(ps))
                                                    for tid, ps in freeze(updated.assigned)]) if send else None))

    @staticmethod
    def expected_member_record(req, client_id: str, client_host: str) -> ConsumerMemberRecord | None:
        """The member metadata record a first join (epoch 0, v1+: the client names its member id) of a member
        new to its group writes, made from the request alone (None for any other heartbeat): what
        `_join_or_heartbeat` makes of a new ConsumerMember with the request's fields. It is a guess, made to
        encode a large subscription's record off the loop (group_runtime.py); the writer uses that encoding
        only for a record equal to it, so a member that turns out to be known, static or refused costs
        nothing but the guess."""
        if req.member_epoch != 0 or _blank(req.member_id) or req.subscribed_topic_names is None:
            return None
        regex = getattr(req, "subscribed_topic_regex", None)
        return ConsumerMemberRecord(
            req.group_id, req.member_id, instance_id=req.instance_id, rack_id=req.rack_id, client_id=client_id,
            client_host=client_host, subscribed_topic_names=tuple(dict.fromkeys(sorted(req.subscribed_topic_names))),
            subscribed_topic_regex=regex or None, rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=req.server_assignor)

    @staticmethod
    def _shared_names(g: ConsumerGroup, names: list[str]) -> tuple[str, ...]:
        """A subscription as the sorted tuple of its names; another member's equal tuple if there is one, so the
        members of a group subscribing the same names share one copy (and the group's union counts it once)."""
        shared = {id(m.subscribed_topic_names): m.subscribed_topic_names for m in g.members.values()}.values()
        for theirs in shared:                # names sent as another member's, in its (sorted) order: no sort
            if len(theirs) == len(names) and theirs == tuple(names):
                return theirs
        mine = tuple(dict.fromkeys(sorted(names)))     # sorted, each name once (a sorted list sorts in one pass)
        for theirs in shared:
            if len(theirs) == len(mine) and theirs == mine:
                return theirs
        return mine

    def update_member(self, res: Result, ctx: RequestContext, g: ConsumerGroup, member: ConsumerMember,
                      old: ConsumerMember, is_new: bool, replaced: ConsumerMember | None,
                      owned: set | None) -> tuple[ConsumerMember, int]:
        """The steps every member's join or heartbeat shares, whatever protocol it speaks: its subscription
        record, the group epoch, the target assignment, its reconciliation (`owned`: the partitions it says it
        holds, None if it did not say) and its timers. (The reconciled member, the heartbeat interval.)"""
        gid, now = g.group_id, ctx.now_ms
        iid = member.instance_id
        members = dict(g.members)
        targets = dict(g.targets)
        if replaced is not None:
            del members[replaced.member_id]
            targets[member.member_id] = targets.pop(replaced.member_id, {})
            self._tombstones(res, gid, replaced.member_id)
            self.cancel_member_timers(res, gid, replaced.member_id)
            assert iid is not None, "only a static member is replaced"
            res.emit(self.member_event(g, iid, REPLACED, replaced.member_id, member.member_id, ctx))
        elif is_new and member.instance_id is not None:
            res.emit(self.member_event(g, member.instance_id, JOINED, None, member.member_id, ctx))
        members[member.member_id] = member
        # the regular expressions (regex.py): a new one is checked (128) and resolved, all are refreshed when due
        brought = member.subscribed_topic_regex if member.subscribed_topic_regex != old.subscribed_topic_regex \
            or is_new else None
        try:
            regexes = self.regexes.update(g, members, now, brought)
        except InvalidRegex as exc:
            raise HeartbeatError(E.INVALID_REGULAR_EXPRESSION, exc.message) from None
        if is_new or replaced is not None or not member.same_metadata(old):
            res.emit(self._member_record(gid, member))
        for r in regexes.records:
            res.emit(r)

        # the group epoch: bumped for a new group, a changed subscription, a regular expression resolved to other
        # topics or a changed metadata hash - once, whatever the number of reasons
        subscription_changed = is_new or (member.subscribed_topic_names, member.subscribed_topic_regex) != (
            old.subscribed_topic_names, old.subscribed_topic_regex)
        group_epoch = g.group_epoch
        subscribed = self._subscribed(members, regexes.resolved)
        if g.group_epoch == 0 or subscription_changed or regexes.changed or self.metadata_changed(g, subscribed):
            group_epoch = g.group_epoch + 1
            for r in self.epoch_records(g, group_epoch, subscribed):
                res.emit(r)
            res.rebalances.append((gid, "consumer member joined" if is_new else "consumer subscription changed"
                                   if subscription_changed else "consumer regex resolution changed"
                                   if regexes.changed else "consumer metadata changed"))
            if subscription_changed or regexes.changed:
                self._retain_hashes(gid, members, regexes.resolved)

        # the target assignment, when the group epoch is ahead of it - unless a new group waits for the members a
        # test said it starts (expectation.py)
        assignment_epoch = g.assignment_epoch
        held = self.expectation.hold(res, g, members, group_epoch, now)
        if held is not None:
            assignment_epoch = held
        elif group_epoch > assignment_epoch:
            self.expectation.computed(res, g, members)
            new_targets = self.assign(members, targets, regexes.resolved)
            for tmid in sorted(new_targets):
                if new_targets[tmid] != targets.get(tmid, {}) or tmid == member.member_id and replaced is not None:
                    res.emit(TargetAssignmentMemberRecord(gid, tmid, freeze(new_targets[tmid])))
            res.emit(TargetAssignmentMetadataRecord(gid, group_epoch))
            targets, assignment_epoch = new_targets, group_epoch
        elif replaced is not None:
            res.emit(TargetAssignmentMemberRecord(gid, member.member_id, freeze(targets[member.member_id])))

        # reconcile this member
        ignore = {member.member_id} | ({replaced.member_id} if replaced is not None else set())

        def owned_elsewhere(tp) -> bool:
            holder = g.owners.get(tp)
            return holder is not None and holder not in ignore

        updated = reconcile(member, targets.get(member.member_id, {}), assignment_epoch, owned, owned_elsewhere)
        if is_new or replaced is not None or not updated.same_assignment(old):
            res.emit(self._assignment_record(gid, updated))
        rebalance_key = ConsumerRebalanceKey(gid, updated.member_id)
        if updated.classic is not None:         # a classic member has join and sync timers instead (Kafka)
            res.cancel_timer(rebalance_key)
        elif updated.state == UNREVOKED_PARTITIONS:
            if old.state != UNREVOKED_PARTITIONS or old.member_epoch != updated.member_epoch or is_new:
                res.set_timer(rebalance_key, now + max(updated.rebalance_timeout_ms, 0))
        elif old.state == UNREVOKED_PARTITIONS:
            res.cancel_timer(rebalance_key)
        _, interval_ms = consumer_timeouts(self.shard.topics, self.config, gid)    # the group's own configs
        if held is not None:                   # waiting for the expected members: come back soon
            interval_ms = self.expectation.interval(interval_ms)
        res.set_timer(ConsumerSessionKey(gid, updated.member_id), now + self.session_ms(gid, updated))
        return updated, interval_ms

    def session_ms(self, gid: str, m: ConsumerMember) -> int:
        """A member's session timeout: a classic member's own (its JoinGroup's), else the group's."""
        if m.classic is not None:
            return m.classic.session_timeout_ms
        return consumer_timeouts(self.shard.topics, self.config, gid)[0]

    def _member(self, g: ConsumerGroup, mid: str, iid: str | None, ctx: RequestContext) -> ConsumerMember:
        """The member a non-zero epoch names: its instance id must be held by that member id (82, with a
        `fenced` event; an instance nobody holds is 25), and the member must exist (25)."""
        if iid is not None:
            holder_id = g.static_members.get(iid)
            if holder_id is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {iid} is unknown.")
            if holder_id != mid:
                raise HeartbeatError(E.FENCED_INSTANCE_ID,
                                     f"Static member {mid} with instance id {iid} was fenced by member {holder_id}.",
                                     (self.member_event(g, iid, FENCED, mid, holder_id, ctx),))
        member = g.members.get(mid)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {g.group_id}.")
        return member

    @staticmethod
    def _check_epoch(member: ConsumerMember, epoch: int, owned_topics) -> None:
        if epoch > member.member_epoch:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a greater member epoch ({epoch}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon all its "
                                 f"partitions and rejoin.")
        if epoch < member.member_epoch:
            # a lost response: the previous epoch is accepted if the member owns nothing it was not given
            if epoch == member.previous_member_epoch and owned_topics is not None and {
                    (t.topic_id, p) for t in owned_topics for p in t.partitions} <= pairs(member.assigned):
                return
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon all its "
                                 f"partitions and rejoin.")

    # ---------------------------------------------------------------- leaving
    def _leave(self, res: Result, ctx: RequestContext, req) -> None:
        gid, mid, iid, epoch = req.group_id, req.member_id, req.instance_id, req.member_epoch
        g = self._consumer_group(res, ctx, gid, create=False)
        member = self._member(g, mid, iid, ctx)
        if epoch == STATIC_LEAVE_EPOCH:
            # will rejoin: keeps its partitions (owned, nobody else gets them) and the group epoch; its session
            # timer is not reset - it keeps running from the member's last heartbeat, as Kafka's
            away = member.replace(member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=member.member_epoch,
                                  pending_revocation={})
            res.emit(self._assignment_record(gid, away))
            res.cancel_timer(ConsumerRebalanceKey(gid, mid))
        else:
            self._remove(res, g, member, LEFT, ctx.client_id, ctx.client_host, ctx.now_ms)
        res.respond(ctx.token, _answer_classes()[0](throttle_time_ms=0, error_code=0, error_message=None,
                                                    member_id=mid, member_epoch=epoch, heartbeat_interval_ms=0,
                                                    assignment=None))

    def _remove(self, res: Result, g: ConsumerGroup, member: ConsumerMember, cause: str, client_id: str,
                client_host: str, now_ms: int) -> None:
        self.remove_members(res, g, [member], cause, client_id, client_host, now_ms)

    def remove_members(self, res: Result, g: ConsumerGroup, leaving: list[ConsumerMember], cause: str,
                       client_id: str, client_host: str, now_ms: int) -> None:
        """Fence or remove members: tombstones for their assignment, target and subscription, and one group
        epoch bump (the next heartbeat computes the new target assignment) - or, when they are the last
        members speaking the consumer protocol and the others speak the classic one, the downgrade of the
        group to a classic group (coordinator/migration.py), as Kafka's consumerGroupFenceMember does."""
        gid = g.group_id
        gone = {m.member_id for m in leaving}
        for member in leaving:
            self.cancel_member_timers(res, gid, member.member_id)
            if member.instance_id is not None:
                res.emit(StaticMemberEventRecord(gid, member.instance_id, cause, member.member_id, None,
                                                 g.group_epoch, now_ms, client_id, client_host))
        if self.classic_members.may_downgrade(g, gone):
            self.classic_members.downgrade(res, g, gone, now_ms)
            return
        for member in leaving:
            self._tombstones(res, gid, member.member_id)
        rest = {k: v for k, v in g.members.items() if k not in gone}
        for regex in sorted({m.subscribed_topic_regex for m in leaving if m.subscribed_topic_regex}):
            if regex in g.regexes and all(m.subscribed_topic_regex != regex for m in rest.values()):
                res.emit(RegularExpressionRecord(gid, regex, tombstone=True))     # its last subscriber
        resolved = {r: v for r, v in g.regexes.items() if any(m.subscribed_topic_regex == r for m in rest.values())}
        if not resolved:
            self.regexes.forget(gid)
        for r in self.epoch_records(g, g.group_epoch + 1, self._subscribed(rest, resolved)):
            res.emit(r)
        self._retain_hashes(gid, rest, resolved)
        res.rebalances.append((gid, f"consumer member {cause}"))

    @staticmethod
    def cancel_member_timers(res: Result, gid: str, mid: str) -> None:
        """Every timer a member of a consumer group may have (Kafka's cancelTimers)."""
        for key in (ConsumerSessionKey, ConsumerRebalanceKey, ConsumerJoinKey, ConsumerSyncKey):
            res.cancel_timer(key(gid, mid))

    @staticmethod
    def _tombstones(res: Result, gid: str, mid: str) -> None:
        res.emit(CurrentAssignmentRecord(gid, mid, tombstone=True))
        res.emit(TargetAssignmentMemberRecord(gid, mid, tombstone=True))
        res.emit(ConsumerMemberRecord(gid, mid, tombstone=True))

    # ---------------------------------------------------------------- timers
    def on_timer(self, key: TimerKey, now_ms: int) -> Result:
        res = Result()
        g = self.groups.get(key.group_id)
        if isinstance(key, ConsumerHoldKey):
            return self.expectation.expired(g, now_ms) if isinstance(g, ConsumerGroup) else res
        if not isinstance(g, ConsumerGroup) or not isinstance(
                key, (ConsumerSessionKey, ConsumerRebalanceKey, ConsumerJoinKey, ConsumerSyncKey)):
            return res
        member = g.members.get(key.member_id)
        if member is None:
            return res
        if isinstance(key, ConsumerRebalanceKey) and member.state != UNREVOKED_PARTITIONS:
            return res
        # a classic member that did not rejoin (ConsumerJoinKey) or sync (ConsumerSyncKey) in time is fenced
        self._remove(res, g, member, EXPIRED, member.client_id, member.client_host, now_ms)
        return res

    def loaded(self, res: Result, g: ConsumerGroup, now_ms: int) -> None:
        """After a load: every member's session restarts (a static member at -2 keeps its place that long); a
        new group waiting for its expected members waits the delay again."""
        self.expectation.loaded(res, g, now_ms)
        for m in g.members.values():
            res.set_timer(ConsumerSessionKey(g.group_id, m.member_id), now_ms + self.session_ms(g.group_id, m))
            if m.state == UNREVOKED_PARTITIONS and m.classic is None:
                res.set_timer(ConsumerRebalanceKey(g.group_id, m.member_id), now_ms + max(m.rebalance_timeout_ms, 0))

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _subscribed(members: dict[str, ConsumerMember], resolved: dict[str, ResolvedRegex]) -> frozenset[str]:
        return subscribed_union(members.values(), resolved)

    # ---------------------------------------------------------------- the subscribed topics' metadata, by release
    def metadata_changed(self, g: ConsumerGroup, subscribed: AbstractSet[str]) -> bool:
        """Whether the subscribed topics' metadata differs from what the group keeps: its KIP-1101 hash (4.1+:
        a topic's id, name, partition count or racks), or as Kafka 4.0 its subscription metadata (id, name and
        partition count only)."""
        topics = self.shard.topic_hashes
        if self.shard.config.consumer_group_metadata_hash:
            return topics.group_hash(subscribed) != g.metadata_hash
        return topics.subscription_metadata(subscribed) != g.subscription_metadata

    def epoch_records(self, g: ConsumerGroup, epoch: int, subscribed: AbstractSet[str]) -> list:
        """The records of a group epoch bump to `epoch` for these subscribed topics. 4.1+ (KIP-1101): the
        ConsumerGroupMetadata record with the metadata hash, then the tombstone of a ConsumerGroupPartitionMetadata
        record a 4.0 coordinator left in the log. As 4.0: a ConsumerGroupPartitionMetadata record first when the
        subscribed topics' metadata changed, then the ConsumerGroupMetadata record without hash."""
        return epoch_records(self.shard.config.consumer_group_metadata_hash, self.shard.topic_hashes, g.group_id,
                             epoch, subscribed, g.subscription_metadata, g.has_subscription_metadata_record)

    def _retain_hashes(self, gid: str, members: dict[str, ConsumerMember],
                       resolved: dict[str, ResolvedRegex]) -> None:
        """After a group's subscriptions changed (an epoch bump): the shard's topic-hash cache keeps only the
        topics some consumer group of the shard still subscribes to."""
        subscribed = subscribed_union(members.values(), resolved).union(*(
            other.subscribed_topics() for other in self.groups.values()
            if isinstance(other, ConsumerGroup) and other.group_id != gid))
        self.shard.topic_hashes.retain(subscribed)

    def _topics(self, names) -> dict[str, TopicInfo]:
        out = {}
        for name in existing(self.shard.topics, names):
            t = self.shard.topics.get(name)
            if t is not None:
                out[name] = TopicInfo(t.topic_id, len(t.partitions))
        return out

    def assign(self, members: dict[str, ConsumerMember], targets: dict[str, Partitions],
                resolved: dict[str, ResolvedRegex]) -> dict[str, Partitions]:
        subscribed = topic_sets(members.values(), resolved)
        topics = self._topics(subscribed_union(members.values(), resolved))
        wanted = [m.server_assignor for m in members.values() if m.server_assignor is not None]
        name = max(sorted(set(wanted)), key=wanted.count) if wanted else DEFAULT_ASSIGNOR
        kept: dict[int, frozenset[str]] = {}          # the existing topics of each distinct subscription, once

        def existing_of(names: frozenset[str]) -> frozenset[str]:
            got = kept.get(id(names))                 # (the sets live as long as `subscribed`)
            if got is None:
                got = kept[id(names)] = frozenset(t for t in topics if t in names) if len(topics) < len(names) \
                    else frozenset(names & topics.keys())
            return got
        out = ASSIGNORS[name]([AssignorMember(mid, m.instance_id, existing_of(subscribed[mid]),
                                              targets.get(mid, {})) for mid, m in sorted(members.items())], topics)
        return {mid: out.get(mid, {}) for mid in members}

    @staticmethod
    def _member_record(gid: str, m: ConsumerMember) -> ConsumerMemberRecord:
        return ConsumerMemberRecord(gid, m.member_id, **m.metadata())

    @staticmethod
    def _assignment_record(gid: str, m: ConsumerMember) -> CurrentAssignmentRecord:
        return CurrentAssignmentRecord(gid, m.member_id, m.member_epoch, m.previous_member_epoch, m.state,
                                       freeze(m.assigned), freeze(m.pending_revocation))

    @staticmethod
    def member_event(g: ConsumerGroup, iid: str, cause: str, old: str | None, new: str | None,
               ctx: RequestContext) -> StaticMemberEventRecord:
        return StaticMemberEventRecord(g.group_id, iid, cause, old, new, g.group_epoch, ctx.now_ms, ctx.client_id,
                                       ctx.client_host)

    # ================================================================ ConsumerGroupDescribe, inspection (describe.py)
    def describe(self, ctx: RequestContext, req) -> Result:
        return describe_groups(self, ctx, req)

    def info(self, g: ConsumerGroup) -> GroupInfo:
        return group_info(self, g)

    # ================================================================ the offsets' and admin's rules
    def validate_commit(self, res: Result, g: ConsumerGroup, ctx: RequestContext, epoch: int, member_id: str,
                        instance_id: str | None, transactional: bool = False) -> tuple[int, ConsumerMember | None]:
        """A commit to a consumer group: without a member (epoch < 0, no member id) only while the group is
        empty (an admin's commit); else the member must exist, commit with OffsetCommit v9+ (TxnOffsetCommit:
        any version that names it) and carry its current member epoch (else STALE_MEMBER_EPOCH, 113)."""
        if epoch < 0 and not member_id and instance_id is None:
            return (E.NONE, None) if g.is_empty() else (E.UNKNOWN_MEMBER_ID, None)
        member = g.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID, None
        if member.classic is not None:       # a classic member (online migration): any version, its generation
            return (E.ILLEGAL_GENERATION, None) if epoch != member.member_epoch else (E.NONE, member)
        if not transactional and ctx.api_version < 9:
            return E.UNSUPPORTED_VERSION, None
        if epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH, None
        return E.NONE, member

    def committed(self, res: Result, g: ConsumerGroup, member: ConsumerMember, now_ms: int) -> None:
        """A consumer group member's commit does not keep its session alive (heartbeats do)."""

    def validate_fetch(self, g: ConsumerGroup, member_id: str | None, epoch: int) -> int:
        """OffsetFetch v9+ naming a member: it must exist (25) and carry its current epoch (113)."""
        if member_id is None or epoch < 0:
            return E.NONE
        member = g.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        return E.STALE_MEMBER_EPOCH if epoch != member.member_epoch else E.NONE

    @staticmethod
    def offset_delete_error(g: ConsumerGroup) -> int:
        return E.NONE

    def subscribed_topics(self, g: ConsumerGroup) -> set[str] | None:
        return g.subscribed_topics()

    def delete_records(self, g: ConsumerGroup) -> list:
        """What deleting an empty consumer group writes after its offsets' tombstones."""
        out = []
        for mid in sorted(set(g.members) | set(g.targets)):
            out += [CurrentAssignmentRecord(g.group_id, mid, tombstone=True),
                    TargetAssignmentMemberRecord(g.group_id, mid, tombstone=True),
                    ConsumerMemberRecord(g.group_id, mid, tombstone=True)]
        out += [RegularExpressionRecord(g.group_id, r, tombstone=True) for r in sorted(g.regexes)]
        out.append(TargetAssignmentMetadataRecord(g.group_id, tombstone=True))
        # Kafka 4.0 always tombstones the subscription metadata (type 4); from 4.1 only one still in the log
        if g.has_subscription_metadata_record or not self.shard.config.consumer_group_metadata_hash:
            out.append(ConsumerGroupPartitionMetadataRecord(g.group_id, tombstone=True))
        return out + [ConsumerGroupMetadataRecord(g.group_id, tombstone=True)]

    def force_rebalance(self, group_id: str, now_ms: int) -> Result:
        raise AdminError(E.INVALID_REQUEST, f"group {group_id!r} is a consumer group: only classic groups "
                         f"rebalance when forced (a consumer group's assignment follows its members)")
