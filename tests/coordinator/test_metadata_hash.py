"""The KIP-1101 metadata hash (coordinator/consumer/hash.py): the byte layout the project chose (MurmurHash3
over big-endian numbers, UTF-8 strings, racks joined by ";"; the group hash over sum(i * h_i)), unit vectors,
the properties the seed asks for, and the topic-hash cache."""
from __future__ import annotations

import struct
import uuid

import mmh3
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.broker.topics import TopicRegistry
from tenure.coordinator.consumer.hash import TopicHashCache, group_hash, group_hash_input, topic_hash, topic_hash_input

ORDERS = uuid.UUID("1a2b3c4d-5e6f-4a0b-9c1d-2e3f4a5b6c7d")
PAYMENTS = uuid.UUID("7f000001-0000-4000-8000-000000000001")


# ---- the layout, written out here independently of hash.py


def _mmh3_64(data: bytes) -> int:
    return mmh3.hash64(data, seed=0, x64arch=True, signed=True)[0]


def _reference_topic_bytes(topic_id: uuid.UUID, name: str, racks_by_partition) -> bytes:
    msb, lsb = struct.unpack(">qq", topic_id.bytes)
    data = bytearray(b"\x00")
    data += struct.pack(">q", msb) + struct.pack(">q", lsb)
    data += name.encode("utf-8")
    data += struct.pack(">q", len(racks_by_partition))
    for partition_id, racks in enumerate(racks_by_partition):
        data += struct.pack(">i", partition_id)
        data += ";".join(sorted(racks)).encode("utf-8")
    return bytes(data)


def _reference_group(hashes_by_name: dict[str, int]) -> int:
    if not hashes_by_name:
        return 0
    ordered = [hashes_by_name[name] for name in sorted(hashes_by_name)]
    total = sum(i * h for i, h in enumerate(ordered, start=1)) % 2 ** 64
    return _mmh3_64(total.to_bytes(8, "big"))


def test_the_topic_bytes_follow_the_layout():
    # magic 0; id msb, lsb as big-endian int64; the name in UTF-8 with no length; the partition count as a
    # big-endian int64; per partition its id as a big-endian int32 and its sorted racks joined by ";"
    data = topic_hash_input(uuid.UUID(int=(1 << 64) | 2), "t", [["b", "a"], [], ["c"]])
    assert data == bytes.fromhex(
        "00" "0000000000000001" "0000000000000002" "74" "0000000000000003"
        "00000000" "613b62" "00000001" "00000002" "63")
    assert data == _reference_topic_bytes(uuid.UUID(int=(1 << 64) | 2), "t", [["b", "a"], [], ["c"]])


def test_a_topic_id_half_with_its_top_bit_set_is_its_twos_complement_bytes():
    data = topic_hash_input(uuid.UUID("ffffffff-ffff-ffff-8000-000000000000"), "t", [])
    assert data[1:17] == bytes.fromhex("ffffffffffffffff" "8000000000000000")


def test_names_and_racks_are_utf8():
    data = topic_hash_input(uuid.UUID(int=0), "t\u00e9", [["\u00e9", "z"]])    # "z" < "\u00e9"
    assert data == b"\x00" + bytes(16) + b"t\xc3\xa9" + bytes(7) + b"\x01" + bytes(4) + b"z;\xc3\xa9"


def test_the_group_bytes_are_the_position_weighted_sum_big_endian():
    assert group_hash_input({"b": 2, "a": -1}) == (1 * -1 + 2 * 2).to_bytes(8, "big")
    assert group_hash_input({"a": -1}) == bytes.fromhex("ffffffffffffffff")
    # the sum wraps modulo 2**64: 3 * (2**63 - 1) = 2**64 + 2**63 - 3
    assert group_hash_input({"a": 2 ** 63 - 1, "b": 2 ** 63 - 1}) == bytes.fromhex("7ffffffffffffffd")


TOPIC_VECTORS = [
    (ORDERS, "orders", [], 4982058271748868314),
    (ORDERS, "orders", [[], [], []], 2990052939463755175),
    (ORDERS, "orders", [["r1", "r2"], ["r2", "r3"], ["r3", "r1"]], -6556758100424428225),
    (ORDERS, "orders", [["r1"], [], ["r2"]], -640878353677179764),
    (ORDERS, "orders", [["r1", "r1"]], -751602160984566597),
    (ORDERS, "orders", [["r1"]], -4437260546930076305),
    (PAYMENTS, "payments", [["r1", "r2"], ["r2", "r3"]], 4708742258505141057),
]


def test_topic_vectors():
    for topic_id, name, racks, expected in TOPIC_VECTORS:
        assert _mmh3_64(_reference_topic_bytes(topic_id, name, racks)) == expected, (name, racks)
        assert topic_hash(topic_id, name, racks) == expected, (name, racks)


def test_rack_order_does_not_matter():
    assert topic_hash(ORDERS, "orders", [["r2", "r1"], ["r3", "r2"], ["r1", "r3"]]) == -6556758100424428225


def test_a_partition_without_rack():
    assert topic_hash(ORDERS, "orders", [["r1"], [], ["r2"]]) == -640878353677179764
    assert topic_hash(ORDERS, "orders", [["r1"], ["r2"], []]) == 6531942901485963399


def test_duplicate_racks_are_kept():
    # two replicas on r1 hash "r1;r1", one replica "r1": dropping a replica on a rack already present is a change
    assert topic_hash_input(ORDERS, "orders", [["r1", "r1"]]).endswith(b"r1;r1")
    assert topic_hash(ORDERS, "orders", [["r1", "r1"]]) != topic_hash(ORDERS, "orders", [["r1"]])


def test_the_rack_join_cannot_tell_a_separator_inside_a_rack_name_apart():
    # a known limit of this layout (Kafka's length-prefixed racks keep these apart): the bytes are the same
    assert topic_hash_input(ORDERS, "orders", [["a;b"]]) == topic_hash_input(ORDERS, "orders", [["a", "b"]])
    assert topic_hash(ORDERS, "orders", [["a;b"]]) == topic_hash(ORDERS, "orders", [["a", "b"]]) \
        == -6674193199831355651
    # and an empty rack name adds no bytes, like no rack; next to another rack it still adds its ";"
    assert topic_hash(ORDERS, "orders", [[""]]) == topic_hash(ORDERS, "orders", [[]])
    assert topic_hash(ORDERS, "orders", [["a", ""]]) != topic_hash(ORDERS, "orders", [["a"]])


def test_racks_and_topic_names_sort_in_pythons_string_order():
    # by code point: U+FFFF before U+10000 (Java's UTF-16 order would put U+10000, a surrogate pair, first)
    data = topic_hash_input(ORDERS, "t", [["\U00010000", "\uffff"]])
    assert data.endswith("\uffff;\U00010000".encode("utf-8"))
    assert group_hash_input({"\U00010000": 2, "\uffff": 1}) == (1 * 1 + 2 * 2).to_bytes(8, "big")
    assert group_hash_input({"B": 1, "a": 2}) == (1 * 1 + 2 * 2).to_bytes(8, "big")    # "B" < "a"


def test_no_topics_is_zero():
    assert group_hash({}) == 0


GROUP_VECTORS = [
    ({"orders": 2990052939463755175}, -4950513558910486650),
    ({"orders": -6556758100424428225, "payments": 4708742258505141057}, -2962961505597524835),
    ({"orders": 4708742258505141057, "payments": -6556758100424428225}, -8251099762206885398),
]


def test_group_vectors():
    for hashes, expected in GROUP_VECTORS:
        assert _reference_group(hashes) == expected, hashes
        assert group_hash(hashes) == expected, hashes


def test_the_seeds_swap_case_changes_the_group_hash():
    a, b = -6556758100424428225, 4708742258505141057
    assert group_hash({"orders": a, "payments": b}) == -2962961505597524835
    assert group_hash({"orders": b, "payments": a}) == -8251099762206885398


def test_a_swap_k_places_apart_is_missed_when_k_times_the_difference_is_a_multiple_of_2_to_the_64():
    # the weighted sum changes by k * (h_y - h_x) mod 2**64: two hashes 2**63 apart, two names apart, cancel
    assert group_hash({"a": 0, "b": 5, "c": -2 ** 63}) == group_hash({"a": -2 ** 63, "b": 5, "c": 0})
    assert group_hash({"a": 0, "b": -2 ** 63}) != group_hash({"a": -2 ** 63, "b": 0})    # neighbours: never


racks = st.lists(st.text(max_size=6), max_size=4)
partitions = st.lists(racks, max_size=8)


@settings(max_examples=200, deadline=None)
@given(st.uuids(), st.text(min_size=1, max_size=20), partitions)
def test_any_topic_hashes_as_the_layout_says(topic_id, name, racks_by_partition):
    expected = _reference_topic_bytes(topic_id, name, racks_by_partition)
    assert topic_hash_input(topic_id, name, racks_by_partition) == expected
    assert topic_hash(topic_id, name, racks_by_partition) == _mmh3_64(expected)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=10), st.integers(-(1 << 63), (1 << 63) - 1), max_size=6))
def test_any_group_hashes_as_the_layout_says(hashes):
    assert group_hash(hashes) == _reference_group(hashes)


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
    swapped = dict(hashes, **{x: hashes[y], y: hashes[x]})
    names = sorted(hashes)
    places_apart = names.index(y) - names.index(x)
    if (places_apart * (hashes[y] - hashes[x])) % 2 ** 64:
        assert group_hash(swapped) != group_hash(hashes)
    else:                       # equal hashes, or the case the test above shows: the weighted sums are equal
        assert group_hash(swapped) == group_hash(hashes)


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
    assert cache.hash_of("orders") == topic_hash(ORDERS, "orders", [[], [], []]) == 2990052939463755175
    assert cache.hash_of("orders") == 2990052939463755175
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


def test_the_cache_takes_racks_from_the_topic_table_by_default():
    topics = TopicRegistry(default_partitions=2)
    topics.create("orders", topic_id=ORDERS)
    cache = TopicHashCache(topics)
    assert cache.hash_of("orders") == topic_hash(ORDERS, "orders", [[], []])
    placement = {("orders", 0): ["r2", "r1"], ("orders", 1): ["r1", "r3"]}
    topics.replica_racks = lambda name, p: placement[(name, p)]      # what the cluster mode installs
    topics.topics_changed()
    assert cache.hash_of("orders") == topic_hash(ORDERS, "orders", [["r1", "r2"], ["r1", "r3"]])
