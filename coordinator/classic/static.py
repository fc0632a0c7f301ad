"""Static membership (KIP-345): the history of each group's instance map as static-member events
(`StaticMemberEventRecord`, this project's own record type; the rule for each cause is in
`tenure.protocol.records`), and the replacement of a static member by a new member id (J23-J30).

`static_event` and `fenced` write the history (every part of the classic kind logs through them);
`StaticMembership` is the part that replaces a static member, over the rebalance machinery and the draft's
options it is handed."""
from __future__ import annotations

from typing import TYPE_CHECKING

from tenure.protocol import records as rec
from tenure.protocol.error_responses import join_group_error, sync_group_error
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import StaticMemberEventRecord

from ..result import RequestContext, Result
from ..timers import HeartbeatKey
from .group import COMPLETING_REBALANCE, STABLE, ClassicGroup, Member

if TYPE_CHECKING:
    from .options import DraftOptions
    from .rebalance import Rebalance


def static_event(res: Result, g: ClassicGroup, cause: str, instance_id: str, old: str | None,
                 new: str | None, now_ms: int, client_id: str, client_host: str) -> None:
    """Log one change (or challenge) of the instance map; `g.generation` is the generation now."""
    res.emit(StaticMemberEventRecord(g.group_id, instance_id, cause, old, new, g.generation, now_ms,
                                     client_id or "", client_host or ""))


def fenced(res: Result, g: ClassicGroup, instance_id: str | None, presented: str, ctx: RequestContext) -> None:
    """A request naming a mapped instance id with another member id is answered 82: log it."""
    assert instance_id is not None, "only a request naming an instance id is fenced (validate_member)"
    static_event(res, g, rec.FENCED, instance_id, presented, g.static_members[instance_id],
                 ctx.now_ms, ctx.client_id, ctx.client_host)


class StaticMembership:
    def __init__(self, rebalance: Rebalance, options: DraftOptions) -> None:
        self.rebalance = rebalance
        self.options = options

    def replace(self, res: Result, g: ClassicGroup, req_member: Member, ctx: RequestContext) -> None:
        """A static member joins again with no member id while its instance id is mapped: it takes the old
        member's place under a new member id."""
        rb = self.rebalance
        gid, iid, v = g.group_id, req_member.group_instance_id, ctx.api_version
        assert iid is not None, "only a static member is replaced (join_group)"
        old_id = g.static_members[iid]
        new_id = rb.new_member_id(iid)
        old_leader = g.leader_id
        static_event(res, g, rec.REPLACED, iid, old_id, new_id, ctx.now_ms, ctx.client_id, ctx.client_host)
        # J23: fence the old member; each parked request answered 82 is a fenced event too (a live holder
        # of the old id was told so), after the replacement that fenced it
        p = g.joins.pop(old_id, None)
        if p is not None:
            res.respond(p.token, join_group_error(p.api_version, E.FENCED_INSTANCE_ID, old_id))
            static_event(res, g, rec.FENCED, iid, old_id, new_id, ctx.now_ms, p.client_id, p.client_host)
        p = g.syncs.pop(old_id, None)
        if p is not None:
            res.respond(p.token, sync_group_error(E.FENCED_INSTANCE_ID))
            static_event(res, g, rec.FENCED, iid, old_id, new_id, ctx.now_ms, p.client_id, p.client_host)
        res.cancel_timer(HeartbeatKey(gid, old_id))
        m = g.replace_static_member(iid, old_id, new_id)
        m.protocols = req_member.protocols
        m.protocol_type = req_member.protocol_type
        m.rebalance_timeout_ms = req_member.rebalance_timeout_ms
        m.session_timeout_ms = req_member.session_timeout_ms
        m.is_new = False
        rb.reset_heartbeat(res, g, m, ctx.now_ms)
        if rb.config.static_registration_timeout_ms is not None:
            self.options.arm_registration(res, g)                          # it may have been offline
        if g.state == STABLE:
            if g.select_protocol() == g.protocol_name:                     # J24: no rebalance
                res.emit(rb.group_record(g, ctx.now_ms))
                if v >= 9:                                                 # J25: KIP-814
                    leads = g.leader_id == new_id
                    res.respond(ctx.token, rb.join_ok(g, new_id, v, with_members=leads, skip_assignment=leads))
                else:                                                      # J26
                    res.respond(ctx.token, rb.join_ok(g, new_id, v, leader=old_leader, with_members=False))
            else:                                                          # J28
                rb.park_join(res, g, new_id, ctx)
                rb.prepare_rebalance(res, g, ctx.now_ms, "static_member_protocol_changed")
        elif g.state == COMPLETING_REBALANCE:                              # J29
            rb.park_join(res, g, new_id, ctx)
            rb.prepare_rebalance(res, g, ctx.now_ms, "static_member_replaced_during_rebalance")
        else:                                                              # J30
            rb.park_join(res, g, new_id, ctx)
            rb.maybe_complete_join(res, g, ctx.now_ms)
