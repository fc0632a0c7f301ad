"""OffsetDelete v0 (the Admin client's deleteConsumerGroupOffsets) on classic groups.

The spec has no numbered item for it; this is Kafka 4's behaviour (OffsetMetadataManager.deleteOffsets,
ClassicGroup.validateOffsetDelete / isSubscribedToTopic):
- unknown (or Dead) group -> top-level GROUP_ID_NOT_FOUND (69), no topics;
- a non-empty group (PreparingRebalance, CompletingRebalance, Stable) whose protocol type is not
  "consumer" -> top-level NON_EMPTY_GROUP (68), no topics;
- otherwise every requested partition is answered, in request order: GROUP_SUBSCRIBED_TO_TOPIC (86)
  if the group is subscribed to its topic, else 0 - with an OffsetCommit tombstone if an offset was
  committed for it, and no record if there was none (an unknown partition is not an error);
- "subscribed": the union of the members' ConsumerProtocolSubscription topics for the selected protocol;
  an Empty group is subscribed to nothing; if a subscription cannot be parsed, a "consumer" group counts
  as subscribed to every topic (nothing is deleted by guesswork).
"""
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from tenure.coordinator import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import OffsetCommitRecord

from .harness import Harness, offset_delete_resp


def subscription(*topics: str) -> bytes:
    return ConsumerProtocolSubscription(version=0, topics=list(topics), user_data=None).encode()


def tombstone(topic: str, partition: int, group: str = "g") -> OffsetCommitRecord:
    return OffsetCommitRecord(group, topic, partition, tombstone=True)


def fetched(h: Harness, topics: dict[str, list[int]], group: str = "g") -> dict[tuple[str, int], int]:
    r = h.resp(h.fetch(group, topics, version=7))
    return {(t["name"], p["partition_index"]): p["committed_offset"] for t in r["topics"] for p in t["partitions"]}


def test_empty_group_offsets_are_tombstoned_and_unknown_partitions_answer_0_without_a_record():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"], protocols=(("range", subscription("t", "u")),))
    h.commit("g", i1, 1, "i1", {"t": [(0, 10), (1, 11)], "u": [(0, 5)]})
    h.leave("g", [(i1, "i1"), (i2, "i2")])
    assert h.g().state == EMPTY
    h.take_records()
    t = h.offset_delete("g", {"t": [0, 1, 7], "u": [0]})
    assert h.resp(t) == offset_delete_resp(0, {"t": [(0, 0), (1, 0), (7, 0)], "u": [(0, 0)]})
    assert h.take_records() == [tombstone("t", 0), tombstone("t", 1), tombstone("u", 0)]
    assert fetched(h, {"t": [0, 1], "u": [0]}) == {("t", 0): -1, ("t", 1): -1, ("u", 0): -1}
    assert h.g().state == EMPTY and h.g().generation == 2                # the group itself stays
    # deleting again: nothing left to tombstone, still 0
    assert h.resp(h.offset_delete("g", {"t": [0]})) == offset_delete_resp(0, {"t": [(0, 0)]})
    assert h.take_records() == []


def test_simple_group_without_protocol():
    h = Harness()
    h.commit("s", "", -1, None, {"t": [(0, 1), (1, 2)]})
    h.take_records()
    t = h.offset_delete("s", {"t": [1]})
    assert h.resp(t) == offset_delete_resp(0, {"t": [(1, 0)]})
    assert h.take_records() == [tombstone("t", 1, "s")]
    assert fetched(h, {"t": [0, 1]}, "s") == {("t", 0): 1, ("t", 1): -1}


def test_topic_the_consumer_group_subscribes_to_is_86_and_keeps_its_offsets():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"], protocols=(("range", subscription("t")),))
    h.commit("g", i1, 1, "i1", {"t": [(0, 10)], "u": [(0, 5), (1, 6)]})
    h.take_records()
    t = h.offset_delete("g", {"t": [0, 3], "u": [0, 9]})
    # per partition: the subscribed topic is refused, the other one is deleted; top level stays 0
    assert h.resp(t) == offset_delete_resp(0, {"t": [(0, E.GROUP_SUBSCRIBED_TO_TOPIC),
                                                     (3, E.GROUP_SUBSCRIBED_TO_TOPIC)],
                                               "u": [(0, 0), (9, 0)]})
    assert h.take_records() == [tombstone("u", 0)]
    assert fetched(h, {"t": [0], "u": [0, 1]}) == {("t", 0): 10, ("u", 0): -1, ("u", 1): 6}
    assert h.g().state == STABLE and h.g().generation == 1 and set(h.g().members) == {i1, i2}


def test_subscription_is_the_union_of_the_members():
    h = Harness()
    # one protocol name, different subscriptions per member (each member's own metadata)
    tokens = [h.join("g", "", "i1", protocols=(("range", subscription("t")),)),
              h.join("g", "", "i2", protocols=(("range", subscription("u")),))]
    h.advance(0)
    i1, i2 = (h.resp(x)["member_id"] for x in tokens)
    h.sync("g", i1, 1, "i1", assignments={i1: b"a", i2: b"b"})
    h.sync("g", i2, 1, "i2")
    h.commit("g", i1, 1, "i1", {"v": [(0, 1)]})
    h.take_records()
    t = h.offset_delete("g", {"t": [0], "u": [0], "v": [0]})
    assert h.resp(t) == offset_delete_resp(0, {"t": [(0, 86)], "u": [(0, 86)], "v": [(0, 0)]})
    assert h.take_records() == [tombstone("v", 0)]


def test_non_empty_group_not_subscribed_to_the_topic_in_every_non_empty_state():
    """Kafka applies the same rule in PreparingRebalance, CompletingRebalance and Stable."""
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"], protocols=(("range", subscription("t")),))
    h.commit("g", i1, 1, "i1", {"u": [(0, 1), (1, 2), (2, 3)]})
    h.take_records()
    h.join("g", i1, "i1", protocols=(("range", subscription("t")),))          # leader rejoins: rebalance
    assert h.g().state == PREPARING_REBALANCE
    assert h.resp(h.offset_delete("g", {"u": [0], "t": [0]})) == offset_delete_resp(0, {"u": [(0, 0)],
                                                                                      "t": [(0, 86)]})
    assert h.take_records() == [tombstone("u", 0)]
    h.join("g", i2, "i2", protocols=(("range", subscription("t")),))
    assert h.g().state == COMPLETING_REBALANCE
    assert h.resp(h.offset_delete("g", {"u": [1]})) == offset_delete_resp(0, {"u": [(1, 0)]})
    assert h.take_records() == [tombstone("u", 1)]
    h.sync("g", i1, 2, "i1", assignments={i1: b"a", i2: b"b"})
    h.sync("g", i2, 2, "i2")
    assert h.g().state == STABLE
    h.take_records()
    assert h.resp(h.offset_delete("g", {"u": [2]})) == offset_delete_resp(0, {"u": [(2, 0)]})
    assert h.take_records() == [tombstone("u", 2)]


def test_unreadable_subscription_counts_as_subscribed_to_everything():
    # the harness's default metadata b"sub" is not a ConsumerProtocolSubscription
    h = Harness()
    i1, = h.form_group(["i1"])
    h.commit("g", i1, 1, "i1", {"u": [(0, 1)]})
    h.take_records()
    assert h.resp(h.offset_delete("g", {"u": [0]})) == offset_delete_resp(0, {"u": [(0, 86)]})
    assert h.take_records() == []


def test_unknown_group_is_69():
    h = Harness()
    assert h.resp(h.offset_delete("nope", {"t": [0]})) == offset_delete_resp(E.GROUP_ID_NOT_FOUND)
    assert h.resp(h.offset_delete("", {"t": [0]})) == offset_delete_resp(E.GROUP_ID_NOT_FOUND)
    assert h.records == [] and h.group == {}


def test_deleted_group_is_69():
    h = Harness()
    i1, = h.form_group(["i1"], protocols=(("range", subscription("t")),))
    h.commit("g", i1, 1, "i1", {"u": [(0, 1)]})
    h.leave("g", [(i1, "i1")])
    assert h.resp(h.delete("g"))["results"][0]["error_code"] == 0
    h.take_records()
    assert h.resp(h.offset_delete("g", {"u": [0]})) == offset_delete_resp(E.GROUP_ID_NOT_FOUND)
    assert h.take_records() == []


def test_non_empty_group_of_another_protocol_type_is_68():
    # a Kafka Connect-style group: protocol type "connect"
    h = Harness()
    tokens = [h.join("c", "", "w1", protocol_type="connect", protocols=(("v1", b"worker"),))]
    h.advance(0)
    w1 = h.resp(tokens[0])["member_id"]
    h.sync("c", w1, 1, "w1", protocol_type="connect", protocol_name="v1", assignments={w1: b"x"})
    h.commit("c", w1, 1, "w1", {"u": [(0, 1)]})
    h.take_records()
    assert h.g("c").state == STABLE and h.g("c").protocol_type == "connect"
    assert h.resp(h.offset_delete("c", {"u": [0]})) == offset_delete_resp(E.NON_EMPTY_GROUP)
    assert h.take_records() == []
    # once the group is Empty the protocol type no longer matters
    h.leave("c", [(w1, "w1")])
    h.take_records()
    assert h.resp(h.offset_delete("c", {"u": [0]})) == offset_delete_resp(0, {"u": [(0, 0)]})
    assert h.take_records() == [tombstone("u", 0, "c")]
