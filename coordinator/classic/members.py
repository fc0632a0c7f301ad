"""The requests of a group's members between joins: SyncGroup (S1-S3), Heartbeat (H1), LeaveGroup
(L1-L4); and what a member's session timer does when it fires (T2).

`MemberRequests` is one part of the classic group kind, over the rebalance machinery and the draft's options
(the registration timeout) it is handed."""
from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.consumer.group import LeaveGroupResponse

from tenure.protocol import records as rec
from tenure.protocol.error_responses import leave_group_error, shared_heartbeat_answer, sync_group_error
from tenure.protocol.errors import ErrorCode as E

from ..result import RequestContext, Result
from ..timers import PendingKey, SyncKey
from .group import DEAD, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup, Parked, request_ids
from .options import DraftOptions
from .rebalance import Rebalance
from .static import fenced


@dataclass(frozen=True)
class MemberRequests:
    """SyncGroup, Heartbeat, LeaveGroup and the session timer, over the rebalance machinery and the options."""
    rebalance: Rebalance
    options: DraftOptions

    def _other_kind(self, api_key: int, ctx: RequestContext, req) -> Result | None:
        """A request naming a group of another kind (a KIP-848 consumer group serving classic members during
        an online migration): its kind's answer; None for a classic group or an unknown one."""
        other = self.rebalance.groups.get(req.group_id)
        if other is None or isinstance(other, ClassicGroup):
            return None
        return self.rebalance.shard.kind_of(other).classic_request(api_key, ctx, req)

    def sync_group(self, ctx: RequestContext, req) -> Result:
        res = Result()
        rb = self.rebalance
        v, gid, mid, iid = request_ids(ctx, req, 3)

        def error(code: int) -> Result:
            res.respond(ctx.token, sync_group_error(code))
            return res

        if not gid:
            return error(E.INVALID_GROUP_ID)
        if (served := self._other_kind(14, ctx, req)) is not None:
            return served
        live = rb.group(gid)
        if live is None:
            return error(E.UNKNOWN_MEMBER_ID)
        if live.state == DEAD:
            return error(E.COORDINATOR_NOT_AVAILABLE)
        code = rb.validate_member(live, mid, iid)
        if code == E.FENCED_INSTANCE_ID:
            fenced(res, live, iid, mid, ctx)
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
            res.respond(ctx.token, rb.sync_ok(g, g.members[mid].assignment))
            rb.reset_heartbeat(res, g, g.members[mid], ctx.now_ms)
        else:                                                              # S2: CompletingRebalance
            g.syncs[mid] = Parked(ctx.token, v, ctx.client_id or "", ctx.client_host)
            if mid == g.leader_id:
                given = {a.member_id: bytes(a.assignment) for a in req.assignments}
                for m in g.members.values():
                    m.assignment = given.get(m.member_id, b"")
                res.emit(rb.group_record(g, ctx.now_ms))
                g.transition(STABLE, ctx.now_ms)
                for pmid, p in g.syncs.items():
                    m = g.members[pmid]
                    res.respond(p.token, rb.sync_ok(g, m.assignment))
                    rb.reset_heartbeat(res, g, m, ctx.now_ms)
                g.syncs = {}
        if not g.pending_sync:
            res.cancel_timer(SyncKey(gid))
        res.install(g.group_id, g)
        return res

    def heartbeat(self, ctx: RequestContext, req) -> Result:
        res = Result()
        rb = self.rebalance
        # request_ids(ctx, req, 3) and _other_kind(12, ...), written out: every member's heartbeat comes here
        gid, mid = req.group_id, req.member_id
        iid = req.group_instance_id if ctx.api_version >= 3 else None
        g = rb.shard.groups.get(gid) if gid else None
        if g is not None and not isinstance(g, ClassicGroup):     # a consumer group's classic member: its kind's
            return rb.shard.kind_of(g).classic_request(12, ctx, req)
        code: int
        if not gid:
            code = E.INVALID_GROUP_ID
        elif g is None:
            code = E.UNKNOWN_MEMBER_ID
        elif g.state == DEAD:
            code = E.COORDINATOR_NOT_AVAILABLE
        else:
            code = rb.validate_member(g, mid, iid)
            if code == E.FENCED_INSTANCE_ID:
                fenced(res, g, iid, mid, ctx)
            if not code and req.generation_id != g.generation:
                code = E.ILLEGAL_GENERATION
            if not code and g.state == EMPTY:
                code = E.UNKNOWN_MEMBER_ID
            if not code:
                rb.reset_heartbeat(res, g, g.members[mid], ctx.now_ms)
                if mid in g.offline_since:                   # alive after all (registration timeout)
                    g = g.copy()
                    del g.offline_since[mid]
                    self.options.arm_registration(res, g)
                    res.install(g.group_id, g)
                if g.state == PREPARING_REBALANCE:
                    code = E.REBALANCE_IN_PROGRESS
        res.respond(ctx.token, shared_heartbeat_answer(code))             # 0 included: the answer is its code
        return res

    def leave_group(self, ctx: RequestContext, req) -> Result:
        res = Result()
        rb = self.rebalance
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
        if (served := self._other_kind(13, ctx, req)) is not None:
            return served
        live = rb.group(gid)
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
                code = rb.validate_member(g, mid, iid)
                if code == E.FENCED_INSTANCE_ID:
                    fenced(res, g, iid, mid, ctx)
                target = mid if code == E.NONE else None
            if target is not None and target in g.members:
                # member id "" + instance id is the Admin client's removeMembersFromConsumerGroup (L4);
                # a member leaving by itself names its own member id
                rb.remove_member(res, g, target, E.UNKNOWN_MEMBER_ID, rec.LEFT if mid else rec.REMOVED,
                                    ctx.now_ms, ctx)
                changed = changed or ("member_left" if mid else "member_removed")
            per.append((mid, iid, code))
        if changed:                                                        # L3: one decision per batch
            if g.state != EMPTY:                 # an Empty group (a pending id left) needs no rebalance
                rb.rebalance_or_complete(res, g, ctx.now_ms, changed)
            res.install(g.group_id, g)
        return answer(0, per)

    def session_expired(self, gid: str, mid: str, now_ms: int) -> Result:   # T2
        res = Result()
        rb = self.rebalance
        live = rb.group(gid)
        if live is None or mid not in live.members:
            return res
        m = live.members[mid]
        parked = mid in live.joins or mid in live.syncs
        if parked and not m.is_new:
            return res
        g = live.copy()
        if m.is_static and rb.config.static_registration_timeout_ms is not None and not m.is_new:
            # registration timeout: tolerate the static member offline; it replaces the session timeout,
            # so it counts from the member's last sign of life (the session timer was armed then, one
            # session timeout ago), not from now; track the earliest offline member
            g.offline_since.setdefault(mid, now_ms - m.session_timeout_ms)
            self.options.arm_registration(res, g)
            res.install(g.group_id, g)
            return res
        rb.remove_member(res, g, mid, E.UNKNOWN_MEMBER_ID, rec.EXPIRED, now_ms)
        rb.rebalance_or_complete(res, g, now_ms, "session_expired")
        res.install(g.group_id, g)
        return res
