"""The share group kind's read side: ShareGroupDescribe, and a group's read model for inspection
(tenure/inspection.py)."""
from __future__ import annotations

import functools
from typing import Any

from tenure.inspection import GroupInfo, MemberInfo
from tenure.protocol import share_group as wire
from tenure.protocol.errors import ErrorCode as E

from ..handler import ShardHandler
from ..result import RequestContext, Result
from .assignor import ASSIGNOR_NAME
from .group import DEAD, Partitions, ShareGroup, freeze
from .group_config import share_timeouts


@functools.cache
def _answer_classes() -> tuple[Any, Any, Any, Any, Any]:
    """ShareGroupDescribe's response, described group, member, assignment and topic-partitions classes: built at the
    first answer (protocol/structs.py LazySchemas), not at import."""
    answer = wire.ShareGroupDescribeResponse
    member = answer.DescribedGroup.Member
    assignment = member.fields["assignment"].data_class
    return answer, answer.DescribedGroup, member, assignment, assignment.fields["topic_partitions"].data_class
_NO_OPERATIONS = -2147483648


def describe_groups(kind: ShardHandler, ctx: RequestContext, req) -> Result:
    """ShareGroupDescribe: each named group (once, in first-asked order) with its members and their
    assignments by topic id and name; a group that is unknown or of another kind answers 69."""
    res, out = Result(), []
    R, DG, DM, _, _ = _answer_classes()
    for gid in dict.fromkeys(req.group_ids or []):
        g = kind.groups.get(gid)
        if not isinstance(g, ShareGroup):
            msg = f"Group {gid} not found." if g is None else f"Group {gid} is not a share group."
            out.append(DG(error_code=E.GROUP_ID_NOT_FOUND, error_message=msg, group_id=gid, group_state=DEAD,
                          group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                          authorized_operations=_NO_OPERATIONS))
            continue
        out.append(DG(error_code=0, error_message=None, group_id=gid, group_state=g.state,
                      group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch, assignor_name=ASSIGNOR_NAME,
                      members=[DM(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                                  client_id=m.client_id, client_host=m.client_host,
                                  subscribed_topic_names=list(m.subscribed_topic_names),
                                  assignment=_described(kind, m.assigned))
                               for m in g.members.values()],
                      authorized_operations=_NO_OPERATIONS))
    res.respond(ctx.token, R(throttle_time_ms=0, groups=out))
    return res


def _described(kind: ShardHandler, assignment: Partitions) -> Any:
    tps, (_, _, _, assignment_class, tp_class) = [], _answer_classes()
    for tid, ps in freeze(assignment):
        t = kind.shard.topics.by_id(tid)
        tps.append(tp_class(topic_id=tid, topic_name=t.name if t is not None else "", partitions=list(ps)))
    return assignment_class(topic_partitions=tps)


def group_info(kind: ShardHandler, g: ShareGroup) -> GroupInfo:
    """Assignments by topic name; every member's session is the group's share session timeout."""
    def by_name(assigned: Partitions) -> dict[str, list[int]]:
        out = {}
        for tid, parts in assigned.items():
            t = kind.shard.topics.by_id(tid)
            out[t.name if t is not None else str(tid)] = sorted(parts)
        return dict(sorted(out.items()))
    session = share_timeouts(kind.shard.topics, kind.config, g.group_id)[0]
    members = tuple(MemberInfo(m.member_id, None, m.client_id, m.client_host, session, -1, by_name(m.assigned), 0,
                               m.member_epoch) for m in g.members.values())
    return GroupInfo(g.group_id, g.kind, g.state, g.group_epoch, g.protocol_type, None, None, members, {})
