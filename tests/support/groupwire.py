"""Group requests over the raw wire (tests/support/wire.py's WireClient): for tests that must know
exactly which request was answered and how - a static member driven by hand, and read-only views
(DescribeGroups, OffsetFetch) of a server that has no in-process object to inspect.
"""
from __future__ import annotations

from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer.group import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from .wire import WireClient

JOIN_V, SYNC_V, COMMIT_V, FETCH_V, DESCRIBE_V = 8, 5, 8, 8, 5


def subscription(*topics: str) -> bytes:
    return bytes(ConsumerProtocolSubscription(version=0, topics=list(topics), user_data=None).encode())


def assignment(topic: str, partitions) -> bytes:
    A = ConsumerProtocolAssignment
    return bytes(A(version=0, assigned_partitions=[A.TopicPartition(topic=topic, partitions=sorted(partitions))],
                   user_data=None).encode())


def decode_assignment(raw: bytes) -> dict[str, list[int]]:
    if not raw:
        return {}
    a = ConsumerProtocolAssignment.decode(bytes(raw))
    return {tp.topic: sorted(tp.partitions) for tp in a.assigned_partitions}


def join_request(group: str, member_id: str, instance_id: str | None, topic: str, *, session_ms: int,
                 rebalance_ms: int = 30000, version: int = JOIN_V):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(
        version=version, group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
        protocols=[P(version=version, name="range", metadata=subscription(topic))]), version


def sync_request(group: str, member_id: str, generation: int, instance_id: str | None,
                 assignments: dict[str, bytes] | None = None, *, version: int = SYNC_V):
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest(
        version=version, group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocol_name="range",
        assignments=[A(version=version, member_id=m, assignment=a) for m, a in (assignments or {}).items()]), version


def commit_request(group: str, member_id: str, generation: int, instance_id: str | None, topic: str,
                   offsets: dict[int, int], *, version: int = COMMIT_V):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        version=version, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance_id, topics=[T(version=version, name=topic, partitions=[
            P(version=version, partition_index=p, committed_offset=o, committed_leader_epoch=-1,
              committed_metadata="") for p, o in sorted(offsets.items())])]), version


def fetch_request(groups):
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    return OffsetFetchRequest(version=FETCH_V, groups=[G(version=FETCH_V, group_id=g, topics=None) for g in groups],
                              require_stable=False), FETCH_V


def join(c: WireClient, group: str, member_id: str, instance_id: str | None, topic: str, **kw):
    return c.call(*join_request(group, member_id, instance_id, topic, **kw))


def sync(c: WireClient, group: str, member_id: str, generation: int, instance_id: str | None,
         assignments: dict[str, bytes] | None = None, **kw):
    return c.call(*sync_request(group, member_id, generation, instance_id, assignments, **kw))


def commit(c: WireClient, group: str, member_id: str, generation: int, instance_id: str | None,
           topic: str, offsets: dict[int, int], **kw) -> dict[int, int]:
    """OffsetCommit; returns {partition: error code}."""
    return commit_codes(c.call(*commit_request(group, member_id, generation, instance_id, topic, offsets, **kw)))


def commit_codes(r) -> dict[int, int]:
    return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}


def fetch_all(c: WireClient, groups) -> dict[str, dict[tuple[str, int], int]]:
    """OffsetFetch v8 of every committed offset of each group: {group: {(topic, partition): offset}}."""
    return fetched(c.call(*fetch_request(groups)))


def fetched(r) -> dict[str, dict[tuple[str, int], int]]:
    out = {}
    for g in r.groups:
        assert g.error_code == 0, g
        out[g.group_id] = {(t.name, p.partition_index): p.committed_offset
                           for t in g.topics for p in t.partitions if p.error_code == 0 and p.committed_offset >= 0}
    return out


def describe(c: WireClient, groups) -> dict[str, dict]:
    """DescribeGroups v5: {group: {state, protocol, members: {member id: (instance id, client id, assignment)}}}."""
    r = c.call(DescribeGroupsRequest(version=DESCRIBE_V, groups=list(groups), include_authorized_operations=False),
               DESCRIBE_V)
    out = {}
    for g in r.groups:
        assert g.error_code == 0, g
        out[g.group_id] = {
            "state": g.group_state, "protocol": g.protocol_data,
            "members": {m.member_id: (m.group_instance_id, m.client_id, decode_assignment(m.member_assignment))
                        for m in g.members}}
    return out


def instance_map(described: dict) -> dict[str, str]:
    """{instance id: member id} of one described group."""
    return {iid: mid for mid, (iid, _, _) in described["members"].items() if iid is not None}
