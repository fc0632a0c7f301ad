"""The access hook's ACL checks (tenure/server/dispatch.py `Dispatcher.access`): the ones Kafka makes of a whole
request before it looks at any of its parts, from the principal in the request's context. A refusal is the
API's own error answer for every part of the request (protocol/error_responses.py).

What Kafka checks per part (per topic, per group of a batch, per FindCoordinator key) is checked by the
handlers with `ctx.allows` (protocol/context.py): Produce, Fetch, ListOffsets, Metadata, the topic and config
admin APIs in broker/, the groups of DescribeGroups, DeleteGroups, OffsetFetch v8+ and ConsumerGroupDescribe
in the coordinator, the topics of OffsetCommit in the broker's offsets gate (broker/offsets_gate.py).
"""
from __future__ import annotations

from collections.abc import Callable

from tenure.protocol.acl import (
    ALTER,
    CLUSTER_ACTION,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode

GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _group(operation: int, field: str = "group_id") -> Callable[[Request, RequestContext], int]:
    def check(req: Request, ctx: RequestContext) -> int:
        return 0 if ctx.allows(operation, GROUP, getattr(req.body, field) or "") else GROUP_DENIED
    return check


def _cluster(operation: int) -> Callable[[Request, RequestContext], int]:
    def check(req: Request, ctx: RequestContext) -> int:
        return 0 if ctx.allows_cluster(operation) else CLUSTER_DENIED
    return check


def _txn(ctx: RequestContext, transactional_id: str | None) -> int:
    return 0 if ctx.allows(WRITE, TRANSACTIONAL_ID, transactional_id or "") else TXN_DENIED


def _produce(req: Request, ctx: RequestContext) -> int:
    tid = req.body.transactional_id
    return _txn(ctx, tid) if tid is not None else 0


def _offset_fetch(req: Request, ctx: RequestContext) -> int:
    if req.api_version >= 8:         # a batch of groups: each is answered on its own (coordinator/offsets.py)
        return 0
    return 0 if ctx.allows(DESCRIBE, GROUP, req.body.group_id or "") else GROUP_DENIED


def _txn_offset_commit(req: Request, ctx: RequestContext) -> int:
    return _txn(ctx, req.body.transactional_id) or _group(READ)(req, ctx)


def _add_offsets_to_txn(req: Request, ctx: RequestContext) -> int:
    return _txn(ctx, req.body.transactional_id) or _group(READ)(req, ctx)


def _end_txn(req: Request, ctx: RequestContext) -> int:
    return _txn(ctx, req.body.transactional_id)


def _add_partitions_to_txn(req: Request, ctx: RequestContext) -> int:
    if req.api_version >= 4:         # the brokers' batched form (KIP-890): a broker's request
        return 0 if ctx.allows_cluster(CLUSTER_ACTION) else CLUSTER_DENIED
    return _txn(ctx, req.body.v3_and_below_transactional_id)


def _init_producer_id(req: Request, ctx: RequestContext) -> int:
    """A transactional id: WRITE on it; an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on
    some topic (KafkaApis.handleInitProducerIdRequest)."""
    tid = req.body.transactional_id
    if tid is not None:
        return _txn(ctx, tid)
    if ctx.allows_cluster(IDEMPOTENT_WRITE) or ctx.allows_any(WRITE, TOPIC):
        return 0
    return CLUSTER_DENIED


def _consumer_group_heartbeat(req: Request, ctx: RequestContext) -> int:
    """READ on the group, then DESCRIBE on every subscribed topic named (KafkaApis, for ConsumerGroupHeartbeat and
    ShareGroupHeartbeat alike)."""
    code = _group(READ)(req, ctx)
    if code:
        return code
    names = req.body.subscribed_topic_names or []
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED if any(not ctx.allows(DESCRIBE, TOPIC, n) for n in names) else 0


# api key -> the whole-request check; an API not listed has none (or only checks of its parts)
CHECKS: dict[int, Callable[[Request, RequestContext], int]] = {
    0: _produce,
    8: _group(READ),                 # OffsetCommit; its topics: broker/offsets_gate.py
    9: _offset_fetch,
    11: _group(READ),                # JoinGroup
    12: _group(READ),                # Heartbeat
    13: _group(READ),                # LeaveGroup
    14: _group(READ),                # SyncGroup
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _end_txn,
    28: _txn_offset_commit,
    29: _cluster(DESCRIBE),          # DescribeAcls
    30: _cluster(ALTER),             # CreateAcls
    31: _cluster(ALTER),             # DeleteAcls
    35: _cluster(DESCRIBE),          # DescribeLogDirs
    43: _cluster(ALTER),             # ElectLeaders
    45: _cluster(ALTER),             # AlterPartitionReassignments
    46: _cluster(DESCRIBE),          # ListPartitionReassignments
    47: _group(DELETE),              # OffsetDelete; its topics: coordinator/offsets.py
    34: _cluster(ALTER),             # AlterReplicaLogDirs
    50: _cluster(DESCRIBE),          # DescribeUserScramCredentials
    51: _cluster(ALTER),             # AlterUserScramCredentials
    55: _cluster(DESCRIBE),          # DescribeQuorum
    68: _consumer_group_heartbeat,
    74: _cluster(DESCRIBE_CONFIGS),  # ListConfigResources
    # share groups (KIP-932): READ on the group (DELETE to delete its offsets); ShareGroupHeartbeat also DESCRIBE
    # on every subscribed topic, as ConsumerGroupHeartbeat; the topics of ShareFetch and ShareAcknowledge (READ)
    # are checked per partition by broker/share_apis.py, those of the offset admin APIs not one by one yet
    76: _consumer_group_heartbeat,   # ShareGroupHeartbeat
    78: _group(READ),                # ShareFetch
    79: _group(READ),                # ShareAcknowledge
    91: _group(READ),                # AlterShareGroupOffsets
    92: _group(DELETE),              # DeleteShareGroupOffsets
    # the share coordinator's APIs: brokers ask them (KafkaApis: CLUSTER_ACTION on the cluster)
    83: _cluster(CLUSTER_ACTION),    # InitializeShareGroupState
    84: _cluster(CLUSTER_ACTION),    # ReadShareGroupState
    85: _cluster(CLUSTER_ACTION),    # WriteShareGroupState
    86: _cluster(CLUSTER_ACTION),    # DeleteShareGroupState
    87: _cluster(CLUSTER_ACTION),    # ReadShareGroupStateSummary
}


def acl_access(req: Request, ctx: RequestContext) -> int:
    """The access hook with an authorizer: the error code the request is refused with (0: go on)."""
    if ctx.authorizer is None:
        return 0
    check = CHECKS.get(req.api_key)
    return check(req, ctx) if check is not None else 0
