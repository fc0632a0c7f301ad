"""JoinGroup (J1-J31): a new dynamic member (the KIP-394 handshake), a new or returning static member,
a known member rejoining, and the group size limit.

`JoinRequests` is one part of the classic group kind, over the rebalance machinery, the static replacement
and the draft's options it is handed."""
from __future__ import annotations

from dataclasses import dataclass

from tenure.protocol import records as rec
from tenure.protocol.error_responses import join_group_error
from tenure.protocol.errors import ErrorCode as E

from ..result import RequestContext, Result
from ..timers import PendingKey
from .group import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup, Member, request_ids
from .options import DraftOptions
from .rebalance import Rebalance
from .static import StaticMembership, fenced, static_event


@dataclass(frozen=True)
class JoinRequests:
    """JoinGroup, over the parts it uses (the rebalance machinery, static membership, the draft's options)."""
    rebalance: Rebalance
    static: StaticMembership
    options: DraftOptions

    def join_group(self, ctx: RequestContext, req) -> Result:
        v, gid, mid, iid = request_ids(ctx, req, 5)
        res, rb = Result(), self.rebalance
        rebalance_timeout = req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms

        def error(code: int, member_id: str = mid) -> Result:
            res.respond(ctx.token, join_group_error(v, code, member_id))
            return res

        if not gid:
            return error(E.INVALID_GROUP_ID)
        if not (rb.config.min_session_timeout_ms <= req.session_timeout_ms
                <= rb.config.max_session_timeout_ms):
            return error(E.INVALID_SESSION_TIMEOUT)                       # J1
        other = rb.groups.get(gid)
        live = rb.group(gid)
        if other is not None and live is None:
            # a group of another kind (a KIP-848 consumer group): asked through its kind's interface
            if other.kind == "share":                 # a share group is never converted
                return error(E.INCONSISTENT_GROUP_PROTOCOL)
            if not other.is_empty():                  # its kind serves classic members (online migration)
                return rb.shard.kind_of(other).classic_request(11, ctx, req)
            for r in rb.shard.kind_of(other).delete_records(other):         # an empty one is converted
                res.emit(r)
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
                rb.remove_member(res, g, mid, E.GROUP_MAX_SIZE_REACHED, rec.GROUP_FULL, ctx.now_ms, ctx)
                res.install(g.group_id, g)
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
                self.static.replace(res, g, member, ctx)                  # J23-J30
            else:
                member.member_id = self.rebalance.new_member_id(iid)                       # J7
                member.is_new = True
                self._add_and_rebalance(res, g, member, ctx)
        elif mid in g.pending_members:                                     # J6: second join of KIP-394
            g.pending_members.discard(mid)
            res.cancel_timer(PendingKey(gid, mid))
            member.is_new = True
            self._add_and_rebalance(res, g, member, ctx)
        else:
            self._join_known(res, g, member, ctx)                          # J17-J22
        res.install(g.group_id, g)
        return res

    def _accept_joining(self, g: ClassicGroup, member_id: str) -> bool:
        limit = self.rebalance.config.max_group_size
        if limit is None or g.state in (EMPTY, DEAD):
            return True
        if g.state == PREPARING_REBALANCE:
            joined = g.joins
            return (bool(member_id) and member_id in joined) or len(joined) < limit
        return (bool(member_id) and member_id in g.members) or len(g.members) < limit

    def _join_new_dynamic(self, res: Result, g: ClassicGroup, member: Member, ctx: RequestContext) -> None:
        new_id = self.rebalance.new_member_id(ctx.client_id or "")
        if ctx.api_version >= 4:                                           # KIP-394 handshake
            g.pending_members.add(new_id)
            res.set_timer(PendingKey(g.group_id, new_id), ctx.now_ms + member.session_timeout_ms)
            res.respond(ctx.token, join_group_error(ctx.api_version, E.MEMBER_ID_REQUIRED, new_id))
            return
        member.member_id = new_id
        member.is_new = True
        self._add_and_rebalance(res, g, member, ctx)

    def _add_and_rebalance(self, res: Result, g: ClassicGroup, member: Member, ctx: RequestContext) -> None:
        if g.state == PREPARING_REBALANCE and g.initial_remaining is not None:
            g.new_member_added = True
        iid = member.group_instance_id
        if iid is not None:
            old = g.static_members.get(iid)
            static_event(res, g, rec.JOINED if old is None else rec.REPLACED, iid, old, member.member_id,
                               ctx.now_ms, ctx.client_id, ctx.client_host)
        g.add_member(member)
        rb = self.rebalance
        rb.park_join(res, g, member.member_id, ctx)
        rb.reset_heartbeat(res, g, member, ctx.now_ms)
        if not self.options.expansion_window(res, g, member, ctx.now_ms):
            rb.rebalance_or_complete(res, g, ctx.now_ms, "member_joined")

    def _join_known(self, res: Result, g: ClassicGroup, req_member: Member, ctx: RequestContext) -> None:
        rb = self.rebalance
        mid, v = req_member.member_id, ctx.api_version
        code = rb.validate_member(g, mid, req_member.group_instance_id)
        if code == E.FENCED_INSTANCE_ID:
            fenced(res, g, req_member.group_instance_id, mid, ctx)
        if code == E.NONE and g.state == EMPTY:
            code = E.UNKNOWN_MEMBER_ID                                     # J22
        if code:
            res.respond(ctx.token, join_group_error(v, code, mid))
            return
        m = g.members[mid]
        same = m.protocols == req_member.protocols

        def update_and_park():
            m.protocols = req_member.protocols
            m.rebalance_timeout_ms = req_member.rebalance_timeout_ms
            m.session_timeout_ms = req_member.session_timeout_ms
            rb.park_join(res, g, mid, ctx)

        if g.state == PREPARING_REBALANCE:                                 # J18
            update_and_park()
            rb.maybe_complete_join(res, g, ctx.now_ms)
        elif g.state == COMPLETING_REBALANCE:                              # J19
            if same:
                res.respond(ctx.token, rb.join_ok(g, mid, v))
            else:
                update_and_park()
                rb.prepare_rebalance(res, g, ctx.now_ms, "member_metadata_changed")
        elif g.state == STABLE:                                            # J20, J21
            if mid == g.leader_id or not same:
                update_and_park()
                rb.prepare_rebalance(res, g, ctx.now_ms,
                                        "member_metadata_changed" if not same else "leader_rejoined")
            else:
                res.respond(ctx.token, rb.join_ok(g, mid, v, with_members=False))
