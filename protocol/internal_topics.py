"""The internal topics every layer names, and Kafka's rule for which of their partitions holds a key.

`__consumer_offsets` is the group coordinator's log, `__transaction_state` the transaction coordinator's and
`__share_group_state` the share coordinator's; a group id (or a transactional id, or a share partition's
coordinator key "group:topic id:partition") lives in partition `partition_for(key, partitions)` of its topic,
the partition whose leader coordinates it.
"""
from __future__ import annotations

import base64
import functools
import re
import uuid

OFFSETS_TOPIC = "__consumer_offsets"              # the group coordinator's log (its records, its partitions)
TRANSACTION_TOPIC = "__transaction_state"         # the transaction coordinator's log
SHARE_STATE_TOPIC = "__share_group_state"         # the share coordinator's log
SHARE_STATE_PARTITIONS = 50                       # Kafka's share.coordinator.state.topic.num.partitions default
KAFKA_INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_TOPIC, SHARE_STATE_TOPIC})


@functools.lru_cache(maxsize=1 << 16)
def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int. Cached: every group request routes
    by its group id's hash (the ids a server sees are few; the cache is bounded)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's rule: Utils.abs(key.hashCode) % the topic's partition count, where Utils.abs maps
    Integer.MIN_VALUE to 0 and is Math.abs otherwise (not a mask of the sign bit)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def kafka_uuid(u: uuid.UUID) -> str:
    """A Uuid as Kafka writes it (Uuid.toString): URL-safe base64 of its 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(s: str) -> uuid.UUID:
    """Kafka's Uuid.fromString: URL-safe base64 (padding optional) of exactly 16 bytes; ValueError otherwise."""
    if len(s) > 24 or not re.fullmatch(r"[A-Za-z0-9_-]*=*", s):
        raise ValueError(f"Invalid topic ID: {s}")
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (ValueError, TypeError):
        raise ValueError(f"Invalid topic ID: {s}") from None
    if len(raw) != 16:
        raise ValueError(f"Invalid topic ID: {s}")
    return uuid.UUID(bytes=raw)


def share_coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """A share partition's key at the share coordinator (Kafka's SharePartitionKey.asCoordinatorKey)."""
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def parse_share_coordinator_key(key: str | None) -> tuple[str, uuid.UUID, int]:
    """(group id, topic id, partition) of a "group:topic id:partition" key, checked as Kafka's
    SharePartitionKey.validate checks it (three ':'-separated tokens, trailing empty ones dropped as Java's
    String.split drops them; a group that is not blank; a Uuid; an int); ValueError with Kafka's message."""
    if key is None or key == "":
        raise ValueError("Share partition key cannot be empty")
    tokens = key.split(":")
    while tokens and tokens[-1] == "":
        tokens.pop()
    if len(tokens) != 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found -  {key}")
    if not tokens[0].strip():
        raise ValueError("GroupId must be alphanumeric string")
    topic_id = parse_kafka_uuid(tokens[1])
    if not re.fullmatch(r"[+-]?[0-9]+", tokens[2]) or not -(1 << 31) <= int(tokens[2]) < 1 << 31:
        raise ValueError(f"Invalid partition: {tokens[2]}")
    return tokens[0].strip(), topic_id, int(tokens[2])
