"""The topic-hash cache (KIP-1101) follows topic changes made by real admin clients: CreatePartitions,
DeleteTopics and a topic created again under the same name (a new topic id) each evict the topic's hash, and
the hash computed next differs; other topics keep theirs."""
from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tenure.coordinator.consumer.hash import TopicHashCache, topic_hash

pytestmark = pytest.mark.timeout(120)


def wait_until(check, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "the cache did not see the change"
        time.sleep(0.05)


def test_admin_changes_evict_topic_hashes(tenure_server):
    topics = tenure_server.server.topics
    admin = AdminClient({"bootstrap.servers": tenure_server.bootstrap})
    for f in admin.create_topics([NewTopic("orders", 2), NewTopic("other", 1)]).values():
        f.result(15)
    cache = TopicHashCache(topics)
    first, other = cache.hash_of("orders"), cache.hash_of("other")

    admin.create_partitions([NewPartitions("orders", 4)])["orders"].result(15)
    assert "orders" not in cache and "other" in cache
    grown = cache.hash_of("orders")
    assert grown != first and grown == topic_hash(topics.get("orders").topic_id, "orders", [[]] * 4)

    admin.delete_topics(["orders"])["orders"].result(15)
    assert "orders" not in cache and cache.hash_of("orders") is None

    # the same name and partition count again: a new topic id, so a new hash
    wait_until(lambda: topics.get("orders") is None)
    admin.create_topics([NewTopic("orders", 4)])["orders"].result(15)
    again = cache.hash_of("orders")
    assert again is not None and again != grown
    assert cache.hash_of("other") == other
