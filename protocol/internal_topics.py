"""The internal topics every layer names, and Kafka's rule for which of their partitions holds a key.

`__consumer_offsets` is the group coordinator's log and `__transaction_state` the transaction coordinator's;
a group id (or a transactional id) lives in partition `partition_for(key, partitions)` of its topic, the
partition whose leader coordinates it.
"""
from __future__ import annotations

import functools

OFFSETS_TOPIC = "__consumer_offsets"              # the group coordinator's log (its records, its partitions)
TRANSACTION_TOPIC = "__transaction_state"         # the transaction coordinator's log
SHARE_STATE_TOPIC = "__share_group_state"         # the share coordinator's log (not served yet)
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
