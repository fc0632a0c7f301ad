"""The group admin APIs of every kind (A2) - ListGroups, DeleteGroups - and the operations tenure
offers tests beyond Kafka's wire: a forced rebalance of a static group (the KIP-345 draft's
forceStaticRebalance) and expiring one member's session now. DescribeGroups (A1) is the classic kind's
(classic/describe.py), as ConsumerGroupDescribe is the consumer kind's."""
from __future__ import annotations

from kafka.protocol.admin.groups import DeleteGroupsResponse, ListGroupsResponse

from tenure.protocol.acl import DELETE, DESCRIBE, GROUP
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import OffsetCommitRecord, StaticMemberEventRecord

from .classic.group import DEAD, EMPTY
from .config import AdminError
from .handler import ShardHandler
from .result import RequestContext, Result


class GroupAdmin(ShardHandler):
    def list_groups(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v = ctx.api_version
        states = {s.lower() for s in (req.states_filter or [])} if v >= 4 else set()
        types = {t.lower() for t in (req.types_filter or [])} if v >= 5 else set()
        L = ListGroupsResponse.ListedGroup
        every = ctx.allows_cluster(DESCRIBE)     # as Kafka: DESCRIBE on the cluster, else the describable groups
        out = [L(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state,
                 group_type=g.kind)
               for g in self.groups.values()
               if (not states or g.state.lower() in states) and (not types or g.kind in types)
               and (every or ctx.allows(DESCRIBE, GROUP, g.group_id))]
        res.respond(ctx.token, ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=out))
        return res

    def delete_groups(self, ctx: RequestContext, req) -> Result:
        res = Result()
        D = DeleteGroupsResponse.DeletableGroupResult
        out = []
        deleted: set[str] = set()            # replay comes after the handler: a repeated id finds it gone
        for gid in req.groups_names:
            if not ctx.allows(DELETE, GROUP, gid):
                out.append(D(group_id=gid, error_code=E.GROUP_AUTHORIZATION_FAILED))
                continue
            g = None if gid in deleted else self.groups.get(gid)
            if g is None or g.state == DEAD:
                out.append(D(group_id=gid, error_code=E.GROUP_ID_NOT_FOUND))
                continue
            if g.state != EMPTY:
                out.append(D(group_id=gid, error_code=E.NON_EMPTY_GROUP))
                continue
            # as Kafka's deleteAllOffsets: the committed offsets and those an open transaction holds (its
            # marker must not bring one back after the group is gone)
            for (topic, part) in sorted(set(self.offsets.get(gid, {})) | self.shard.pending_partitions(gid)):
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
