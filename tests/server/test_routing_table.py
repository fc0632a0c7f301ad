"""The one routing table and the one request context: every served API names its owner (broker, group
coordinator, transaction coordinator) in protocol/apis.py, the dispatcher looks it up once after the fault rules
and the access hook, and every handler gets the context of its request (the broker and connection it came in
on, the client, the version)."""
from __future__ import annotations

import struct

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from tenure.broker.dataplane import Broker, Node
from tenure.broker.topics import TopicRegistry
from tenure.coordinator import GROUP_APIS
from tenure.coordinator.transactions import TXN_APIS
from tenure.protocol.apis import BROKER, GROUP, SUPPORTED, TRANSACTION
from tenure.protocol.context import ANONYMOUS, PLAINTEXT
from tenure.protocol.errors import ErrorCode
from tenure.security import apis as security_apis
from tenure.security.acl_apis import AclApis
from tenure.security.users import UserStore
from tenure.server import ServerThread
from tests.support.wire import WireClient, request_bytes

METADATA, INIT_PRODUCER_ID, DESCRIBE_CLUSTER = 3, 22, 60


def owners(owner: str) -> set[int]:
    return {k for k, spec in SUPPORTED.items() if spec.owner == owner}


def test_every_api_has_one_owner_that_serves_it():
    assert owners(BROKER) | owners(GROUP) | owners(TRANSACTION) == set(SUPPORTED)
    assert owners(GROUP) == set(GROUP_APIS)
    assert owners(TRANSACTION) == set(TXN_APIS) | {INIT_PRODUCER_ID}
    handlers = Broker(Node("127.0.0.1", 0), TopicRegistry(1)).handlers
    # the broker's own APIs, and InitProducerId without a transactional id (the idempotent producer's id); the
    # security APIs' handlers (security/apis.py: SCRAM users) and the ACL APIs (over the authorizer) join them in
    # the table the server routes to (build.py)
    security = set(security_apis.handlers(UserStore()))
    acl_handlers = set(AclApis(None).handlers())
    assert not set(handlers) & (security | acl_handlers) and not security & acl_handlers
    assert owners(BROKER) | {INIT_PRODUCER_ID} == set(handlers) | security | acl_handlers
    with ServerThread() as st:                       # the server's table: all of them
        assert set(st.server.handlers) == set(handlers) | security | acl_handlers


def _recording(server: ServerThread, api_key: int) -> list:
    seen: list = []
    real = server.server.handlers[api_key]

    async def record(req, ctx):
        seen.append(ctx)
        return await real(req, ctx)
    server.call(server.server.handlers.__setitem__, api_key, record)
    return seen


def test_a_broker_handler_gets_the_context_of_its_request():
    with ServerThread(brokers=2) as st:
        seen = _recording(st, METADATA)
        ports = [b.port for b in st.server.cluster.brokers.values()]
        for broker, port in enumerate(ports):
            with WireClient("127.0.0.1", port) as c:
                local = c.sock.getsockname()
                c.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
            ctx = seen[-1]
            assert (ctx.broker_id, ctx.api_key, ctx.api_version, ctx.client_id) == (broker, METADATA, 12, "wire")
            assert ctx.peer == f"{local[0]}:{local[1]}" and ctx.client_host == "/127.0.0.1"
            assert (ctx.listener, ctx.principal) == (PLAINTEXT, ANONYMOUS)
        assert seen[0].connection_id != seen[1].connection_id


def test_the_context_s_broker_is_the_one_the_leader_checks_use():
    """ListOffsets to the broker that does not lead the partition: NOT_LEADER_OR_FOLLOWER, read from the context
    (no ambient state), while the leader answers."""
    with ServerThread(brokers=2, replication_factor=1) as st:
        with WireClient.to(st.bootstrap.split(",")[0]) as c:
            c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="lo")],
                                   allow_auto_topic_creation=True), 12)
        leader = st.server.cluster.leader_of("lo", 0)
        T = ListOffsetsRequest.ListOffsetsTopic
        req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name="lo", partitions=[
            T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
        codes = {}
        for b, node in st.server.cluster.brokers.items():
            with WireClient("127.0.0.1", node.port) as c:
                codes[b] = c.call(req, 7).topics[0].partitions[0].error_code
        assert codes[leader] == ErrorCode.NONE
        assert codes[1 - leader] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def answer(c: WireClient, req, version: int, client_id: str):
    c.send_raw(request_bytes(req, version, client_id=client_id))
    payload = c.read_frame()
    return DescribeClusterResponse.decode(struct.pack(">i", len(payload)) + payload, version=version, header=True,
                                          framed=True)


def test_the_access_hook_comes_before_every_owner_and_answers_kafka_s_error():
    """The hook SASL and ACLs will plug into: a refusal is answered with the API's own error response and the
    owner never sees the request; an API with no error answer (Metadata) has its connection closed; the server
    goes on serving that client's next connection and everyone else."""
    with ServerThread() as st:
        seen = _recording(st, DESCRIBE_CLUSTER)
        metadata_seen = _recording(st, METADATA)

        def deny(req, ctx):
            if ctx.client_id == "denied":
                return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return 0
        st.call(setattr, st.server.dispatch, "access", deny)
        describe = DescribeClusterRequest(include_cluster_authorized_operations=False)
        with WireClient.to(st.bootstrap) as c:
            refused, allowed = (answer(c, describe, 0, client_id) for client_id in ("denied", "allowed"))
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and refused.brokers == []
        assert allowed.error_code == 0 and allowed.brokers
        assert [ctx.client_id for ctx in seen] == ["allowed"]
        with WireClient.to(st.bootstrap) as c:
            c.send_raw(request_bytes(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12,
                                     client_id="denied"))
            assert c.is_closed_by_peer()
        with WireClient.to(st.bootstrap) as c:
            assert c.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12).brokers
        assert [ctx.client_id for ctx in metadata_seen] == ["wire"]
        assert st.server.metrics.closed_connections["access_refused"] == 1
