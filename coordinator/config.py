"""The coordinator's settings, its member-id generator and the error its admin operations raise."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from tenure.protocol.errors import AdminError  # noqa: F401 - the coordinator's admin operations raise it


@dataclass(frozen=True)
class CoordinatorConfig:
    """The group coordinator's settings (the server's come from ServerConfig.coordinator_config)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 0          # the server's default is ServerConfig's (1000, Kafka 3000); the
                                                 # state machine's stays 0: scenario tests drive the clock
    max_group_size: int | None = None
    new_member_join_timeout_ms: int = 300000
    offset_metadata_max_bytes: int = 4096
    # KIP-345 draft ideas with no shipped wire equivalent, opt-in (None = Kafka's shipped behaviour):
    # new static members joining a Stable group within this window share ONE rebalance, counted from
    # the first new join;
    static_expansion_timeout_ms: int | None = None
    # static members whose session expired are kept (offline) until the earliest of them has been gone
    # this long; then one rebalance removes every member offline at that moment.
    static_registration_timeout_ms: int | None = None
    # KIP-848 consumer groups (Kafka's group.consumer.* defaults)
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    # KIP-932 share groups (Kafka's group.share.* defaults)
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    # group.consumer.migration.policy: which online conversions between the classic and the consumer protocol run
    # (bidirectional, upgrade, downgrade, disabled; Kafka 4.x's default bidirectional) - coordinator/migration.py
    consumer_migration_policy: str = "bidirectional"
    # KIP-1101 (Kafka 4.1+): a consumer group keeps its subscribed topics' metadata as one hash in its
    # ConsumerGroupMetadata record; False as Kafka 4.0: as ConsumerGroupPartitionMetadata records (type 4)
    consumer_group_metadata_hash: bool = True


def default_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"
