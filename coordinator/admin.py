"""The group admin APIs (A1, A2) - DescribeGroups, ListGroups, DeleteGroups - and the operations tenure
offers tests beyond Kafka's wire: a forced rebalance of a static group (the KIP-345 draft's
forceStaticRebalance) and expiring one member's session now."""
from __future__ import annotations

from kafka.protocol.admin.groups import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse

from tenure.protocol.acl import authorized_operations
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import OffsetCommitRecord, StaticMemberEventRecord

from .classic.group import DEAD, EMPTY, STABLE
from .config import AdminError
from .part import ShardPart
from .result import RequestContext, Result


class GroupAdmin(ShardPart):
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
            g = self.classic_group(gid)          # a consumer group is described by ConsumerGroupDescribe
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
        deleted: set[str] = set()            # replay comes after the handler: a repeated id finds it gone
        for gid in req.groups_names:
            g = None if gid in deleted else self.groups.get(gid)
            if g is None or g.state == DEAD:
                out.append(D(group_id=gid, error_code=E.GROUP_ID_NOT_FOUND))
                continue
            if g.state != EMPTY:
                out.append(D(group_id=gid, error_code=E.NON_EMPTY_GROUP))
                continue
            for (topic, part) in sorted(self.offsets.get(gid, {})):
                res.emit(OffsetCommitRecord(gid, topic, part, tombstone=True))
            for iid in sorted(self.static_event_keys.get(gid, ())):       # compaction can drop it all
                res.emit(StaticMemberEventRecord(gid, iid, tombstone=True))
            for r in self.shard.kind_of(g).delete_records(g):
                res.emit(r)
            res.install(gid, None)          # its soft state goes with it
            deleted.add(gid)
            out.append(D(group_id=gid, error_code=0))
        res.respond(ctx.token, DeleteGroupsResponse(throttle_time_ms=0, results=out))
        return res

    def force_rebalance(self, group_id: str, now_ms: int) -> Result:
        """The KIP-345 draft's forceStaticRebalance: one rebalance of a static group, now (the group's kind
        decides; AdminError if it cannot be forced)."""
        live = self.groups.get(group_id)
        if live is None or live.state == DEAD:
            raise AdminError(E.GROUP_ID_NOT_FOUND, f"group {group_id!r} does not exist")
        return self.shard.kind_of(live).force_rebalance(group_id, now_ms)

    def expire_session(self, group_id: str, member: str, now_ms: int) -> Result | None:
        """Expire one member's session now, as if its heartbeats had stopped (`member`: a member id or a
        group.instance.id): the Result of its session timer firing, led by that timer's cancellation. None
        if the group or member is unknown or no session timer of it is armed. As when the timer fires by
        itself, a member parked in a JoinGroup or SyncGroup is not expired (Kafka's rule)."""
        g = self.groups.get(group_id)
        if g is None:
            return None
        kind = self.shard.kind_of(g)
        mid = g.static_members.get(member, member)
        key = kind.session_key(group_id, mid)
        if mid not in g.members or not self.shard.is_armed(key):
            return None
        res = Result()
        res.cancel_timer(key)
        res.merge(kind.on_timer(key, now_ms))
        return res
