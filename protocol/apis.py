"""The one table of APIs and version ranges this server serves; ApiVersions is generated from it.

An API appears here only once its handler is real. Request/response classes are kafka-python 3's
schema-driven `ApiMessage` codecs.

tenure presents itself as Kafka 4.0 (`KAFKA_VERSION`): no served API goes beyond the version Kafka 4.0 serves
(checked against kafka-python's table of broker versions at import), and the ones clients infer a broker's
version from are served up to 4.0's: ListOffsets v10 (kafka-python's test for 4.0), Fetch v17, Produce v12.
Older versions stay served (tenure keeps answering clients that Kafka 4.0 no longer does).
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from .consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from .share_group import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)

# Who answers an API (the routing table's owner column): the broker that took the request (the data plane and
# the admin APIs), the group coordinator, or the transaction coordinator. The dispatcher does one lookup.
BROKER, GROUP, TRANSACTION = "broker", "group", "transaction"


@dataclass(frozen=True)
class ApiSpec:
    key: int
    name: str
    request: type[ApiMessage]          # kafka-python's classes (untyped: their attributes come from the schema)
    response: type[ApiMessage]
    min_version: int
    max_version: int
    owner: str = BROKER

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def flexible(self, version: int) -> bool:
        return self.request.flexible_version_q(version)


def _spec(req, resp, lo: int, hi: int, owner: str = BROKER) -> ApiSpec:
    assert req.API_KEY == resp.API_KEY
    assert hi <= req.max_version and hi <= resp.max_version, (req.name, hi)
    return ApiSpec(req.API_KEY, req.name.removesuffix("Request"), req, resp, lo, hi, owner)


_TABLE = [
    _spec(ProduceRequest, ProduceResponse, 3, 12),
    _spec(FetchRequest, FetchResponse, 4, 17),
    _spec(ListOffsetsRequest, ListOffsetsResponse, 1, 10),
    _spec(MetadataRequest, MetadataResponse, 0, 12),
    _spec(FindCoordinatorRequest, FindCoordinatorResponse, 0, 6),
    _spec(ApiVersionsRequest, ApiVersionsResponse, 0, 4),
    _spec(CreateTopicsRequest, CreateTopicsResponse, 2, 7),
    _spec(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6),
    _spec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4),
    _spec(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
    _spec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
    _spec(DescribeClusterRequest, DescribeClusterResponse, 0, 1),
    # admin (broker/admin_apis.py)
    _spec(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
    _spec(AlterConfigsRequest, AlterConfigsResponse, 0, 2),
    _spec(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 4),
    _spec(ElectLeadersRequest, ElectLeadersResponse, 0, 2),
    _spec(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
    _spec(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 0),
    _spec(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0),
    _spec(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0),
    # the classic group coordinator
    _spec(OffsetCommitRequest, OffsetCommitResponse, 0, 9, GROUP),
    _spec(OffsetFetchRequest, OffsetFetchResponse, 0, 9, GROUP),
    _spec(JoinGroupRequest, JoinGroupResponse, 0, 9, GROUP),
    _spec(HeartbeatRequest, HeartbeatResponse, 0, 4, GROUP),
    _spec(LeaveGroupRequest, LeaveGroupResponse, 0, 5, GROUP),
    _spec(SyncGroupRequest, SyncGroupResponse, 0, 5, GROUP),
    _spec(DescribeGroupsRequest, DescribeGroupsResponse, 0, 5, GROUP),
    _spec(ListGroupsRequest, ListGroupsResponse, 0, 5, GROUP),
    _spec(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2, GROUP),
    _spec(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0, GROUP),
    # KIP-848 consumer groups (coordinator/consumer/): kafka-python has no classes, protocol/consumer_group.py
    _spec(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 1, GROUP),
    _spec(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 1, GROUP),
    # the transaction coordinator (coordinator/transactions.py); EndTxn v5 is transactions v2 (KIP-890: an epoch
    # bump on every commit), which tenure does not announce, so clients use v4 and below
    # InitProducerId is the transaction coordinator's in Kafka; one without a transactional id gets its producer
    # id from the broker
    _spec(InitProducerIdRequest, InitProducerIdResponse, 0, 5, TRANSACTION),
    _spec(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5, TRANSACTION),
    _spec(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4, TRANSACTION),
    _spec(EndTxnRequest, EndTxnResponse, 0, 4, TRANSACTION),
    # offsets committed in a transaction go to the group coordinator; v5 is transactions v2, as EndTxn's
    _spec(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 4, GROUP),
    _spec(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0, TRANSACTION),
    _spec(ListTransactionsRequest, ListTransactionsResponse, 0, 1, TRANSACTION),
    _spec(DescribeProducersRequest, DescribeProducersResponse, 0, 0),   # the data plane's (broker/produce.py)
    # KIP-932 share groups (coordinator/share/, broker/share.py): kafka-python has no classes,
    # protocol/share_group.py. Kafka 4.0 served only their early-access v0, which 4.1 removed; served at the
    # versions Kafka 4.3 serves and its clients send (the Java 4.3 KafkaShareConsumer, librdkafka 2.16)
    _spec(ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, 1, 1, GROUP),
    _spec(ShareGroupDescribeRequest, ShareGroupDescribeResponse, 1, 1, GROUP),
    _spec(ShareFetchRequest, ShareFetchResponse, 1, 2),
    _spec(ShareAcknowledgeRequest, ShareAcknowledgeResponse, 1, 2),
    # the share group offset admin APIs (Kafka 4.1+): the broker answers them from its share partitions
    _spec(DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, 0, 1),
    _spec(AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, 0, 0),
    _spec(DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, 0, 0),
]
# the share group APIs are beyond the Kafka 4.0 presented (see above): the version check below skips them
_SHARE_GROUP_APIS = frozenset({76, 77, 78, 79, 90, 91, 92})

KAFKA_VERSION = (4, 0)
SUPPORTED: dict[int, ApiSpec] = {s.key: s for s in _TABLE}
for _s in _TABLE:   # never claim more than the Kafka version presented serves
    if _s.key in _SHARE_GROUP_APIS:
        continue
    assert _s.max_version <= BROKER_API_VERSIONS[KAFKA_VERSION][_s.key][1], (_s.name, _s.max_version)
API_VERSIONS_KEY = ApiVersionsRequest.API_KEY


def api_version_ranges() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every served API, sorted by key."""
    return [(s.key, s.min_version, s.max_version) for s in sorted(_TABLE, key=lambda s: s.key)]
