"""Share groups (KIP-932) in the coordinator: ShareGroupHeartbeat, ShareGroupDescribe, the simple assignor,
sessions, leaving, ListGroups/DeleteGroups and the wrong-kind errors. The harness checks after every input that
the journal replays to the live groups, and at stable points that the records alone (and compacted) do."""
from __future__ import annotations

from tenure.coordinator import CoordinatorConfig
from tenure.coordinator.share.assignor import assign
from tenure.coordinator.timers import ShareSessionKey
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import decode, encode
from tenure.protocol.share_group import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from tenure.protocol.share_group_records import (
    ShareAssignmentRecord,
    ShareGroupMetadataRecord,
    ShareMemberRecord,
    ShareTargetMemberRecord,
    ShareTargetMetadataRecord,
)

from .consumer_harness import ConsumerHarness, Topics
from .harness import SHARE_DESCRIBE, SHARE_HEARTBEAT

SESSION = CoordinatorConfig().share_session_timeout_ms


class ShareHarness(ConsumerHarness):
    def shb(self, member_id: str, epoch: int = 0, *, group_id: str = "g", topics: list[str] | None = None,
            rack: str | None = None) -> dict:
        """A ShareGroupHeartbeat (v1); on epoch 0 the topics default to ["t"], as a client's first one."""
        if epoch == 0 and topics is None:
            topics = ["t"]
        body = ShareGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=epoch, rack_id=rack,
                                          subscribed_topic_names=topics)
        return self.resp(self.send(SHARE_HEARTBEAT, 1, body))

    def sdescribe(self, *group_ids: str) -> dict:
        return self.resp(self.send(SHARE_DESCRIBE, 1, ShareGroupDescribeRequest(
            group_ids=list(group_ids), include_authorized_operations=False)))

    def parts(self, answer: dict) -> dict[str, list[int]] | None:
        a = answer["assignment"]
        if a is None:
            return None
        return {self.topics.by_id(t["topic_id"]).name: sorted(t["partitions"]) for t in a["topic_partitions"]}


def test_more_members_than_partitions_share_them():
    h = ShareHarness(topics=Topics(t=2))
    a = h.shb("a")
    assert a["error_code"] == 0 and a["member_id"] == "a" and a["member_epoch"] == 1
    assert a["heartbeat_interval_ms"] == CoordinatorConfig().share_heartbeat_interval_ms
    assert h.parts(a) == {"t": [0, 1]}
    b = h.shb("b")
    c = h.shb("c")
    assert (b["member_epoch"], c["member_epoch"]) == (2, 3)
    # a takes the new target on its next heartbeat: three members, two partitions, every member has one
    a2 = h.shb("a", 1)
    assert a2["member_epoch"] == 3 and h.parts(a2) == {"t": [0]}
    assert h.parts(c) == {"t": [0]} and h.parts(h.shb("b", 2)) == {"t": [1]}
    assert h.g().state == "Stable"
    # nothing changed: no assignment in the answer, same epoch
    again = h.shb("a", 3)
    assert again["member_epoch"] == 3 and again["assignment"] is None


def test_simple_assignor_spreads_or_shares():
    tid = Topics(t=4).tid("t")
    spread = assign({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": (tid, 4)})
    assert spread == {"a": {tid: frozenset({0, 2})}, "b": {tid: frozenset({1, 3})}}
    shared = assign({m: frozenset({"t"}) for m in "abcde"}, {"t": (tid, 2)})
    assert [sorted(shared[m][tid]) for m in "abcde"] == [[0], [1], [0], [1], [0]]
    assert assign({"a": frozenset({"missing"})}, {}) == {"a": {}}


def test_heartbeat_validation():
    h = ShareHarness()
    assert h.shb("", 0)["error_code"] == E.INVALID_REQUEST
    assert h.shb("a", 0, group_id=" ")["error_code"] == E.INVALID_REQUEST
    assert h.shb("a", 0, topics=[])["error_code"] == E.INVALID_REQUEST
    assert h.shb("a", -2)["error_code"] == E.INVALID_REQUEST
    assert h.shb("a", 0, topics=["t", ""])["error_code"] == E.INVALID_REQUEST
    assert h.shb("a", 3)["error_code"] == E.GROUP_ID_NOT_FOUND            # no such group
    assert h.shb("a")["error_code"] == 0
    assert h.shb("zz", 1)["error_code"] == E.UNKNOWN_MEMBER_ID
    r = h.shb("a", 7)
    assert r["error_code"] == E.FENCED_MEMBER_EPOCH and "greater" in r["error_message"]
    assert len(h.take_records()) == 5                   # a's join; the refused heartbeats wrote nothing


def test_wrong_kind_is_refused_both_ways():
    h = ShareHarness()
    assert h.cjoin("c1", group_id="cg")["error_code"] == 0            # a consumer group
    r = h.shb("s1", group_id="cg")
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND and "not a share group" in r["error_message"]
    assert h.shb("s1", group_id="sg")["error_code"] == 0
    assert h.shb("s1", -1, group_id="sg")["error_code"] == 0         # the share group is empty now
    got = h.resp(h.hb("c2", 0, group_id="sg"))
    assert got["error_code"] == E.GROUP_ID_NOT_FOUND and "not a consumer group" in got["error_message"]
    d = h.sdescribe("cg", "sg", "none")
    assert [g["error_code"] for g in d["groups"]] == [E.GROUP_ID_NOT_FOUND, 0, E.GROUP_ID_NOT_FOUND]
    assert d["groups"][1]["group_state"] == "Empty"
    # a classic JoinGroup does not convert an empty share group
    assert h.resp(h.join("sg", version=5))["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    # a share group commits no offsets
    assert h.resp(h.commit("sg", offsets={"t": [(0, 5)]}))["topics"][0]["partitions"][0]["error_code"] == \
        E.GROUP_ID_NOT_FOUND


def test_records_are_kafkas_and_replay_gives_the_group():
    h = ShareHarness(topics=Topics(t=1))
    h.shb("a")
    recs = h.take_records()
    tid = h.topics.tid("t")
    assert recs == [ShareMemberRecord("g", "a", None, "client", "/10.0.0.1", ("t",)),
                    ShareGroupMetadataRecord("g", 1), ShareTargetMemberRecord("g", "a", ((tid, (0,)),)),
                    ShareTargetMetadataRecord("g", 1), ShareAssignmentRecord("g", "a", 1, 0, 0, ((tid, (0,)),))]
    for r in recs:
        key, value = encode(r)
        assert key[:2] == {ShareMemberRecord: 10, ShareGroupMetadataRecord: 11, ShareTargetMetadataRecord: 12,
                           ShareTargetMemberRecord: 13, ShareAssignmentRecord: 14}[type(r)].to_bytes(2, "big")
        assert decode(key, value) == r
    h.shb("b")
    fresh = h.durable_state()
    assert fresh.groups["g"] == h.g()


def test_leave_and_session_expiry_remove_the_member():
    h = ShareHarness(topics=Topics(t=2))
    h.shb("a")
    h.shb("b")
    assert h.timer("share-session", "g", "a") is not None
    left = h.shb("b", -1)
    assert left["error_code"] == 0 and left["member_epoch"] == -1
    assert list(h.g().members) == ["a"] and h.g().group_epoch == 3
    back = h.shb("a", 1)                              # a's next heartbeat takes the new target: both partitions
    assert back["member_epoch"] == 3 and h.parts(back) == {"t": [0, 1]}
    h.advance(SESSION + 1)
    assert h.g().members == {} and h.g().state == "Empty"
    assert ShareSessionKey("g", "a") not in h.timers
    # an empty share group can be deleted; listed with its type before that
    listed = h.resp(h.list_groups(version=5))
    assert [(g["group_id"], g["group_type"], g["group_state"]) for g in listed["groups"]] == [("g", "share", "Empty")]
    assert h.resp(h.delete("g"))["results"][0]["error_code"] == 0
    assert "g" not in h.group and h.durable_state().groups == {}


def test_a_group_with_members_is_not_deleted_and_describe_shows_them():
    h = ShareHarness(topics=Topics(t=1))
    h.shb("a", rack="r1")
    assert h.resp(h.delete("g"))["results"][0]["error_code"] == E.NON_EMPTY_GROUP
    d = h.sdescribe("g")["groups"][0]
    assert (d["group_state"], d["group_epoch"], d["assignment_epoch"], d["assignor_name"]) == ("Stable", 1, 1, "simple")
    m = d["members"][0]
    assert (m["member_id"], m["rack_id"], m["member_epoch"], m["client_id"]) == ("a", "r1", 1, "client")
    assert m["assignment"]["topic_partitions"][0]["topic_name"] == "t"


def test_a_new_partition_bumps_the_epoch_and_reassigns():
    topics = Topics(t=1)
    h = ShareHarness(topics=topics)
    h.shb("a")
    h.shb("b")
    h.shb("a", 1)
    topics.add_partitions("t", 2)
    r = h.shb("a", 2)
    assert r["member_epoch"] == 3 and h.parts(r) == {"t": [0]}
    assert h.parts(h.shb("b", 2)) == {"t": [1]}


def test_a_groups_own_configs_set_its_members_interval_and_session():
    """Issue 26: the GROUP resource's share.session.timeout.ms and share.heartbeat.interval.ms over the
    server's, as Kafka's GroupMetadataManager looks them up for a share group; another group keeps the server's."""
    h = ShareHarness(topics=Topics(t=1))
    h.topics.dynamic_configs = {"group": {"g": {"share.session.timeout.ms": "50000",
                                                "share.heartbeat.interval.ms": "6000"}}}
    a = h.shb("a")
    assert a["heartbeat_interval_ms"] == 6000
    assert h.timer("share-session", "g", "a") == h.now_ms + 50000
    other = h.shb("b", group_id="other")
    assert other["heartbeat_interval_ms"] == CoordinatorConfig().share_heartbeat_interval_ms
    assert h.timer("share-session", "other", "b") == h.now_ms + SESSION
    # a change applies from the next heartbeat; the group's session is what describe reports
    h.topics.dynamic_configs["group"]["g"]["share.heartbeat.interval.ms"] = "7000"
    assert h.shb("a", 1)["heartbeat_interval_ms"] == 7000
    assert h.coordinator.group_info("g").members[0].session_timeout_ms == 50000
    # the session expires at the group's timeout, not the server's
    h.advance(SESSION + 1)
    assert "a" in h.g().members
    h.advance(50000 - SESSION)
    assert h.g().members == {}
