"""Kafka's ACL operation codes, and the operations each resource type supports.

A request can ask for the operations the caller may perform on a resource (Metadata, DescribeCluster,
DescribeGroups: `include_*_authorized_operations`). The answer is a 32-bit field with bit `code` set for each
operation. Kafka with no authorizer configured - tenure's case: it has no ACLs - answers every operation the
resource type supports (`AuthHelper.authorizedOperations`, `AclEntry.supportedOperations`); when the request
did not ask, the field is Integer.MIN_VALUE.
"""
from __future__ import annotations

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

SUPPORTED: dict[str, frozenset[int]] = {
    "topic": frozenset({READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS}),
    "group": frozenset({READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS}),
    "cluster": frozenset({CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
                          DESCRIBE}),
}

def authorized_operations(resource_type: str, requested: bool) -> frozenset[int] | None:
    """The field for one resource as kafka-python's codec holds it (a set of operation codes, its "bitfield"
    type; None is Integer.MIN_VALUE on the wire): every supported operation when asked, else None."""
    return SUPPORTED[resource_type] if requested else None

