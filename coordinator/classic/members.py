"""The requests of a group's members between joins: SyncGroup (S1-S3), Heartbeat (H1), LeaveGroup
(L1-L4)."""
from __future__ import annotations

from kafka.protocol.consumer.group import LeaveGroupResponse

from tenure.protocol import records as rec
from tenure.protocol.error_responses import heartbeat_error, leave_group_error, sync_group_error
from tenure.protocol.errors import ErrorCode as E

from ..result import RequestContext, Result
from ..timers import PendingKey, SyncKey
from .group import DEAD, EMPTY, PREPARING_REBALANCE, STABLE, Parked
from .rebalance import Rebalance


class MemberRequests(Rebalance):
    def sync_group(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid, mid = ctx.api_version, req.group_id, req.member_id
        iid = req.group_instance_id if v >= 3 else None

        def error(code: int) -> Result:
            res.respond(ctx.token, sync_group_error(code))
            return res

        if not gid:
            return error(E.INVALID_GROUP_ID)
        live = self.classic_group(gid)
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
            res.respond(ctx.token, self._sync_ok(g, g.members[mid].assignment))
            self._reset_heartbeat(res, g, g.members[mid], ctx.now_ms)
        else:                                                              # S2: CompletingRebalance
            g.syncs[mid] = Parked(ctx.token, v, ctx.client_id or "", ctx.client_host)
            if mid == g.leader_id:
                given = {a.member_id: bytes(a.assignment) for a in req.assignments}
                for m in g.members.values():
                    m.assignment = given.get(m.member_id, b"")
                res.emit(self._group_record(g, ctx.now_ms))
                g.transition(STABLE, ctx.now_ms)
                for pmid, p in g.syncs.items():
                    m = g.members[pmid]
                    res.respond(p.token, self._sync_ok(g, m.assignment))
                    self._reset_heartbeat(res, g, m, ctx.now_ms)
                g.syncs = {}
        if not g.pending_sync:
            res.cancel_timer(SyncKey(gid))
        res.install(g.group_id, g)
        return res

    def heartbeat(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid, mid = ctx.api_version, req.group_id, req.member_id
        iid = req.group_instance_id if v >= 3 else None
        g = self.classic_group(gid)
        code: int
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
                    res.install(g.group_id, g)
                if g.state == PREPARING_REBALANCE:
                    code = E.REBALANCE_IN_PROGRESS
        res.respond(ctx.token, heartbeat_error(code))                     # 0 included: the answer is its code
        return res

    def leave_group(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid = ctx.api_version, req.group_id
        R = LeaveGroupResponse
        identities = ([(req.member_id, None)] if v < 3
                      else [(m.member_id, m.group_instance_id) for m in req.members])

        def answer(top: int, per: list[tuple[str, str | None, int]]) -> Result:
            if v < 3 or not per:                  # before v3 one member: its code is the request's
                res.respond(ctx.token, leave_group_error(top or (per[0][2] if per else 0)))
            else:
                res.respond(ctx.token, R(throttle_time_ms=0, error_code=top, members=[
                    R.MemberResponse(member_id=m, group_instance_id=i, error_code=c) for m, i, c in per]))
            return res

        if not gid:
            return answer(E.INVALID_GROUP_ID, [])
        live = self.classic_group(gid)
        if live is None:                                                   # L1
            return answer(0, [(m, i, E.UNKNOWN_MEMBER_ID) for m, i in identities])
        if live.state == DEAD:
            return answer(E.COORDINATOR_NOT_AVAILABLE, [])
        g = live.copy()
        per: list[tuple[str, str | None, int]] = []
        changed = ""                         # the cause of the rebalance the batch starts, once it changes anything
        for mid, iid in identities:                                        # L2
            target = None
            code: int
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
            res.install(g.group_id, g)
        return answer(0, per)
