"""DescribeGroups (A1): the classic protocol's description of its groups. A group of another kind (a KIP-848
consumer group, described by ConsumerGroupDescribe) or an unknown one is answered as a Dead group; from v6 with
GROUP_ID_NOT_FOUND and Kafka's message (KIP-1043).

`DescribeRequests` is one part of the classic group kind, over the rebalance machinery (its group lookup)."""
from __future__ import annotations

from kafka.protocol.admin.groups import DescribeGroupsResponse

from tenure.protocol.acl import DESCRIBE, GROUP, authorized_operations
from tenure.protocol.errors import ErrorCode

from ..result import RequestContext, Result
from .group import DEAD, STABLE
from .rebalance import Rebalance


class DescribeRequests:
    def __init__(self, rebalance: Rebalance) -> None:
        self.rebalance = rebalance

    def describe_groups(self, ctx: RequestContext, req) -> Result:
        res = Result()
        D = DescribeGroupsResponse.DescribedGroup
        M = D.DescribedGroupMember
        asked = ctx.api_version >= 3 and req.include_authorized_operations
        out = []
        # Each group once, in first-asked order. Kafka answers a repeated id again, but one 50 KB request
        # naming a group of 10 KB members 10,000 times then makes a 190 MiB answer; no client repeats an
        # id (librdkafka refuses "Duplicate groups not allowed", Java keys its requests by group id).
        for gid in dict.fromkeys(req.groups):
            if not ctx.allows(DESCRIBE, GROUP, gid):     # as Kafka: the group's error, nothing about it
                out.append(D(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=gid,
                             group_state="", protocol_type="", protocol_data="", members=[],
                             authorized_operations=None))
                continue
            ops = authorized_operations(ctx, GROUP, gid, asked)
            g = self.rebalance.group(gid)        # a consumer group is described by ConsumerGroupDescribe
            if g is None:
                code, message = 0, None
                if ctx.api_version >= 6:            # KIP-1043: the reason, where older versions say only Dead
                    code = ErrorCode.GROUP_ID_NOT_FOUND
                    message = (f"Group {gid} not found." if gid not in self.rebalance.groups
                               else f"Group {gid} is not a classic group.")
                out.append(D(error_code=code, error_message=message, group_id=gid, group_state=DEAD,
                             protocol_type="", protocol_data="", members=[], authorized_operations=ops))
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
