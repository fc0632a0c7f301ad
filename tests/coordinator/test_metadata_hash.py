"""The KIP-1101 metadata hash (coordinator/consumer/hash.py): the byte layout Kafka 4.1 hashes, unit vectors,
the properties the seed asks for, and the topic-hash cache."""
from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.broker.topics import TopicRegistry
from tenure.coordinator.consumer.hash import (
    TopicHashCache, group_hash, group_hash_input, topic_hash, topic_hash_input,
)

ORDERS = uuid.UUID("1a2b3c4d-5e6f-4a0b-9c1d-2e3f4a5b6c7d")
PAYMENTS = uuid.UUID("7f000001-0000-4000-8000-000000000001")


def test_the_topic_bytes_are_kafkas_layout():
    # magic 0; id msb, lsb as little-endian int64; name as UTF-16LE units + their count; partition count int32;
    # per partition: id int32, then each sorted rack as its length, its units and their count again
    data = topic_hash_input(uuid.UUID(int=(1 << 64) | 2), "t", [["b", "a"]])
    assert data == bytes.fromhex(
        "00" "0100000000000000" "0200000000000000" "7400" "01000000" "01000000"
        "00000000" "01000000" "6100" "01000000" "01000000" "6200" "01000000")


def test_a_negative_half_of_the_topic_id_is_a_signed_long():
    data = topic_hash_input(uuid.UUID("ffffffff-ffff-ffff-8000-000000000000"), "t", [])
    assert data[1:17] == bytes.fromhex("ffffffffffffffff" "0000000000000080")


def test_the_group_bytes_are_the_topic_hashes_in_name_order():
    assert group_hash_input({"b": 2, "a": -1}) == bytes.fromhex("ffffffffffffffff" "0200000000000000")


def test_topic_vectors():
    assert topic_hash(ORDERS, "orders", [[], [], []]) == 4407071126783624901
    assert topic_hash(ORDERS, "orders", [["r1", "r2"], ["r2", "r3"], ["r3", "r1"]]) == 7325889081337998547
    assert topic_hash(PAYMENTS, "payments", [["r1", "r2"], ["r2", "r3"]]) == 4479401220088082643


def test_rack_order_does_not_matter():
    assert topic_hash(ORDERS, "orders", [["r2", "r1"], ["r3", "r2"], ["r1", "r3"]]) == 7325889081337998547


def test_a_partition_without_rack():
    assert topic_hash(ORDERS, "orders", [["r1"], [], ["r2"]]) == 3065117391817694506
    assert topic_hash(ORDERS, "orders", [["r1"], [], ["r2"]]) != topic_hash(ORDERS, "orders", [["r1"], ["r2"], []])


def test_racks_are_length_prefixed_so_a_separator_inside_a_rack_name_cannot_collide():
    # what Kafka's length prefix is for: joined with ";" these two would be the same bytes
    assert topic_hash(ORDERS, "orders", [["a;b"]]) != topic_hash(ORDERS, "orders", [["a", "b"]])
    assert topic_hash(ORDERS, "orders", [["a", ""]]) != topic_hash(ORDERS, "orders", [["a"]])


def test_no_topics_is_zero():
    assert group_hash({}) == 0


def test_the_seeds_swap_case_changes_the_group_hash():
    a, b = 7325889081337998547, 4479401220088082643
    assert group_hash({"orders": a, "payments": b}) == -8674220442775785319
    assert group_hash({"orders": b, "payments": a}) == -3316587312466256251


racks = st.lists(st.text(max_size=6), max_size=4)
partitions = st.lists(racks, max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.uuids(), st.text(min_size=1, max_size=20), partitions, st.randoms(use_true_random=False))
def test_any_permutation_of_each_partitions_racks_gives_the_same_hash(topic_id, name, racks_by_partition, rnd):
    shuffled = [rnd.sample(r, len(r)) for r in racks_by_partition]
    assert topic_hash(topic_id, name, shuffled) == topic_hash(topic_id, name, racks_by_partition)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=10), st.integers(-(1 << 63), (1 << 63) - 1), min_size=2, max_size=6),
       st.data())
def test_the_group_hash_depends_on_which_topic_has_which_hash_not_on_dict_order(hashes, data):
    reordered = dict(reversed(list(hashes.items())))
    assert group_hash(reordered) == group_hash(hashes)
    x, y = data.draw(st.lists(st.sampled_from(sorted(hashes)), min_size=2, max_size=2, unique=True))
    if hashes[x] != hashes[y]:
        swapped = dict(hashes, **{x: hashes[y], y: hashes[x]})
        assert group_hash(swapped) != group_hash(hashes)


@settings(max_examples=100, deadline=None)
@given(st.uuids(), partitions, st.integers(1, 3))
def test_adding_partitions_changes_the_topic_hash(topic_id, racks_by_partition, more):
    grown = racks_by_partition + [[] for _ in range(more)]
    assert topic_hash(topic_id, "t", grown) != topic_hash(topic_id, "t", racks_by_partition)


# ---- the cache over the topic table


def test_the_cache_computes_once_and_only_for_topics_asked_for():
    topics = TopicRegistry(default_partitions=3)
    orders = topics.create("orders", topic_id=ORDERS)
    topics.create("other")
    cache = TopicHashCache(topics)
    assert cache.hash_of("orders") == topic_hash(ORDERS, "orders", [[], [], []]) == 4407071126783624901
    assert cache.hash_of("orders") == 4407071126783624901
    assert cache.computed == 1 and "other" not in cache and len(cache) == 1
    assert cache.hash_of("missing") is None and len(cache) == 1
    assert orders.topic_id == ORDERS


def test_the_cache_reads_racks_from_its_source():
    topics = TopicRegistry(default_partitions=2)
    topics.create("orders", topic_id=ORDERS)
    layout = {"orders": [["r2", "r1"], ["r1"]]}
    cache = TopicHashCache(topics, racks=lambda t: layout[t.name])
    assert cache.hash_of("orders") == topic_hash(ORDERS, "orders", [["r1", "r2"], ["r1"]])


def test_the_group_hash_leaves_out_topics_that_do_not_exist():
    topics = TopicRegistry(default_partitions=3)
    topics.create("orders", topic_id=ORDERS)
    cache = TopicHashCache(topics)
    assert cache.group_hash(["orders", "missing"]) == group_hash({"orders": cache.hash_of("orders")})
    assert cache.group_hash([]) == 0


def test_evict_and_retain():
    topics = TopicRegistry(default_partitions=1)
    for name in ("a", "b", "c"):
        topics.create(name)
    cache = TopicHashCache(topics)
    for name in ("a", "b", "c"):
        cache.hash_of(name)
    cache.evict("a")
    assert "a" not in cache and len(cache) == 2
    cache.retain({"b", "a"})
    assert "b" in cache and "c" not in cache and len(cache) == 1
    cache.hash_of("a")
    assert cache.computed == 4
    cache.topics_changed(None)
    assert len(cache) == 0


# ---- eviction: the topic table tells the caches watching it


def test_added_partitions_evict_the_topic_and_change_its_hash():
    topics = TopicRegistry(default_partitions=2)
    topics.create("orders", topic_id=ORDERS)
    topics.create("other")
    cache = TopicHashCache(topics)
    before, other = cache.hash_of("orders"), cache.hash_of("other")
    topics.add_partitions("orders", 3, validate_only=True)
    assert "orders" in cache                      # nothing changed
    topics.add_partitions("orders", 3)
    assert "orders" not in cache and "other" in cache
    assert cache.hash_of("orders") == topic_hash(ORDERS, "orders", [[], [], []]) != before
    assert cache.hash_of("other") == other and cache.computed == 3


def test_delete_and_recreate_evict_the_topic():
    topics = TopicRegistry(default_partitions=2)
    topics.create("orders", topic_id=ORDERS)
    cache = TopicHashCache(topics)
    before = cache.hash_of("orders")
    topics.delete("orders")
    assert "orders" not in cache and cache.hash_of("orders") is None
    topics.create("orders", topic_id=PAYMENTS)    # the same name and partition count, a new topic id
    assert cache.hash_of("orders") == topic_hash(PAYMENTS, "orders", [[], []]) != before


def test_the_cluster_hook_evicts_named_topics_or_all_of_them():
    topics = TopicRegistry(default_partitions=1)
    topics.create("a")
    topics.create("b")
    rack = {"a": "r1", "b": "r1"}
    cache = TopicHashCache(topics, racks=lambda t: [[rack[t.name]]])
    a, b = cache.hash_of("a"), cache.hash_of("b")
    rack["a"] = "r2"                              # a's replica moved to a broker on another rack
    topics.topics_changed(["a"])
    assert "a" not in cache and "b" in cache
    assert cache.hash_of("a") != a
    rack["b"] = "r3"                              # a broker restarted with another rack
    topics.topics_changed()
    assert len(cache) == 0
    assert cache.hash_of("b") != b


def test_every_cache_watching_the_table_is_told_and_a_dropped_cache_drops_out():
    import gc
    topics = TopicRegistry(default_partitions=1)
    topics.create("a")
    first, second = TopicHashCache(topics), TopicHashCache(topics)
    first.hash_of("a"), second.hash_of("a")
    topics.add_partitions("a", 2)
    assert "a" not in first and "a" not in second
    del second
    gc.collect()
    assert len(topics._watchers) == 1
