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


def test_cluster_mode_racks_broker_stop_start_and_a_new_replica():
    """With several brokers on racks a topic hash covers each partition's replicas' racks. Stopping or
    starting a broker evicts every topic hash, and the hash computed again is the same (replicas and racks
    did not change: no epoch bump for a group); a leader moved to a broker that was not a replica adds a
    replica on another rack, and that topic's hash changes (one bump)."""
    from tenure.config import ServerConfig
    from tenure.server import ServerThread
    with ServerThread(ServerConfig(port=0, admin_port=0, brokers=3, racks=("ra", "rb", "rc"),
                                   replication_factor=1)) as s:
        s.create_topics({"t": 3, "u": 1})
        topics, cluster = s.server.topics, s.server.cluster
        cache = s.call(lambda: TopicHashCache(topics))        # as a coordinator shard makes its cache
        t_id = topics.get("t").topic_id
        placed = s.call(lambda: [cluster.state("t", p).replicas for p in range(3)])
        racks = [[("ra", "rb", "rc")[b] for b in replicas] for replicas in placed]
        first = s.call(cache.hash_of, "t")
        assert first == topic_hash(t_id, "t", racks) != topic_hash(t_id, "t", [[], [], []])
        s.call(cache.hash_of, "u")

        stopped = placed[0][0]
        s.stop_broker(stopped)
        assert len(cache) == 0
        assert s.call(cache.hash_of, "t") == first            # its rack still counts, as a fenced broker's
        s.start_broker(stopped)
        assert len(cache) == 0
        assert s.call(cache.hash_of, "t") == first
        s.call(cache.hash_of, "u")

        newcomer = next(b for b in range(3) if b not in placed[1])
        s.move_leader("t", 1, newcomer)
        assert "t" not in cache and "u" in cache
        racks[1].append(("ra", "rb", "rc")[newcomer])
        assert s.call(cache.hash_of, "t") == topic_hash(t_id, "t", racks) != first


def test_one_broker_has_no_racks(tenure_server):
    tenure_server.create_topics({"t": 2})
    topics = tenure_server.server.topics
    cache = tenure_server.call(lambda: TopicHashCache(topics))
    assert tenure_server.call(cache.hash_of, "t") == topic_hash(topics.get("t").topic_id, "t", [[], []])
