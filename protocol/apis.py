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

import threading
from collections.abc import Mapping
from importlib import import_module
from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

from .releases import DEFAULT_RELEASE, NEWEST, RELEASES, Release, release
from .structs import quiet_schema_reads

UNSUPPORTED_VERSION = 35

# Who answers an API (the routing table's owner column): the broker that took the request (the data plane and
# the admin APIs), the group coordinator, or the transaction coordinator. The dispatcher does one lookup.
BROKER, GROUP, TRANSACTION = "broker", "group", "transaction"


class ApiClasses:
    """kafka-python's request and response classes of one API (`<name>Request`, `<name>Response` of one module:
    a `kafka.protocol` module, or this package's when it starts with "."), imported the first time a request of
    that API is read or answered rather than at import: building every served API's classes from their JSON
    schemas was ~35-40 ms of the server's start-up, most of them for APIs a test never sends."""

    __slots__ = ("module", "name", "pair")
    _lock = threading.Lock()

    def __init__(self, name: str, module: str) -> None:
        self.name = name
        self.module = f"{__package__}{module}" if module.startswith(".") else f"kafka.protocol.{module}"
        self.pair: tuple[Any, Any] | None = None

    def __repr__(self) -> str:
        return f"ApiClasses({self.name!r}, {self.module!r}, {'imported' if self.pair else 'not imported yet'})"

    def get(self) -> tuple[Any, Any]:
        pair = self.pair
        if pair is None:
            with self._lock:
                if self.pair is None:
                    with quiet_schema_reads():     # (kafka-python's deprecated schema reads: structs.py)
                        module = import_module(self.module)
                        self.pair = (getattr(module, f"{self.name}Request"), getattr(module, f"{self.name}Response"))
                pair = self.pair
            assert pair is not None
        return pair


class ApiSpec:
    """One served API: its key, name, kafka-python classes, the versions served, who answers it (`owner`) and
    the least version ApiVersions announces when below the served ones. (A plain class: its users read its fields,
    nothing compares or prints it, and a dataclass's build cost ~0.5 ms of every server's start-up.)"""

    __slots__ = ("key", "name", "classes", "min_version", "max_version", "owner", "announced_from")

    def __init__(self, key: int, name: str, classes: ApiClasses, min_version: int, max_version: int,
                 owner: str = BROKER, announced_from: int | None = None) -> None:
        self.key = key
        self.name = name
        self.classes = classes              # kafka-python's classes, imported on first use
        self.min_version = min_version
        self.max_version = max_version
        self.owner = owner
        self.announced_from = announced_from    # ApiVersions' least version when below what is served (KAFKA-18659)

    @property
    def request(self) -> type[ApiMessage]:
        """kafka-python's request class (untyped: its attributes come from the schema)."""
        pair = self.classes.pair
        return (pair if pair is not None else self.classes.get())[0]

    @property
    def response(self) -> type[ApiMessage]:
        pair = self.classes.pair
        return (pair if pair is not None else self.classes.get())[1]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def flexible(self, version: int) -> bool:
        return self.request.flexible_version_q(version)


def _spec(name: str, module: str, lo: int, hi: int, owner: str = BROKER) -> ApiSpec:
    """One API: its name (Kafka's, kafka-python's `ApiKey` gives the key), the module of its classes (see
    ApiClasses), the versions served and who answers it. That the classes' schemas reach `hi` is checked by
    tests/protocol/test_apis_table.py, not here: that would build every class at import."""
    return ApiSpec(int(ApiKey[name]), name, ApiClasses(name, module), lo, hi, owner)


_TABLE = [
    _spec("Produce", "producer.produce", 0, 13),   # v0-2: message formats v0/v1 (broker/message_format.py)
    _spec("Fetch", "consumer.fetch", 0, 18),       # v0-3: message formats v0/v1 (broker/message_format.py)
    _spec("ListOffsets", "consumer.offsets", 0, 11),   # v0: old_style_offsets (broker/fetch.py)
    _spec("Metadata", "metadata.metadata", 0, 13),
    _spec("FindCoordinator", "metadata.find_coordinator", 0, 6),
    _spec("ApiVersions", "metadata.api_versions", 0, 4),
    _spec("CreateTopics", "admin.topics", 0, 7),
    _spec("DeleteTopics", "admin.topics", 0, 6),
    _spec("OffsetForLeaderEpoch", "consumer.offsets", 0, 4),
    _spec("DescribeConfigs", "admin.configs", 0, 4),
    _spec("CreatePartitions", "admin.topics", 0, 3),
    _spec("DescribeCluster", "admin.cluster", 0, 2),
    # admin (broker/admin_apis.py)
    _spec("DeleteRecords", "admin.topics", 0, 2),
    _spec("AlterConfigs", "admin.configs", 0, 2),
    _spec("DescribeLogDirs", "admin.cluster", 0, 5),
    _spec("ElectLeaders", "admin.topics", 0, 2),
    _spec("IncrementalAlterConfigs", "admin.configs", 0, 1),
    _spec("AlterPartitionReassignments", "admin.topics", 0, 1),
    _spec("ListPartitionReassignments", "admin.topics", 0, 0),
    _spec("DescribeTopicPartitions", "admin.topics", 0, 0),
    # ACLs (security/acl_apis.py, over the authorizer)
    _spec("DescribeAcls", "admin.acl", 0, 3),
    _spec("CreateAcls", "admin.acl", 0, 3),
    _spec("DeleteAcls", "admin.acl", 0, 3),
    # the cluster's metadata and log dirs (broker/quorum_apis.py)
    _spec("AlterReplicaLogDirs", "admin.cluster", 0, 2),
    _spec("DescribeQuorum", "admin.cluster", 0, 2),
    _spec("ListConfigResources", "admin.configs", 0, 1),
    # the classic group coordinator
    _spec("OffsetCommit", "consumer.group", 0, 10, GROUP),
    _spec("OffsetFetch", "consumer.group", 0, 10, GROUP),
    _spec("JoinGroup", "consumer.group", 0, 9, GROUP),
    _spec("Heartbeat", "consumer.group", 0, 4, GROUP),
    _spec("LeaveGroup", "consumer.group", 0, 5, GROUP),
    _spec("SyncGroup", "consumer.group", 0, 5, GROUP),
    _spec("DescribeGroups", "admin.groups", 0, 6, GROUP),
    _spec("ListGroups", "admin.groups", 0, 5, GROUP),
    _spec("DeleteGroups", "admin.groups", 0, 2, GROUP),
    _spec("OffsetDelete", "consumer.group", 0, 0, GROUP),
    # KIP-848 consumer groups (coordinator/consumer/): kafka-python has no classes, protocol/consumer_group.py
    _spec("ConsumerGroupHeartbeat", ".consumer_group", 0, 1, GROUP),
    _spec("ConsumerGroupDescribe", ".consumer_group", 0, 1, GROUP),
    # the transaction coordinator (coordinator/transactions.py); EndTxn v5 is transactions v2 (KIP-890: an epoch
    # bump on every commit), which clients use when ApiVersions finalizes transaction.version 2
    # InitProducerId is the transaction coordinator's in Kafka; one without a transactional id gets its producer
    # id from the broker
    _spec("InitProducerId", "producer.transaction", 0, 5, TRANSACTION),
    _spec("AddPartitionsToTxn", "producer.transaction", 0, 5, TRANSACTION),
    _spec("AddOffsetsToTxn", "producer.transaction", 0, 4, TRANSACTION),
    _spec("EndTxn", "producer.transaction", 0, 5, TRANSACTION),
    # offsets committed in a transaction go to the group coordinator; v5 is transactions v2 (the group's
    # partition joins the transaction with the commit), as EndTxn's
    _spec("TxnOffsetCommit", "producer.transaction", 0, 5, GROUP),
    _spec("DescribeTransactions", "admin.transactions", 0, 0, TRANSACTION),
    _spec("ListTransactions", "admin.transactions", 0, 2, TRANSACTION),
    _spec("DescribeProducers", "admin.transactions", 0, 0),   # the data plane's (broker/produce.py)
    # authentication (security/): a SASL listener's connection answers SaslHandshake and SaslAuthenticate while it
    # authenticates (security/sasl.py); the broker's handlers answer them after it, or on another listener, with
    # ILLEGAL_SASL_STATE as Kafka's do; the SCRAM users (security/apis.py)
    _spec("SaslHandshake", "sasl", 0, 1),
    _spec("SaslAuthenticate", "sasl", 0, 2),
    _spec("DescribeUserScramCredentials", "admin.users", 0, 0),
    _spec("AlterUserScramCredentials", "admin.users", 0, 0),
    # KIP-932 share groups (coordinator/share/, broker/share.py): kafka-python has no classes,
    # protocol/share_group.py. Kafka 4.0 served only their early-access v0, which 4.1 removed; served at the
    # versions Kafka 4.3 serves and its clients send (the Java 4.3 KafkaShareConsumer, librdkafka 2.16)
    _spec("ShareGroupHeartbeat", ".share_group", 1, 1, GROUP),
    _spec("ShareGroupDescribe", ".share_group", 1, 1, GROUP),
    _spec("ShareFetch", ".share_group", 1, 2),
    _spec("ShareAcknowledge", ".share_group", 1, 2),
    # the share group offset admin APIs (Kafka 4.1+): the broker answers them from its share partitions
    _spec("DescribeShareGroupOffsets", ".share_group", 0, 1),
    _spec("AlterShareGroupOffsets", ".share_group", 0, 0),
    _spec("DeleteShareGroupOffsets", ".share_group", 0, 0),
    # the share coordinator's APIs, asked by brokers (Kafka's persister; CLUSTER_ACTION): answered by the broker
    # from the share coordinator its own share partitions persist through (coordinator/share_state/)
    _spec("InitializeShareGroupState", ".share_group", 0, 0),
    _spec("ReadShareGroupState", ".share_group", 0, 0),
    _spec("WriteShareGroupState", ".share_group", 0, 1),
    _spec("DeleteShareGroupState", ".share_group", 0, 0),
    _spec("ReadShareGroupStateSummary", ".share_group", 0, 1),
]

# where tenure's newest version is below Kafka 4.3's, why (`tenure apis` and docs/apis.md print it; a test holds
# it to the table: every API short of 4.3 has its reason, and no other)
SHORT_OF_NEWEST: dict[int, str] = {
}

SUPPORTED: dict[int, ApiSpec] = {s.key: s for s in _TABLE}
for _s in _TABLE:   # never claim more than the newest Kafka release tenure knows serves
    assert _s.max_version <= NEWEST.api_versions[_s.key][1], (_s.name, _s.max_version)
API_VERSIONS_KEY = int(ApiKey.ApiVersions)


class ServedApis:
    """What one server presents: the APIs and versions it serves (`specs`, by key) and the Kafka release whose
    features it announces. `explicit`: a release asked for (--kafka-version), whose ranges cut the table. (A plain
    class: its users read its fields, nothing compares or prints it, and a dataclass's build cost ~0.3 ms of every
    server's start-up.)"""

    __slots__ = ("release", "specs", "explicit")

    def __init__(self, release: Release, specs: Mapping[int, ApiSpec], explicit: bool = False) -> None:
        self.release = release
        self.specs = specs
        self.explicit = explicit

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
            out[s.key] = ApiSpec(s.key, s.name, s.classes, lo, hi, s.owner,
                                 announced if announced < lo and only is not None else None)
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
