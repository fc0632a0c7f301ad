"""Principals other than ANONYMOUS, through the request context: each request decoded from its bytes, its
context made by the server's dispatcher and given a principal (what authentication will set), then the access
hook and the request's owner, as the dispatcher runs them. The answers are Kafka's for each check KafkaApis
makes: whole-request refusals (groups, transactional ids, the cluster) and per-part ones (topics, groups of a
batch), Metadata leaving out what may not be described, authorized operations from the ACLs."""
from __future__ import annotations

import dataclasses
import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.consumer.group import JoinGroupRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import EndTxnRequest, InitProducerIdRequest, ProduceRequest

from tenure.config import ServerConfig
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import decode_request
from tenure.protocol.error_responses import error_response
from tenure.protocol.errors import ErrorCode as E
from tenure.security.acls import parse_acl
from tenure.server import ServerThread
from tenure.server.connection import Peer
from tests.support.wire import build_batch, request_bytes

ACLS = [
    "allow User:alice all topic:prefixed:a-", "allow User:alice all group:prefixed:a-",
    "allow User:alice read topic:shared", "allow User:bob write topic:shared",
    "deny User:alice describe topic:a-secret",
    "allow User:alice write transactional_id:a-tx",
    "allow User:admin alter cluster:kafka-cluster", "allow User:broker cluster_action cluster:kafka-cluster",
]
TOPICS = {"a-1": 2, "a-secret": 1, "shared": 1, "b-1": 1}


@pytest.fixture(scope="module")
def server():
    with ServerThread(ServerConfig(port=0, acls=tuple(ACLS), super_users=("root",))) as st:
        st.create_topics(TOPICS)
        yield st


def call(st: ServerThread, principal: str, request, version: int, host: str = "/127.0.0.1"):
    """The answer to `request` sent as `principal` from `host` (access hook, then the owner)."""
    req = decode_request(request_bytes(request, version)[4:])
    dispatch = st.live.parts.dispatch

    async def run():
        ctx = dataclasses.replace(dispatch.context(req, Peer(1, ("127.0.0.1", 1), host, 0)), principal=principal)
        code = dispatch.access(req, ctx)
        if code:
            return error_response(req, code)
        return await dispatch.routes[SUPPORTED[req.api_key].owner](req, ctx)
    return st.call(run)


def metadata(st, principal, *topics, version=12, auto=False, ops=False):
    T = MetadataRequest.MetadataRequestTopic
    body = MetadataRequest(topics=[T(name=t, topic_id=None) for t in topics] if topics else None,
                           allow_auto_topic_creation=auto, include_topic_authorized_operations=ops)
    return {t.name: t for t in call(st, principal, body, version).topics}


def test_metadata_for_all_topics_leaves_out_what_the_principal_may_not_describe(server):
    assert set(metadata(server, "User:alice")) == {"a-1", "shared"}      # a-secret denied, b-1 unnamed
    assert set(metadata(server, "User:bob")) == {"shared"}                # WRITE implies DESCRIBE
    assert set(metadata(server, "User:nobody")) == set()
    assert set(metadata(server, "User:root")) >= set(TOPICS)              # a super user sees everything


def test_metadata_for_named_topics_answers_topic_authorization_failed(server):
    got = metadata(server, "User:alice", "a-1", "a-secret", "b-1", "a-new")
    assert {n: t.error_code for n, t in got.items()} == {
        "a-1": 0, "a-secret": E.TOPIC_AUTHORIZATION_FAILED, "b-1": E.TOPIC_AUTHORIZATION_FAILED,
        "a-new": E.UNKNOWN_TOPIC_OR_PARTITION}
    assert got["a-secret"].partitions == [] and got["a-secret"].topic_id == uuid.UUID(int=0)


def test_metadata_auto_creation_needs_create(server):
    got = metadata(server, "User:bob", "shared-new", auto=True)    # no ACL names it: not even DESCRIBE
    assert got["shared-new"].error_code == E.TOPIC_AUTHORIZATION_FAILED
    got = metadata(server, "User:alice", "a-auto", auto=True)      # ALL on a-*: CREATE
    assert got["a-auto"].error_code == 0 and len(got["a-auto"].partitions) == 1


def test_authorized_operations_come_from_the_acls(server):
    got = metadata(server, "User:alice", "a-1", "shared", version=10, ops=True)
    assert got["a-1"].authorized_operations == {3, 4, 5, 6, 7, 8, 10, 11}            # ALL
    assert got["shared"].authorized_operations == {3, 8}                              # READ, DESCRIBE
    r = call(server, "User:alice", DescribeGroupsRequest(groups=["a-g", "b-g"], include_authorized_operations=True),
             5)
    assert {g.group_id: (g.error_code, g.authorized_operations) for g in r.groups} == {
        "a-g": (0, {3, 6, 8, 10, 11}), "b-g": (E.GROUP_AUTHORIZATION_FAILED, None)}


def _produce(topic: str):
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000,
                          topic_data=[T(name=topic, partition_data=[P(index=0, records=build_batch([(b"k", b"v")]))])])


@pytest.mark.parametrize("principal,topic,code", [
    ("User:bob", "shared", 0), ("User:alice", "shared", E.TOPIC_AUTHORIZATION_FAILED),
    ("User:alice", "a-1", 0), ("User:bob", "missing", E.TOPIC_AUTHORIZATION_FAILED),
    ("User:alice", "a-missing", E.UNKNOWN_TOPIC_OR_PARTITION)])
def test_produce_needs_write_before_the_topic_is_looked_up(server, principal, topic, code):
    r = call(server, principal, _produce(topic), 9)
    assert r.responses[0].partition_responses[0].error_code == code


def test_fetch_and_list_offsets_need_read_and_describe(server):
    T = FetchRequest.FetchTopic
    body = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                        topics=[T(topic=t, partitions=[T.FetchPartition(partition=0, fetch_offset=0,
                                                                        partition_max_bytes=1 << 20)])
                                for t in ("shared", "a-1")])
    as_bob = call(server, "User:bob", body, 12)
    assert [t.partitions[0].error_code for t in as_bob.responses] == [E.TOPIC_AUTHORIZATION_FAILED] * 2
    assert [t.partitions[0].error_code for t in call(server, "User:alice", body, 12).responses] == [0, 0]
    L = ListOffsetsRequest.ListOffsetsTopic
    lo = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[L(name="shared", partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    assert call(server, "User:bob", lo, 7).topics[0].partitions[0].error_code == 0          # WRITE: DESCRIBE
    assert call(server, "User:carol", lo, 7).topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_group_apis(server):
    join = JoinGroupRequest(group_id="b-g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                            group_instance_id=None, protocol_type="consumer", protocols=[], reason=None)
    assert call(server, "User:alice", join, 9).error_code == E.GROUP_AUTHORIZATION_FAILED
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    commit = OffsetCommitRequest(group_id="a-g", generation_id_or_member_epoch=-1, member_id="",
                                 group_instance_id=None, retention_time_ms=-1, topics=[
                                     T(name=n, partitions=[T.OffsetCommitRequestPartition(
                                         partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                         committed_metadata="")]) for n in ("a-1", "b-1", "a-none")])
    r = call(server, "User:alice", commit, 8)
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [
        ("a-1", 0), ("b-1", E.TOPIC_AUTHORIZATION_FAILED), ("a-none", E.UNKNOWN_TOPIC_OR_PARTITION)]
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    fetch = OffsetFetchRequest(groups=[G(group_id="a-g", topics=None), G(group_id="b-g", topics=None)],
                               require_stable=False)
    r = call(server, "User:alice", fetch, 8)
    assert [(g.group_id, g.error_code, [t.name for t in g.topics]) for g in r.groups] == [
        ("a-g", 0, ["a-1"]), ("b-g", E.GROUP_AUTHORIZATION_FAILED, [])]
    listed = call(server, "User:alice", ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    assert [g.group_id for g in listed.groups] == ["a-g"]
    assert call(server, "User:nobody", ListGroupsRequest(states_filter=[], types_filter=[]), 5).groups == []
    r = call(server, "User:alice", DeleteGroupsRequest(groups_names=["b-g", "a-none"]), 2)
    assert [(x.group_id, x.error_code) for x in r.results] == [("b-g", E.GROUP_AUTHORIZATION_FAILED),
                                                               ("a-none", E.GROUP_ID_NOT_FOUND)]


def test_find_coordinator_needs_describe_on_the_key(server):
    r = call(server, "User:alice", FindCoordinatorRequest(key_type=0, coordinator_keys=["a-g", "b-g"]), 4)
    assert [(c.key, c.error_code) for c in r.coordinators] == [("a-g", 0), ("b-g", E.GROUP_AUTHORIZATION_FAILED)]
    r = call(server, "User:bob", FindCoordinatorRequest(key="a-tx", key_type=1), 3)
    assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transactions_need_write_on_the_transactional_id(server):
    init = InitProducerIdRequest(transactional_id="a-tx", transaction_timeout_ms=60000, producer_id=-1,
                                 producer_epoch=-1)
    assert call(server, "User:bob", init, 4).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert call(server, "User:alice", init, 4).error_code == 0
    end = EndTxnRequest(transactional_id="b-tx", producer_id=1, producer_epoch=0, committed=True)
    assert call(server, "User:alice", end, 3).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(server):
    init = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1)
    assert call(server, "User:bob", init, 4).error_code == 0                  # WRITE on shared
    assert call(server, "User:carol", init, 4).error_code == E.CLUSTER_AUTHORIZATION_FAILED


def test_topic_admin_apis(server):
    T = CreateTopicsRequest.CreatableTopic
    create = CreateTopicsRequest(topics=[T(name=n, num_partitions=1, replication_factor=-1, assignments=[],
                                           configs=[]) for n in ("a-made", "b-made")],
                                 timeout_ms=1000, validate_only=True)
    r = call(server, "User:alice", create, 7)
    assert [(t.name, t.error_code) for t in r.topics] == [("a-made", 0), ("b-made", E.TOPIC_AUTHORIZATION_FAILED)]
    delete = DeleteTopicsRequest(topic_names=["b-1", "a-gone"], timeout_ms=1000)
    r = call(server, "User:alice", delete, 5)
    assert [(t.name, t.error_code) for t in r.responses] == [("b-1", E.TOPIC_AUTHORIZATION_FAILED),
                                                             ("a-gone", E.UNKNOWN_TOPIC_OR_PARTITION)]
    R = DescribeConfigsRequest.DescribeConfigsResource
    r = call(server, "User:alice", DescribeConfigsRequest(resources=[
        R(resource_type=2, resource_name="a-1", configuration_keys=None),
        R(resource_type=2, resource_name="shared", configuration_keys=None),
        R(resource_type=4, resource_name="0", configuration_keys=None)], include_synonyms=False,
        include_documentation=False), 4)
    assert [x.error_code for x in r.results] == [0, E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]


def test_acls_are_matched_by_host(server):
    server.call(lambda: server.live.parts.authorizer.create([parse_acl("allow User:dave read topic:b-1 from 10.1.2.3")]))
    assert metadata_host(server, "User:dave", "/10.1.2.3") == {"b-1"}
    assert metadata_host(server, "User:dave", "/127.0.0.1") == set()


def metadata_host(st, principal, host):
    return {t.name for t in call(st, principal, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                                include_topic_authorized_operations=False),
                                 12, host).topics}


def test_transaction_admin_and_add_partitions(server):
    from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
    from kafka.protocol.producer import AddPartitionsToTxnRequest
    init = InitProducerIdRequest(transactional_id="a-tx", transaction_timeout_ms=60000, producer_id=-1,
                                 producer_epoch=-1)
    r = call(server, "User:alice", init, 4)
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    add = AddPartitionsToTxnRequest(v3_and_below_transactional_id="a-tx", v3_and_below_producer_id=r.producer_id,
                                    v3_and_below_producer_epoch=r.producer_epoch,
                                    v3_and_below_topics=[T(name="a-1", partitions=[0]), T(name="b-1", partitions=[0])])
    got = call(server, "User:alice", add, 3)
    assert {t.name: t.results_by_partition[0].partition_error_code for t in got.results_by_topic_v3_and_below} == {
        "a-1": E.OPERATION_NOT_ATTEMPTED, "b-1": E.TOPIC_AUTHORIZATION_FAILED}
    d = call(server, "User:alice", DescribeTransactionsRequest(transactional_ids=["a-tx", "b-tx"]), 0)
    assert [(s.transactional_id, s.error_code) for s in d.transaction_states] == [
        ("a-tx", 0), ("b-tx", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    listing = ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1)
    assert [s.transactional_id for s in call(server, "User:alice", listing, 1).transaction_states] == ["a-tx"]
    assert call(server, "User:bob", listing, 1).transaction_states == []


def test_a_followers_fetch_needs_cluster_action_instead_of_read(server):
    T = FetchRequest.FetchTopic
    body = FetchRequest(replica_id=1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                        topics=[T(topic="a-1", partitions=[T.FetchPartition(partition=0, fetch_offset=0,
                                                                            partition_max_bytes=1 << 20)])])
    assert call(server, "User:alice", body, 12).responses[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert call(server, "User:broker", body, 12).responses[0].partitions[0].error_code == 0


def test_cluster_operations_are_none_without_describe_on_the_cluster(server):
    from kafka.protocol.admin import DescribeClusterRequest
    body = DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1,
                                  include_fenced_brokers=False)
    assert call(server, "User:admin", body, 1).authorized_operations == {7, 8}           # ALTER implies DESCRIBE
    assert call(server, "User:broker", body, 1).authorized_operations == set()          # CLUSTER_ACTION only
    assert call(server, "User:root", body, 1).authorized_operations == {5, 7, 8, 9, 10, 11, 12}


def test_offset_for_leader_epoch_needs_cluster_action_or_describe(server):
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest as O
    T = O.OffsetForLeaderTopic
    body = lambda replica: O(replica_id=replica, topics=[T(topic="a-1", partitions=[  # noqa: E731
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])
    assert call(server, "User:broker", body(1), 4).topics[0].partitions[0].error_code == 0      # CLUSTER_ACTION
    assert call(server, "User:alice", body(-1), 4).topics[0].partitions[0].error_code == 0      # DESCRIBE on a-1
    assert call(server, "User:bob", body(-1), 4).topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_the_user_and_quorum_apis_need_the_cluster_and_share_groups_their_group(server):
    """DescribeUserScramCredentials and DescribeQuorum need DESCRIBE on the cluster, AlterUserScramCredentials
    ALTER (KafkaApis: CLUSTER_AUTHORIZATION_FAILED); a share group member needs READ on its group
    (GROUP_AUTHORIZATION_FAILED)."""
    from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

    from tenure.protocol.share_group import ShareGroupHeartbeatRequest

    describe = DescribeUserScramCredentialsRequest(users=None)
    U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    alter = AlterUserScramCredentialsRequest(deletions=[], upsertions=[U(
        name="carol", mechanism=2, iterations=4096, salt=b"s" * 16, salted_password=b"p" * 64)])
    assert call(server, "User:alice", describe, 0).error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert call(server, "User:admin", describe, 0).error_code == E.NONE           # ALTER implies DESCRIBE
    assert [(r.user, r.error_code) for r in call(server, "User:alice", alter, 0).results] \
        == [("carol", E.CLUSTER_AUTHORIZATION_FAILED)]
    assert [(r.user, r.error_code) for r in call(server, "User:admin", alter, 0).results] == [("carol", E.NONE)]
    heartbeat = ShareGroupHeartbeatRequest(group_id="a-share", member_id="m", member_epoch=0, rack_id=None,
                                           subscribed_topic_names=["a-1"])
    assert call(server, "User:bob", heartbeat, 1).error_code == E.GROUP_AUTHORIZATION_FAILED
    ok = call(server, "User:alice", heartbeat, 1)
    assert ok.error_code == E.NONE and ok.member_epoch == 1
