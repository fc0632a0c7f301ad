"""The one table of APIs and version ranges this server serves; ApiVersions is generated from it.

An API appears here only once its handler is real. Request/response classes are kafka-python 3's
schema-driven `ApiMessage` codecs.

By default tenure presents itself as Kafka 4.3 (`DEFAULT_SERVED`): its whole table, whose versions clients infer
a broker's version from are 4.3's (kafka-python: DescribeLogDirs v5 for 4.3, ListOffsets v11 for 4.2, Produce v13
for 4.1); older versions stay served (tenure keeps answering clients that Kafka 4.0 no longer does). No served API goes beyond
the newest release tenure knows (checked at import). `served_apis("3.9")` is the table a server started with
`--kafka-version 3.9` presents: each API cut to that release's range (protocol/releases.py), the APIs the release
does not have left out - a request outside it is refused as that release refuses it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
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
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.api_message import ApiMessage
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
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from .consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from .releases import DEFAULT_RELEASE, NEWEST, RELEASES, Release, release
from .share_group import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)

UNSUPPORTED_VERSION = 35

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
    announced_from: int | None = None  # ApiVersions' least version when below what is served (KAFKA-18659)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def flexible(self, version: int) -> bool:
        return self.request.flexible_version_q(version)


def _spec(req, resp, lo: int, hi: int, owner: str = BROKER) -> ApiSpec:
    assert req.API_KEY == resp.API_KEY
    assert hi <= req.max_version and hi <= resp.max_version, (req.name, hi)
    return ApiSpec(req.API_KEY, req.name.removesuffix("Request"), req, resp, lo, hi, owner)


_TABLE = [
    _spec(ProduceRequest, ProduceResponse, 0, 13),   # v0-2: message formats v0/v1 (broker/message_format.py)
    _spec(FetchRequest, FetchResponse, 0, 18),       # v0-3: message formats v0/v1 (broker/message_format.py)
    _spec(ListOffsetsRequest, ListOffsetsResponse, 0, 11),   # v0: old_style_offsets (broker/fetch.py)
    _spec(MetadataRequest, MetadataResponse, 0, 13),
    _spec(FindCoordinatorRequest, FindCoordinatorResponse, 0, 6),
    _spec(ApiVersionsRequest, ApiVersionsResponse, 0, 4),
    _spec(CreateTopicsRequest, CreateTopicsResponse, 0, 7),
    _spec(DeleteTopicsRequest, DeleteTopicsResponse, 0, 6),
    _spec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 0, 4),
    _spec(DescribeConfigsRequest, DescribeConfigsResponse, 0, 4),
    _spec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
    _spec(DescribeClusterRequest, DescribeClusterResponse, 0, 2),
    # admin (broker/admin_apis.py)
    _spec(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
    _spec(AlterConfigsRequest, AlterConfigsResponse, 0, 2),
    _spec(DescribeLogDirsRequest, DescribeLogDirsResponse, 0, 5),
    _spec(ElectLeadersRequest, ElectLeadersResponse, 0, 2),
    _spec(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
    _spec(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 1),
    _spec(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0),
    _spec(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0),
    # ACLs (security/acl_apis.py, over the authorizer)
    _spec(DescribeAclsRequest, DescribeAclsResponse, 0, 3),
    _spec(CreateAclsRequest, CreateAclsResponse, 0, 3),
    _spec(DeleteAclsRequest, DeleteAclsResponse, 0, 3),
    # the cluster's metadata and log dirs (broker/quorum_apis.py)
    _spec(AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, 0, 2),
    _spec(DescribeQuorumRequest, DescribeQuorumResponse, 0, 2),
    _spec(ListConfigResourcesRequest, ListConfigResourcesResponse, 0, 1),
    # the classic group coordinator
    _spec(OffsetCommitRequest, OffsetCommitResponse, 0, 10, GROUP),
    _spec(OffsetFetchRequest, OffsetFetchResponse, 0, 10, GROUP),
    _spec(JoinGroupRequest, JoinGroupResponse, 0, 9, GROUP),
    _spec(HeartbeatRequest, HeartbeatResponse, 0, 4, GROUP),
    _spec(LeaveGroupRequest, LeaveGroupResponse, 0, 5, GROUP),
    _spec(SyncGroupRequest, SyncGroupResponse, 0, 5, GROUP),
    _spec(DescribeGroupsRequest, DescribeGroupsResponse, 0, 6, GROUP),
    _spec(ListGroupsRequest, ListGroupsResponse, 0, 5, GROUP),
    _spec(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2, GROUP),
    _spec(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0, GROUP),
    # KIP-848 consumer groups (coordinator/consumer/): kafka-python has no classes, protocol/consumer_group.py
    _spec(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 1, GROUP),
    _spec(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 1, GROUP),
    # the transaction coordinator (coordinator/transactions.py); EndTxn v5 is transactions v2 (KIP-890: an epoch
    # bump on every commit), which clients use when ApiVersions finalizes transaction.version 2
    # InitProducerId is the transaction coordinator's in Kafka; one without a transactional id gets its producer
    # id from the broker
    _spec(InitProducerIdRequest, InitProducerIdResponse, 0, 5, TRANSACTION),
    _spec(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5, TRANSACTION),
    _spec(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4, TRANSACTION),
    _spec(EndTxnRequest, EndTxnResponse, 0, 5, TRANSACTION),
    # offsets committed in a transaction go to the group coordinator; v5 is transactions v2 (the group's
    # partition joins the transaction with the commit), as EndTxn's
    _spec(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5, GROUP),
    _spec(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0, TRANSACTION),
    _spec(ListTransactionsRequest, ListTransactionsResponse, 0, 2, TRANSACTION),
    _spec(DescribeProducersRequest, DescribeProducersResponse, 0, 0),   # the data plane's (broker/produce.py)
    # authentication (security/): a SASL listener's connection answers SaslHandshake and SaslAuthenticate while it
    # authenticates (security/sasl.py); the broker's handlers answer them after it, or on another listener, with
    # ILLEGAL_SASL_STATE as Kafka's do; the SCRAM users (security/apis.py)
    _spec(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1),
    _spec(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
    _spec(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, 0, 0),
    _spec(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, 0, 0),
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
    # the share coordinator's APIs, asked by brokers (Kafka's persister; CLUSTER_ACTION): answered by the broker
    # from the share coordinator its own share partitions persist through (coordinator/share_state/)
    _spec(InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, 0, 0),
    _spec(ReadShareGroupStateRequest, ReadShareGroupStateResponse, 0, 0),
    _spec(WriteShareGroupStateRequest, WriteShareGroupStateResponse, 0, 1),
    _spec(DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, 0, 0),
    _spec(ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, 0, 1),
]

# where tenure's newest version is below Kafka 4.3's, why (`tenure apis` and docs/apis.md print it; a test holds
# it to the table: every API short of 4.3 has its reason, and no other)
SHORT_OF_NEWEST: dict[int, str] = {
}

SUPPORTED: dict[int, ApiSpec] = {s.key: s for s in _TABLE}
for _s in _TABLE:   # never claim more than the newest Kafka release tenure knows serves
    assert _s.max_version <= NEWEST.api_versions[_s.key][1], (_s.name, _s.max_version)
API_VERSIONS_KEY = ApiVersionsRequest.API_KEY


@dataclass(frozen=True)
class ServedApis:
    """What one server presents: the APIs and versions it serves (`specs`, by key) and the Kafka release whose
    features it announces. `explicit`: a release asked for (--kafka-version), whose ranges cut the table."""
    release: Release
    specs: Mapping[int, ApiSpec]
    explicit: bool = False

    def ranges(self) -> list[tuple[int, int, int]]:
        """(api_key, min, max) for every served API as ApiVersions announces it, sorted by key."""
        return [(k, s.min_version if s.announced_from is None else s.announced_from, s.max_version)
                for k, s in sorted(self.specs.items())]

    @property
    def name(self) -> str:
        return self.release.name

    def refusal(self, api_key: int) -> int:
        """UNSUPPORTED_VERSION (35) for an API the presented release announces but refuses with its default
        features (share groups as 4.1); 0 otherwise. tenure's own table (no release asked for) refuses none."""
        return UNSUPPORTED_VERSION if self.explicit and self.release.refuses(api_key) else 0


def _cut(r: Release) -> dict[int, ApiSpec]:
    """tenure's table cut to a release's ranges; an API the release lacks, or whose range misses tenure's, goes.
    Versions the release announces but refuses (Produce v0-2 from 4.0) are announced, not served."""
    out = {}
    for s in _TABLE:
        if s.key not in r.api_versions:
            continue
        announced, hi = r.api_versions[s.key]
        lo = max(announced, s.min_version)
        only = r.announced_only.get(s.key)
        if only is not None and only[0] <= lo <= only[1]:
            lo = only[1] + 1
        hi = min(hi, s.max_version)
        if lo <= hi:
            out[s.key] = replace(s, min_version=lo, max_version=hi,
                                 announced_from=announced if announced < lo and only is not None else None)
    return out


DEFAULT_SERVED = ServedApis(RELEASES[DEFAULT_RELEASE], SUPPORTED)


def served_apis(kafka_version: str | None = None) -> ServedApis:
    """The table a server presents: tenure's whole table (as Kafka 4.3) when no release is asked for, else the
    named release's cut of it. ValueError for a release tenure does not know (listing the known ones)."""
    if kafka_version is None:
        return DEFAULT_SERVED
    r = release(kafka_version)
    return ServedApis(r, _cut(r), explicit=True)


def api_version_ranges() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every API of tenure's table, sorted by key."""
    return DEFAULT_SERVED.ranges()
