"""Kafka's ACL codes (resource types, operations), the operations each resource type supports, and what a
handler asks of the authorizer through its request context.

A handler asks `ctx.allows(operation, resource_type, name)` (protocol/context.py); the context holds the
server's authorizer (security/authorizer.py, switched on with --authorizer) or none, and with none every
request is allowed, as Kafka with no authorizer configured.

A request can ask for the operations the caller may perform on a resource (Metadata, DescribeCluster,
DescribeGroups, ConsumerGroupDescribe, DescribeTopicPartitions: `include_*_authorized_operations`). The answer
is a 32-bit field with bit `code` set for each operation. With no authorizer Kafka answers every operation the
resource type supports (`AuthHelper.authorizedOperations`, `AclEntry.supportedOperations`); with one, the
supported operations the caller is allowed. When the request did not ask, the field is Integer.MIN_VALUE.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .context import RequestContext

# operations (Kafka's AclOperation codes)
UNKNOWN, ANY, ALL = 0, 1, 2
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14

# resource types (Kafka's ResourceType codes)
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
CLUSTER_NAME = "kafka-cluster"             # the one name of the CLUSTER resource

SUPPORTED: dict[int, frozenset[int]] = {
    TOPIC: frozenset({READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS}),
    GROUP: frozenset({READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS}),
    CLUSTER: frozenset({CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
                        DESCRIBE}),
    TRANSACTIONAL_ID: frozenset({DESCRIBE, WRITE}),
    DELEGATION_TOKEN: frozenset({DESCRIBE}),
    USER: frozenset({CREATE_TOKENS, DESCRIBE_TOKENS}),
}


class Authorization(Protocol):
    """What a request context asks of the server's authorizer (security/authorizer.py)."""

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool: ...

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool: ...


def authorized_operations(ctx: RequestContext, resource_type: int, name: str,
                          requested: bool) -> frozenset[int] | None:
    """The field for one resource as kafka-python's codec holds it (a set of operation codes, its "bitfield"
    type; None is Integer.MIN_VALUE on the wire): the supported operations the request's principal may perform
    on `name` when asked (all of them with no authorizer), else None."""
    if not requested:
        return None
    return frozenset(op for op in SUPPORTED[resource_type] if ctx.allows(op, resource_type, name))


def bits(ops: frozenset[int] | None) -> int:
    """The field as an int32 (where a schema types it so): bit `code` per operation; Integer.MIN_VALUE for
    None (not asked)."""
    return -(2**31) if ops is None else sum(1 << op for op in ops)
