"""OffsetCommit v10 and OffsetFetch v10 (Kafka 4.3: topics named by id, KIP-848's follow-up), as Kafka's request
handler serves them: each id resolved to its topic's name from the topic table before the group coordinator sees
the request, an id no topic has answered UNKNOWN_TOPIC_ID (100) for each of its partitions (before the topic's
authorization and existence checks), and every answer naming topics by id again. Over the wire with kafka-python's
codec, and a Java 4.3 consumer that commits and fetches through v10 (the versions on the wire in the capture),
against tenure as 4.3; against tenure as 4.1 the same consumer uses v9 (4.1's newest)."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.clients import create_topic
from tests.support.groupwire import fetch_all
from tests.support.wire import WireClient, request_bytes

UNKNOWN_TOPIC_ID = 100


def topic_id(st, name: str) -> uuid.UUID:
    return st.call(lambda: st.server.topics.get(name).topic_id)


def commit_v10(wire, group: str, offsets: dict[uuid.UUID, dict[int, int]], version: int = 10) -> list[tuple]:
    """One OffsetCommit naming topics by id: [(topic id, partition, error)] as answered, in the answer's order."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                              topics=[T(topic_id=tid, partitions=[
                                  P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                    committed_metadata="m") for p, o in parts.items()])
                                  for tid, parts in offsets.items()])
    r = wire.call(req, version)
    return [(t.topic_id, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]


def fetch_v10(wire, group: str, topics: dict[uuid.UUID, list[int]] | None) -> tuple[int, list[tuple]]:
    """(group error, [(topic id, partition, offset, metadata, error)]) of one OffsetFetch v10."""
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    req = OffsetFetchRequest(groups=[G(group_id=group, member_id=None, member_epoch=-1, topics=None if topics is None
                                       else [T(topic_id=tid, partition_indexes=ps) for tid, ps in topics.items()])],
                             require_stable=False)
    [g] = wire.call(req, 10).groups
    return g.error_code, [(t.topic_id, p.partition_index, p.committed_offset, p.metadata, p.error_code)
                          for t in g.topics for p in t.partitions]


def test_commit_and_fetch_by_topic_id(tenure_server, wire):
    bs = tenure_server.bootstrap
    create_topic(bs, "ids-a", 2)
    create_topic(bs, "ids-b", 1)
    a, b, ghost = topic_id(tenure_server, "ids-a"), topic_id(tenure_server, "ids-b"), uuid.uuid4()
    # an unknown id: 100 for each of its partitions, in the request's order; the rest is committed by name
    assert commit_v10(wire, "g-ids", {a: {1: 11, 0: 10}, ghost: {0: 1, 3: 2}, b: {0: 20, 7: 1}}) == [
        (a, 1, 0), (a, 0, 0), (ghost, 0, UNKNOWN_TOPIC_ID), (ghost, 3, UNKNOWN_TOPIC_ID), (b, 0, 0), (b, 7, 3)]
    # the offsets are the group's by name: an older version reads them
    assert fetch_all(wire, ["g-ids"]) == {"g-ids": {("ids-a", 0): 10, ("ids-a", 1): 11, ("ids-b", 0): 20}}
    # a named fetch: by id, the unknown id's partitions 100
    assert fetch_v10(wire, "g-ids", {b: [0, 5], ghost: [2], a: [1]}) == (0, [
        (b, 0, 20, "m", 0), (b, 5, -1, "", 0), (a, 1, 11, "m", 0), (ghost, 2, -1, "", UNKNOWN_TOPIC_ID)])
    # all offsets: each topic by the id it has
    assert fetch_v10(wire, "g-ids", None) == (0, [(a, 0, 10, "m", 0), (a, 1, 11, "m", 0), (b, 0, 20, "m", 0)])


def test_a_commit_of_unknown_ids_alone_stores_nothing_and_creates_no_group(tenure_server, wire):
    ghost = uuid.uuid4()
    assert commit_v10(wire, "g-ghost", {ghost: {0: 5}}) == [(ghost, 0, UNKNOWN_TOPIC_ID)]
    assert tenure_server.group("g-ghost") is None
    # the zero id (kafka-python reads it back as None) names no topic either
    assert commit_v10(wire, "g-ghost", {uuid.UUID(int=0): {0: 5}}) == [(None, 0, UNKNOWN_TOPIC_ID)]
    assert tenure_server.group("g-ghost") is None


def test_fetch_all_leaves_out_a_deleted_topic_which_v10_cannot_name(tenure_server, wire):
    from confluent_kafka.admin import AdminClient
    bs = tenure_server.bootstrap
    create_topic(bs, "ids-kept", 1)
    create_topic(bs, "ids-gone", 1)
    kept, gone = topic_id(tenure_server, "ids-kept"), topic_id(tenure_server, "ids-gone")
    assert commit_v10(wire, "g-del", {kept: {0: 3}, gone: {0: 4}}) == [(kept, 0, 0), (gone, 0, 0)]
    admin = AdminClient({"bootstrap.servers": bs})
    admin.delete_topics(["ids-gone"])["ids-gone"].result(30)
    assert fetch_all(wire, ["g-del"])["g-del"][("ids-gone", 0)] == 4       # v9 still names it
    assert fetch_v10(wire, "g-del", None) == (0, [(kept, 0, 3, "m", 0)])
    assert fetch_v10(wire, "g-del", {gone: [0]}) == (0, [(gone, 0, -1, "", UNKNOWN_TOPIC_ID)])


def test_group_errors_at_v10(tenure_server, wire):
    create_topic(tenure_server.bootstrap, "ids-gen", 1)
    t = topic_id(tenure_server, "ids-gen")
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(group_id="g-gen10", generation_id_or_member_epoch=3, member_id="m",
                              group_instance_id=None, topics=[T(topic_id=t, partitions=[
                                  T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                 committed_leader_epoch=-1, committed_metadata="")])])
    r = wire.call(req, 10)          # a generation for an unknown group: GROUP_ID_NOT_FOUND (v9+), named by id
    assert [(x.topic_id, p.error_code) for x in r.topics for p in x.partitions] == [(t, 69)]


def test_tenure_as_4_1_refuses_v10_by_closing_the_connection():
    """Kafka 4.2 is the first release serving v10 of both (kafka-python's recording of 4.1: OffsetCommit 2-9)."""
    with ServerThread(ServerConfig(port=0, kafka_version="4.1")) as st:
        with WireClient.to(st.bootstrap) as c:
            c.send_raw(request_bytes(OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                                         group_instance_id=None, topics=[]), 10))
            assert c.is_closed_by_peer(timeout=5)
        with WireClient.to(st.bootstrap) as c:         # the server serves on
            assert commit_v10(c, "g", {}, version=9) == []


def java_commit_fetch(st, topic: str, group: str, protocol: str) -> set[tuple[str, int]]:
    """CommitFetch (tests/java): a Java 4.3 consumer of `protocol` (group.protocol) commits 5 and a second one
    fetches it; the (API, version) pairs of the OffsetCommit and OffsetFetch requests they sent."""
    from tests.support.java import run_java
    create_topic(st.bootstrap, topic, 1)
    committed, fetched = run_java("CommitFetch", st.bootstrap, topic, group, "5", protocol, timeout=120)
    assert committed == {"type": "committed", "offset": 5}
    assert fetched == {"type": "fetched", "offset": 5, "metadata": "cf", "position": 5}
    exchanges = [x for x in st.requests() if x.api in ("OffsetCommit", "OffsetFetch")]
    assert {x.error for x in exchanges} == {0}
    return {(x.api, x.version) for x in exchanges}


@pytest.mark.java
def test_java_consumer_protocol_consumer_commits_and_fetches_through_v10(tenure_server):
    """Java 4.3's consumer of the consumer protocol (KIP-848) names topics by id when it knows every topic's id:
    v10 of both against tenure as 4.3 (the second consumer's committed(), before it has the topic's metadata,
    fetches by name at v9); its classic consumer keeps to names (v9), as against Kafka 4.3."""
    assert java_commit_fetch(tenure_server, "ids-java", "g-java10", "consumer") == {
        ("OffsetCommit", 10), ("OffsetFetch", 10), ("OffsetFetch", 9)}
    with WireClient.to(tenure_server.bootstrap) as c:
        assert fetch_all(c, ["g-java10"]) == {"g-java10": {("ids-java", 0): 5}}
    since = max(x.seq for x in tenure_server.requests())
    create_topic(tenure_server.bootstrap, "ids-classic", 1)
    from tests.support.java import run_java
    run_java("CommitFetch", tenure_server.bootstrap, "ids-classic", "g-classic", "5", "classic", timeout=120)
    assert {(x.api, x.version) for x in tenure_server.requests(since=since)
            if x.api in ("OffsetCommit", "OffsetFetch")} == {("OffsetCommit", 9), ("OffsetFetch", 9)}


@pytest.mark.java
@pytest.mark.tenure(kafka_version="4.1")
def test_java_consumer_uses_v9_against_tenure_as_4_1(tenure_server):
    assert java_commit_fetch(tenure_server, "ids-java41", "g-java9", "consumer") == {
        ("OffsetCommit", 9), ("OffsetFetch", 9)}
