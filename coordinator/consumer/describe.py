"""The KIP-848 consumer group kind's read side: ConsumerGroupDescribe, and a group's read model for inspection
(tenure/inspection.py)."""
from __future__ import annotations

import functools
from typing import Any

from tenure.inspection import GroupInfo, MemberInfo
from tenure.protocol import consumer_group as wire
from tenure.protocol.acl import DESCRIBE, GROUP, authorized_operations, bits
from tenure.protocol.errors import ErrorCode as E

from ..handler import ShardHandler
from ..result import RequestContext, Result
from .assignors import DEFAULT_ASSIGNOR
from .group import ConsumerGroup, Partitions, freeze
from .group_config import consumer_timeouts


@functools.cache
def _answer_classes() -> tuple[Any, Any, Any, Any, Any]:
    """ConsumerGroupDescribe's response, described group, member, assignment and topic-partitions classes: built at the
    first answer (protocol/structs.py LazySchemas), not at import."""
    answer = wire.ConsumerGroupDescribeResponse
    member = answer.DescribedGroup.Member
    assignment = member.fields["assignment"].data_class
    return answer, answer.DescribedGroup, member, assignment, assignment.fields["topic_partitions"].data_class


def describe_groups(kind: ShardHandler, ctx: RequestContext, req) -> Result:
    """ConsumerGroupDescribe: each named group (once, in first-asked order) with its members, their assignments
    and targets by topic id and name, and the assignor most of its members ask for."""
    res, out = Result(), []
    R, DG, DM, _, _ = _answer_classes()
    asked = req.include_authorized_operations
    for gid in dict.fromkeys(req.group_ids):
        if not ctx.allows(DESCRIBE, GROUP, gid):
            out.append(DG(error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=gid,
                          group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[]))
            continue
        g = kind.groups.get(gid)
        if not isinstance(g, ConsumerGroup):
            msg = f"Group {gid} not found." if g is None else f"Group {gid} is not a consumer group."
            out.append(DG(error_code=E.GROUP_ID_NOT_FOUND, error_message=msg, group_id=gid, group_state="Dead",
                          group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[]))
            continue
        wanted = [m.server_assignor for m in g.members.values() if m.server_assignor is not None]
        assignor = max(sorted(set(wanted)), key=wanted.count) if wanted else DEFAULT_ASSIGNOR
        out.append(DG(error_code=0, error_message=None, group_id=gid, group_state=g.state,
                      group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch, assignor_name=assignor,
                      members=[DM(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                                  member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                                  subscribed_topic_names=list(m.subscribed_topic_names),
                                  subscribed_topic_regex=m.subscribed_topic_regex,
                                  assignment=_described(kind, m.assigned),
                                  target_assignment=_described(kind, g.targets.get(m.member_id, {})),
                                  member_type=0 if m.classic is not None else 1)   # 0: classic protocol
                               for m in g.members.values()],
                      authorized_operations=bits(authorized_operations(ctx, GROUP, gid, asked))))
    res.respond(ctx.token, R(throttle_time_ms=0, groups=out))
    return res

def _described(kind: ShardHandler, assignment: Partitions) -> Any:
    tps, (_, _, _, assignment_class, tp_class) = [], _answer_classes()
    for tid, ps in freeze(assignment):
        t = kind.shard.topics.by_id(tid)
        tps.append(tp_class(topic_id=tid, topic_name=t.name if t is not None else "", partitions=list(ps)))
    return assignment_class(topic_partitions=tps)


def group_info(kind: ShardHandler, g: ConsumerGroup) -> GroupInfo:
    """Assignments by topic name (a topic the table does not know by its id); every member's session is
    the group's consumer session timeout (its own config, else the server's) - a classic-protocol member's its
    own; no protocol, no leader."""
    def by_name(assigned: Partitions) -> dict[str, list[int]]:
        out = {}
        for tid, parts in assigned.items():
            t = kind.shard.topics.by_id(tid)
            out[t.name if t is not None else str(tid)] = sorted(parts)
        return dict(sorted(out.items()))
    session, _ = consumer_timeouts(kind.shard.topics, kind.config, g.group_id)
    members = tuple(MemberInfo(m.member_id, m.instance_id, m.client_id, m.client_host,
                               m.classic.session_timeout_ms if m.classic is not None else session,
                               m.rebalance_timeout_ms, by_name(m.assigned), 0, m.member_epoch)
                    for m in g.members.values())
    return GroupInfo(g.group_id, g.kind, g.state, g.group_epoch, g.protocol_type, None, None, members,
                     dict(g.static_members))
