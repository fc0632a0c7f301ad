"""ACLs on the share group APIs, as Kafka's KafkaApis checks them: ShareGroupHeartbeat needs READ on the group
and DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED for the whole request otherwise, as
ConsumerGroupHeartbeat); ShareFetch and ShareAcknowledge need READ on the group (GROUP_AUTHORIZATION_FAILED at
the top) and READ on each topic: a topic it may not read is TOPIC_AUTHORIZATION_FAILED in that partition's
error (and its acknowledgements' error), the others are served. Over a socket (kafka-python's codecs), and
with confluent-kafka's ShareConsumer and Java's KafkaShareConsumer subscribed to a topic they may not
describe."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, ShareConsumer

from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.share_group import ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupHeartbeatRequest
from tests.support.wire import WireClient

pytestmark = pytest.mark.timeout(120)

# the ANONYMOUS principal: every group but "locked"; every app-* topic; "seen" described but not read;
# "hidden" nothing at all
ACLS = ["allow User:ANONYMOUS all group:*", "deny User:ANONYMOUS read group:locked",
        "deny User:ANONYMOUS describe group:secret",
        "allow User:ANONYMOUS all topic:prefixed:app-", "allow User:ANONYMOUS describe topic:seen",
        "allow User:ANONYMOUS idempotent_write cluster:kafka-cluster"]
TOPICS = {"app-a": 1, "seen": 1, "hidden": 1}


def _heartbeat(group: str, topics: list[str]) -> ShareGroupHeartbeatRequest:
    return ShareGroupHeartbeatRequest(group_id=group, member_id="m-1", member_epoch=0, rack_id=None,
                                      subscribed_topic_names=topics)


def _fetch(group: str, member: str, epoch: int, parts: list, acks: dict | None = None) -> ShareFetchRequest:
    F = ShareFetchRequest.FetchTopic
    P = F.FetchPartition
    acks = acks or {}
    return ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
        max_bytes=1 << 20, max_records=100, batch_size=100, share_acquire_mode=0, is_renew_ack=False,
        topics=[F(topic_id=tid, partitions=[P(partition_index=0, acknowledgement_batches=[
            P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
            for f, last, t in acks.get(tid, [])])]) for tid in parts],
        forgotten_topics_data=[])


def _ack(group: str, member: str, epoch: int, acks: dict) -> ShareAcknowledgeRequest:
    A = ShareAcknowledgeRequest.AcknowledgeTopic
    P = A.AcknowledgePartition
    return ShareAcknowledgeRequest(group_id=group, member_id=member, share_session_epoch=epoch, is_renew_ack=False,
                                   topics=[A(topic_id=tid, partitions=[P(partition_index=0, acknowledgement_batches=[
                                       P.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=[t])
                                       for f, last, t in batches])]) for tid, batches in acks.items()])


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=str(i).encode())
    assert p.flush(10) == 0


@pytest.mark.tenure(acls=ACLS, topics=TOPICS)
def test_share_apis_check_the_group_and_each_topic_as_kafka_does(tenure_server):
    st = tenure_server
    tid = {name: st.call(lambda n=name: st.server.topics.get(n).topic_id) for name in TOPICS}
    with WireClient.to(st.bootstrap) as w:
        # ShareGroupHeartbeat: READ on the group, DESCRIBE on every subscribed topic, else the whole request
        assert w.call(_heartbeat("locked", ["app-a"]), 1).error_code == E.GROUP_AUTHORIZATION_FAILED
        assert w.call(_heartbeat("g", ["app-a", "hidden"]), 1).error_code == E.TOPIC_AUTHORIZATION_FAILED
        assert st.group("g") is None                                       # refused before the coordinator
        joined = w.call(_heartbeat("g", ["app-a", "seen"]), 1)             # DESCRIBE is enough to subscribe
        assert joined.error_code == 0 and joined.member_epoch == 1
        # ShareFetch: READ on the group at the top; READ on each topic per partition, the others served
        assert w.call(_fetch("locked", "m-1", 0, [tid["app-a"]]), 2).error_code == E.GROUP_AUTHORIZATION_FAILED
        r = w.call(_fetch("g", "m-1", 0, [tid["app-a"], tid["seen"], tid["hidden"]]), 2)
        assert r.error_code == 0
        got = {t.topic_id: t.partitions[0] for t in r.responses}
        assert got[tid["seen"]].error_code == E.TOPIC_AUTHORIZATION_FAILED
        assert got[tid["hidden"]].error_code == E.TOPIC_AUTHORIZATION_FAILED
        assert (got[tid["seen"]].records, got[tid["seen"]].acquired_records) == (b"", [])
        assert tid["app-a"] not in got or got[tid["app-a"]].error_code == 0    # nothing yet (latest: offset 0)
        _produce(st.bootstrap, "app-a", 2)
        r = w.call(_fetch("g", "m-1", 1, [tid["app-a"]]), 2)
        a = r.responses[0].partitions[0]
        assert a.error_code == 0 and [(x.first_offset, x.last_offset) for x in a.acquired_records] == [(0, 1)]
        # acknowledgements for a topic it may not read: that partition's acknowledge error, the rest applied
        r = w.call(_fetch("g", "m-1", 2, [tid["app-a"], tid["seen"]],
                          {tid["app-a"]: [(0, 0, 1)], tid["seen"]: [(0, 0, 1)]}), 2)
        got = {t.topic_id: t.partitions[0] for t in r.responses}
        assert (got[tid["seen"]].error_code, got[tid["seen"]].acknowledge_error_code) == (
            E.TOPIC_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED)
        assert got[tid["app-a"]].acknowledge_error_code == 0
        # ShareAcknowledge: the same per partition; READ on the group at the top
        assert w.call(_ack("locked", "m-1", 3, {tid["app-a"]: [(1, 1, 1)]}), 2).error_code \
            == E.GROUP_AUTHORIZATION_FAILED
        r = w.call(_ack("g", "m-1", 3, {tid["app-a"]: [(1, 1, 1)], tid["hidden"]: [(0, 0, 1)]}), 2)
        codes = {t.topic_id: t.partitions[0].error_code for t in r.responses}
        assert r.error_code == 0 and codes == {tid["app-a"]: 0, tid["hidden"]: E.TOPIC_AUTHORIZATION_FAILED}
    view = st.share_partition("g", "app-a", 0)
    assert view["start_offset"] == 2 and view["records"] == []             # both app-a records accepted
    assert st.share_partition("g", "seen", 0) is None                       # never read


@pytest.mark.tenure(acls=ACLS, topics=TOPICS)
def test_share_group_offset_apis_check_the_group_and_each_topic(tenure_server):
    """DescribeShareGroupOffsets: DESCRIBE on each group (30 for that group) and on each topic named (29 for each
    of its partitions); AlterShareGroupOffsets: READ on
    each topic (29 per partition); DeleteShareGroupOffsets: READ on each topic (29 for that topic) - the
    ACLs Kafka asks for them; the topics it may use are served."""
    from tenure.protocol.share_group import (
        AlterShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequest,
    )
    st = tenure_server
    tid = {name: st.call(lambda n=name: st.server.topics.get(n).topic_id) for name in TOPICS}
    D = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    DT = D.DescribeShareGroupOffsetsRequestTopic
    AT = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    DLT = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    with WireClient.to(st.bootstrap) as w:
        # an empty share group with share partitions of app-a and seen... seen cannot be fetched: app-a only
        assert w.call(_heartbeat("og", ["app-a"]), 1).error_code == 0
        assert w.call(_fetch("og", "m-1", 0, [tid["app-a"]]), 2).error_code == 0
        assert w.call(_fetch("og", "m-1", -1, []), 2).error_code == 0
        leave = ShareGroupHeartbeatRequest(group_id="og", member_id="m-1", member_epoch=-1, rack_id=None,
                                           subscribed_topic_names=None)
        assert w.call(leave, 1).error_code == 0
        r = w.call(DescribeShareGroupOffsetsRequest(groups=[
            D(group_id="og", topics=[DT(topic_name=n, partitions=[0]) for n in ("app-a", "seen", "hidden")]),
            D(group_id="secret", topics=None), D(group_id="og", topics=None)]), 1)
        named, secret, every = r.groups
        assert secret.error_code == E.GROUP_AUTHORIZATION_FAILED
        assert [(t.topic_name, t.partitions[0].error_code) for t in named.topics] == [
            ("app-a", 0), ("seen", 0), ("hidden", E.TOPIC_AUTHORIZATION_FAILED)]
        assert [t.topic_name for t in every.topics] == ["app-a"]
        r = w.call(AlterShareGroupOffsetsRequest(group_id="og", topics=[
            AT(topic_name=n, partitions=[AT.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])
            for n in ("app-a", "seen")]), 0)
        assert r.error_code == 0 and [(t.topic_name, t.partitions[0].error_code) for t in r.responses] == [
            ("app-a", 0), ("seen", E.TOPIC_AUTHORIZATION_FAILED)]
        r = w.call(DeleteShareGroupOffsetsRequest(group_id="og", topics=[DLT(topic_name=n) for n in ("hidden", "app-a")]),
                   0)
        assert r.error_code == 0 and [(t.topic_name, t.error_code) for t in r.responses] == [
            ("hidden", E.TOPIC_AUTHORIZATION_FAILED), ("app-a", 0)]
    assert st.share_partition("og", "app-a", 0) is None                     # its offsets deleted


def _first_error(consumer: ShareConsumer, timeout: float = 30):
    """The first error the consumer reports: raised by poll or carried by a message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            messages = consumer.poll(0.5)
        except KafkaException as exc:
            return exc.args[0]
        for m in messages:
            if m.error():
                return m.error()
    raise AssertionError("no error")


@pytest.mark.tenure(acls=ACLS, topics=TOPICS)
def test_confluent_share_consumer_of_a_topic_it_may_not_describe(tenure_server):
    """librdkafka's ShareConsumer subscribed to a topic without DESCRIBE sees TOPIC_AUTHORIZATION_FAILED;
    subscribed to an app-* topic, in the same group kind, it consumes."""
    st = tenure_server
    c = ShareConsumer({"bootstrap.servers": st.bootstrap, "group.id": "g-hidden"})
    try:
        c.subscribe(["hidden"])
        err = _first_error(c)
        assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and "ShareGroupHeartbeat" in err.str(), err
    finally:
        c.close()
    assert st.group("g-hidden") is None
    _produce(st.bootstrap, "seen", 1)
    c = ShareConsumer({"bootstrap.servers": st.bootstrap, "group.id": "g-seen"})
    try:
        c.subscribe(["seen"])                      # DESCRIBE only: it joins, its fetches are refused
        err = _first_error(c)
        assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED and "ShareFetch failed for seen" in err.str(), err
        assert st.group("g-seen") is not None and st.group("g-seen").kind == "share"
    finally:
        c.close()
    assert st.share_partition("g-seen", "seen", 0) is None                  # nothing acquired


@pytest.mark.java
def test_java_share_consumer_of_topics_it_may_not_describe_or_read():
    """Java's KafkaShareConsumer (kafka-clients 4.3): subscribed to a topic without DESCRIBE, poll throws
    TopicAuthorizationException (the heartbeat's refusal); with DESCRIBE but no READ it joins and its fetches
    are refused with the same exception; an app-* topic it consumes."""
    from tenure.config import ServerConfig
    from tenure.server import ServerThread
    from tests.integration.test_share_groups import wait_for
    from tests.integration.test_share_groups_java import ShareJvm

    cfg = ServerConfig(port=0, acls=ACLS, share_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as st:
        st.create_topics(TOPICS)
        jvms = []
        try:
            for group, topic in (("j-hidden", "hidden"), ("j-seen", "seen")):
                jvms.append(j := ShareJvm(st, group, topic, group))
            _produce(st.bootstrap, "seen", 1)
            for j in jvms:
                wait_for(lambda j=j: j.errors() or j.proc.poll() is not None, timeout=60, what=j.dump())
                assert [e["exception"] for e in j.errors()] == [
                    "org.apache.kafka.common.errors.TopicAuthorizationException"], j.dump()
            assert st.group("j-hidden") is None and st.group("j-seen").kind == "share"
            assert st.share_partition("j-seen", "seen", 0) is None
        finally:
            for j in jvms:
                if j.proc.poll() is None:
                    j.kill()
