"""Consumer groups beside classic ones: offsets (OffsetCommit v9 carries the member epoch: 113 when stale;
OffsetFetch v9 names the member), ListGroups / DescribeGroups / ConsumerGroupDescribe, DeleteGroups and
OffsetDelete, and conversion between the two kinds (an empty group converts, a mixed one is refused)."""
from __future__ import annotations

from kafka.protocol.consumer.group import OffsetFetchRequest

from tenure.protocol.consumer_group_records import ConsumerGroupMetadataRecord
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import GroupMetadataRecord, OffsetCommitRecord

from .consumer_harness import ConsumerHarness, Topics
from .harness import FETCH


def stable_two(h: ConsumerHarness) -> None:
    h.cjoin("a")
    h.cjoin("b")
    h.settle({"a": None, "b": None})


def commit_codes(h, token) -> list[int]:
    return [p["error_code"] for t in h.responses[token]["topics"] for p in t["partitions"]]


def test_offset_commit_v9_checks_the_member_epoch():
    h = ConsumerHarness()
    stable_two(h)
    epoch = h.group["g"].members["a"].member_epoch
    assert commit_codes(h, h.commit("g", "a", epoch, version=9)) == [0]
    assert commit_codes(h, h.commit("g", "a", epoch - 1, version=9)) == [E.STALE_MEMBER_EPOCH]
    assert commit_codes(h, h.commit("g", "a", epoch + 1, version=9)) == [E.STALE_MEMBER_EPOCH]
    assert commit_codes(h, h.commit("g", "nobody", epoch, version=9)) == [E.UNKNOWN_MEMBER_ID]
    assert commit_codes(h, h.commit("g", "a", epoch, version=8)) == [E.UNSUPPORTED_VERSION]
    assert commit_codes(h, h.commit("g", "", -1, version=9)) == [E.UNKNOWN_MEMBER_ID]   # not empty
    assert h.coordinator.committed_offsets("g")[("t", 0)].offset == 10


def test_an_empty_consumer_group_takes_an_admin_commit():
    h = ConsumerHarness()
    h.cjoin("a")
    h.hb("a", -1)
    assert commit_codes(h, h.commit("g", "", -1, version=9)) == [0]
    assert h.group["g"].kind == "consumer"


def fetch_v9(h, member_id, epoch) -> dict:
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    body = OffsetFetchRequest(version=9, require_stable=False, groups=[G(
        version=9, group_id="g", member_id=member_id, member_epoch=epoch,
        topics=[T(version=9, name="t", partition_indexes=[0])])])
    return h.responses[h.send(FETCH, 9, body)]["groups"][0]


def test_offset_fetch_v9_checks_the_member_when_named():
    h = ConsumerHarness()
    stable_two(h)
    epoch = h.group["g"].members["a"].member_epoch
    h.commit("g", "a", epoch, version=9)
    ok = fetch_v9(h, "a", epoch)
    assert ok["error_code"] == 0 and ok["topics"][0]["partitions"][0]["committed_offset"] == 10
    assert fetch_v9(h, "a", epoch - 1)["error_code"] == E.STALE_MEMBER_EPOCH
    assert fetch_v9(h, "zz", epoch)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert fetch_v9(h, None, -1)["error_code"] == 0                   # an admin's fetch


def test_list_and_describe_show_the_group_type():
    h = ConsumerHarness()
    stable_two(h)
    h.form_group(["ic"], group_id="classic-g")
    groups = {g["group_id"]: g for g in h.responses[h.list_groups(version=5)]["groups"]}
    assert (groups["g"]["group_type"], groups["g"]["protocol_type"], groups["g"]["group_state"]) == (
        "consumer", "consumer", "Stable")
    assert groups["classic-g"]["group_type"] == "classic"
    # DescribeGroups (the classic API) does not describe a consumer group
    d = h.responses[h.describe("g")]["groups"][0]
    assert (d["group_state"], d["members"]) == ("Dead", [])
    t = h.describe_consumer("g", "classic-g", "nope")
    g, c, n = h.responses[t]["groups"]
    assert (g["error_code"], g["group_state"], g["group_epoch"], g["assignment_epoch"], g["assignor_name"]) == (
        0, "Stable", 2, 2, "uniform")
    members = {m["member_id"]: m for m in g["members"]}
    a = members["a"]
    assert a["subscribed_topic_names"] == ["t"] and a["member_type"] == 1 and a["member_epoch"] == 2
    assert [(tp["topic_name"], tp["partitions"]) for tp in a["assignment"]["topic_partitions"]] == [
        ("t", h.owned("a")["t"])]
    assert a["target_assignment"] == a["assignment"]
    assert (c["error_code"], c["error_message"]) == (E.GROUP_ID_NOT_FOUND, "Group classic-g is not a consumer group.")
    assert (n["error_code"], n["error_message"]) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")


def test_delete_groups_and_offset_delete_on_a_consumer_group():
    h = ConsumerHarness(topics=Topics(t=2, u=1))
    h.cjoin("a")
    epoch = h.group["g"].members["a"].member_epoch
    h.commit("g", "a", epoch, offsets={"t": [(0, 5)], "u": [(0, 7)]}, version=9)
    assert h.responses[h.delete("g")]["results"][0]["error_code"] == E.NON_EMPTY_GROUP
    od = h.responses[h.offset_delete("g", {"t": [0], "u": [0]})]
    assert [(t["name"], t["partitions"][0]["error_code"]) for t in od["topics"]] == [
        ("t", E.GROUP_SUBSCRIBED_TO_TOPIC), ("u", 0)]
    h.hb("a", -1)
    h.take_records()
    assert h.responses[h.delete("g")]["results"][0]["error_code"] == 0
    recs = h.take_records()
    assert OffsetCommitRecord("g", "t", 0, tombstone=True) in recs
    assert recs[-1] == ConsumerGroupMetadataRecord("g", tombstone=True)
    assert "g" not in h.group and h.durable_state().groups == {}


def test_an_empty_classic_group_converts_a_malformed_one_is_refused():
    """A classic group with members whose embedded protocol is not the consumer protocol's (b"sub") is not
    upgraded, as Kafka's convertToConsumerGroup refuses it (the upgrade itself: test_migration.py)."""
    h = ConsumerHarness()
    mid = h.form_group(["ic"], group_id="c")[0]
    t = h.hb("x", 0, group_id="c")
    assert h.responses[t]["error_code"] == E.GROUP_ID_NOT_FOUND
    assert h.responses[t]["error_message"] == ("Cannot upgrade the classic group c to consumer group because the "
                                               "embedded consumer protocol is malformed.")
    assert h.group["c"].kind == "classic" and mid in h.group["c"].members
    h.leave("c", [(mid, "ic")])
    assert h.group["c"].state == "Empty"
    h.take_records()
    t = h.hb("x", 0, group_id="c")
    assert h.responses[t]["error_code"] == 0 and h.group["c"].kind == "consumer"
    assert h.take_records()[0] == GroupMetadataRecord("c", tombstone=True)
    # back: a classic JoinGroup to a consumer group with members is served there (a new dynamic member is asked
    # for its member id, as Kafka's classicGroupJoinToConsumerGroup); once empty the group converts
    from tenure.protocol.errors import ErrorCode
    j = h.join("c", "", None)
    assert h.responses[j]["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and h.responses[j]["member_id"]
    assert h.group["c"].kind == "consumer" and len(h.group["c"].members) == 1
    h.hb("x", -1, group_id="c")
    mid2 = h.form_group(["ic"], group_id="c")[0]
    assert h.group["c"].kind == "classic" and mid2 in h.group["c"].members


def test_classic_requests_to_a_consumer_group_do_not_touch_it():
    h = ConsumerHarness()
    stable_two(h)
    before = h.group["g"].copy()
    assert h.responses[h.heartbeat("g", "a", 2)]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.responses[h.sync("g", "a", 2)]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.group["g"] == before
