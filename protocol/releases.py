"""The one table of what changes by Kafka release: the Kafka releases tenure can present (`--kafka-version`), the
API versions each one's brokers announce, the features each one finalizes, and the behaviour that follows.

Sources (facts read, nothing copied):
- API version ranges: kafka-python 3's `BROKER_API_VERSIONS`, the ApiVersions answers it recorded from real
  brokers of each release (kafka.protocol.broker_version_data) - used as the library's table, not re-typed here.
  One correction: it recorded 3.7-3.9 brokers announcing ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe
  (69), which a 3.x broker only serves with `group.coordinator.rebalance.protocols` including `consumer`
  (KIP-848 was early access in 3.7, preview in 3.8-3.9); with the default (`classic`) it does not, so the
  consumer protocol is absent before 4.0 (KIP-848 general availability: `group.version` 1).
- Feature levels (what a broker of each release announces in ApiVersions v3+, as Java's Admin describeFeatures
  and `kafka-features.sh describe` show it), read in Kafka's server-common and core sources:
  - which features are listed: a broker's supported features are `metadata.version` (from MINIMUM_KRAFT_VERSION,
    3.0-IV1 = 1, in 3.x; from MINIMUM_VERSION, 3.3-IV3 = 7, in 4.x, up to the release's latest production level)
    plus each production feature of the `Feature` enum whose LATEST_PRODUCTION level is above 0, as
    (minimumProduction = 0, latestProduction) (BrokerFeatures.defaultSupportedFeatures: `if (maxVersion > 0)`);
    a finalized level 0 is never listed (FinalizedFeatures.setFinalizedLevel removes it). Before 3.9 the enum
    holds no production feature (3.3-3.7's BrokerFeatures announced metadata.version alone).
  - the finalized levels are the defaults a cluster formatted at the release gets: the highest level whose
    bootstrapMetadataVersion is at most the release's metadata.version (Feature.defaultVersion).
  - metadata.version (MetadataVersion, the last production version of each release): 3.3-IV3 7, 3.4-IV0 8,
    3.5-IV2 11, 3.6-IV2 14, 3.7-IV4 19, 3.8-IV0 20, 3.9-IV0 21, 4.0-IV3 25, 4.1-IV1 27, 4.2-IV1 29, 4.3-IV0 30.
  - kraft.version (KRaftVersion, KIP-853): level 1 from 3.9 (KRAFT_VERSION_1, bootstrap 3.9-IV0), supported 0-1
    from 3.9; finalized 1 only on a cluster formatted with a dynamic controller quorum (--standalone /
    --initial-controllers), 0 (so not listed) with the static `controller.quorum.voters` a test cluster uses.
  - group.version (GroupVersion, KIP-848): GV_1 bootstrap 4.0-IV0, production from 4.0: 0-1, finalized 1.
  - transaction.version (TransactionVersion, KIP-890): TV_1 and TV_2 bootstrap 4.0-IV2, production from 4.0:
    0-2, finalized 2.
  - eligible.leader.replicas.version (EligibleLeaderReplicasVersion, KIP-966): ELRV_1 production from 4.0
    (supported 0-1, a preview not finalized by default), finalized by default from 4.1 (ELRV_1 bootstrap 4.1-IV0).
  - share.version (ShareVersion, KIP-932): SV_1 bootstrap 4.2-IV0; LATEST_PRODUCTION SV_0 in 4.1 ("a preview in
    4.1, production-ready in 4.2"): not listed by 4.1, 0-1 finalized 1 from 4.2.
  - streams.version (StreamsVersion, KIP-1071): SV_1 bootstrap 4.2-IV1; SV_0 the latest production in 4.1
    (early access), general availability in 4.2: 0-1 finalized 1 from 4.2. tenure does not serve streams
    groups (StreamsGroupHeartbeat), so it announces streams.version at most at level 0, i.e. not at all
    (`FEATURE_LEVELS_SERVED`), as it cuts transaction.version to what it serves.
  A 2.8-3.2 broker (ZooKeeper) finalizes no feature.
- Produce v0-2 from 4.0: KIP-896 removed them, yet a 4.x broker still announces Produce from v0 (KAFKA-18659: a
  librdkafka bug needs v0 in ApiVersions) and refuses those versions when they come (`announced_only`).
- Share groups (KIP-932) from 4.2: a 4.1 broker announces the share group APIs (kafka-python's recording) but,
  `share.version` not finalized by default there (share groups were a preview), answers each of them
  UNSUPPORTED_VERSION; 4.2 finalizes `share.version` 1 (general availability). 4.0 has only the early-access v0,
  which tenure does not serve.
- Broker configs by release (`BROKER_CONFIG_SINCE`, `BROKER_CONFIG_DEFAULTS`: what a broker's DescribeConfigs
  reports, which leaves out internal configs - `nonInternalValues`), read in Kafka's generated broker config
  documentation of each release (its KafkaConfig, GroupCoordinatorConfig, ShareGroupConfig and
  ShareCoordinatorConfig definitions):
  - `group.consumer.session.timeout.ms`, `group.consumer.heartbeat.interval.ms` and
    `group.coordinator.rebalance.protocols` are public from 3.7 (KIP-848 early access; 3.6's broker configs have
    none of them).
  - `group.coordinator.rebalance.protocols` defaults to `classic` in 3.7-3.9 (KIP-848 early access / preview),
    `classic,consumer` in 4.0, and `classic,consumer,streams` from 4.1 (4.1's documentation and 4.3's
    GroupCoordinatorConfig, which deprecates the config for the group.version / streams.version / share.version
    features; 4.2's was not read here: taken as 4.1's and 4.3's, which agree). tenure does not serve streams groups, yet reports Kafka's default as it is: from 4.0 the config no
    longer decides alone which protocols a broker serves (the features do), a 4.1 broker with this default
    refuses streams groups too (streams.version not finalized), and a client learns that streams groups are absent
    the way it would from Kafka - no `streams.version` in ApiVersions -, never from this config.
  - `group.share.session.timeout.ms` and `group.share.heartbeat.interval.ms` are public from 3.9 (KIP-932's
    configs shipped before its early access: a 3.9 broker reports them although it serves no share group).
  - `share.coordinator.state.topic.num.partitions` from 4.0 (the share coordinator's configs; 3.9 has none).
  A config not listed is reported by every release 2.8-4.3. A config a release does not know is, to that
  release's broker, a name like any other: IncrementalAlterConfigs / AlterConfigs set it as a dynamic broker
  config (ConfigAdminManager validates a broker change with DynamicBrokerConfig, which refuses only that
  release's own read-only configs; the controller checks only the resource name), and DescribeConfigs reports it
  back with type UNKNOWN.
- Defaults a client sees that differ by release (`Behaviour`, printed as the release table of docs/apis.md):
  group.initial.rebalance.delay.ms is 3000 in every release 2.8-4.3 (tenure keeps its own test-friendly 1000 ms
  whatever the release: `--initial-rebalance-delay-ms`).
- KIP-1101 (`consumer_group_metadata_hash`, from 4.1): Kafka 4.0's group coordinator keeps a consumer group's
  subscribed topics' metadata as a ConsumerGroupPartitionMetadata record (type 4: each topic's id, name and
  partition count - GroupCoordinatorRecordHelpers.newConsumerGroupSubscriptionMetadataRecord sets no racks),
  written before the epoch record whenever it changes, and bumps the group epoch only when it changes; its
  ConsumerGroupMetadataValue carries no hash. 4.1 replaced it with the metadata hash (a tagged field of
  ConsumerGroupMetadataValue) and, loading a 4.0 log, remembers that a type 4 record is there
  (hasSubscriptionMetadataRecord): the next heartbeat finds the hash changed (0 before), bumps the epoch and
  writes the type 4 tombstone after the epoch record (GroupMetadataManagerTest: the epoch record with the hash,
  the tombstone, the target assignment). A 4.0 coordinator reading a 4.1 log ignores the unknown tagged field:
  the group has no subscription metadata, so its next heartbeat writes one and bumps the epoch.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

CONSUMER_GROUP_APIS = (68, 69)          # ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848)
# ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge, and the share group offset admin APIs
SHARE_GROUP_APIS = (76, 77, 78, 79, 90, 91, 92)
KAFKA_INITIAL_REBALANCE_DELAY_MS = 3000  # group.initial.rebalance.delay.ms's default in every release 2.8-4.3

# transactions tenure serves: 1 is transactions v1 (KIP-98 with KIP-360's epoch bumps); 2 is KIP-890's
# transactions v2 (EndTxn v5, TxnOffsetCommit v5, implicit AddPartitionsToTxn by Produce). The level announced
# is the release's, capped by this.
TRANSACTION_VERSION_SERVED = 2
# the highest level tenure serves of a feature (none listed: every level a release has): the supported and the
# finalized level announced are the release's cut to this; a feature cut to 0 is not announced at all
FEATURE_LEVELS_SERVED = {"transaction.version": TRANSACTION_VERSION_SERVED,
                         "streams.version": 0}          # KIP-1071 streams groups: not served


# The broker configs tenure reports that not every release has: name -> the first release that reports it (the
# module's docstring); every other config is reported by every release.
BROKER_CONFIG_SINCE: Mapping[str, tuple[int, int]] = MappingProxyType({
    "group.consumer.session.timeout.ms": (3, 7),
    "group.consumer.heartbeat.interval.ms": (3, 7),
    "group.coordinator.rebalance.protocols": (3, 7),
    "group.share.session.timeout.ms": (3, 9),
    "group.share.heartbeat.interval.ms": (3, 9),
    "share.coordinator.state.topic.num.partitions": (4, 0),
})
# broker config defaults that changed: name -> ((from release, default), ...), each row holding from that release on
BROKER_CONFIG_DEFAULTS: Mapping[str, tuple[tuple[tuple[int, int], str], ...]] = MappingProxyType({
    "group.coordinator.rebalance.protocols": (((3, 7), "classic"), ((4, 0), "classic,consumer"),
                                              ((4, 1), "classic,consumer,streams")),
})

@dataclass(frozen=True)
class Feature:
    """One feature as a broker announces it in ApiVersions v3+: the levels it supports and the finalized one."""
    min_level: int
    max_level: int
    finalized: int


class Release:
    """One Kafka release as tenure presents it: its name ("3.9") and version, the API versions its brokers announce
    (api key -> (min, max)), its features, whether it serves KIP-848 consumer groups (4.0+) and KIP-932 share groups
    by default (4.2+), and the versions its brokers announce in ApiVersions but refuse when sent (KAFKA-18659). One
    per release, made once in `RELEASES` and never changed. (A plain class: nothing compares, hashes or prints a
    release - its mappings are not hashable -, and a dataclass's build cost ~0.6 ms of every server's start-up.)"""

    __slots__ = ("name", "version", "api_versions", "features", "consumer_group_protocol", "announced_only",
                 "share_groups")

    def __init__(self, name: str, version: tuple[int, int], api_versions: Mapping[int, tuple[int, int]],
                 features: Mapping[str, Feature] | None = None, consumer_group_protocol: bool = False,
                 announced_only: Mapping[int, tuple[int, int]] | None = None, share_groups: bool = False) -> None:
        self.name = name
        self.version = version
        self.api_versions = api_versions
        self.features: Mapping[str, Feature] = {} if features is None else features
        self.consumer_group_protocol = consumer_group_protocol
        self.announced_only: Mapping[int, tuple[int, int]] = {} if announced_only is None else announced_only
        self.share_groups = share_groups

    @property
    def consumer_group_metadata_hash(self) -> bool:
        """KIP-1101 (4.1+): a consumer group keeps one metadata hash (ConsumerGroupMetadataValue.MetadataHash)
        instead of 4.0's ConsumerGroupPartitionMetadata records."""
        return self.version >= (4, 1)

    def refuses(self, api_key: int) -> bool:
        """An API the release's brokers announce but answer UNSUPPORTED_VERSION with their default features
        (the share group APIs of 4.1, whose share.version is not finalized)."""
        return api_key in SHARE_GROUP_APIS and not self.share_groups and api_key in self.api_versions

    @property
    def transaction_version(self) -> int:
        """The `transaction.version` level announced: the release's finalized one, at most what tenure serves."""
        f = self.features.get("transaction.version")
        return min(f.finalized, TRANSACTION_VERSION_SERVED) if f is not None else 0

    def reports_broker_config(self, name: str) -> bool:
        """Whether the release's brokers report broker config `name` (BROKER_CONFIG_SINCE)."""
        since = BROKER_CONFIG_SINCE.get(name)
        return since is None or self.version >= since

    def broker_config_default(self, name: str, default: str | None) -> str | None:
        """The release's default of broker config `name`: BROKER_CONFIG_DEFAULTS' row, else `default`."""
        rows = [value for since, value in BROKER_CONFIG_DEFAULTS.get(name, ()) if since <= self.version]
        return rows[-1] if rows else default

    def finalized_level(self, name: str) -> int:
        """The level of feature `name` this release finalizes by default (0: not finalized or unknown to it)."""
        f = self.features.get(name)
        return 0 if f is None else min(f.finalized, FEATURE_LEVELS_SERVED.get(name, f.finalized))

    def announced_features(self, transaction_version: int | None = None
                           ) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
        """(supported, finalized): name -> (min, max) level, as ApiVersions v3+ carries them; each feature cut
        to what tenure serves (FEATURE_LEVELS_SERVED: one cut to 0 is left out, as Kafka leaves out a feature
        whose latest production level is 0), transaction.version finalized at most at `transaction_version`
        (--transaction-version)."""
        supported, finalized = {}, {}
        for name, f in sorted(self.features.items()):
            top = min(f.max_level, FEATURE_LEVELS_SERVED.get(name, f.max_level))
            level = self.finalized_level(name)
            if name == "transaction.version" and transaction_version is not None:
                level = min(level, transaction_version)
            if top <= 0 and name != "metadata.version":
                continue
            supported[name] = (f.min_level, top)
            if level > 0:
                finalized[name] = (level, level)
        return supported, finalized


# metadata.version level of each release (MetadataVersion's last production version of the release)
_METADATA_LEVEL = {(3, 3): 7, (3, 4): 8, (3, 5): 11, (3, 6): 14, (3, 7): 19, (3, 8): 20, (3, 9): 21,
                   (4, 0): 25, (4, 1): 27, (4, 2): 29, (4, 3): 30}
_MIN_METADATA_LEVEL = {3: 1, 4: 7}                  # 3.x: 3.0-IV1; 4.x: 3.3-IV3 (MINIMUM_VERSION)


# the other features: name -> ((from release, (min, max supported, finalized by default)), ...), each row holding
# from that release on (sources in the module's docstring)
_FEATURE_LEVELS: dict[str, tuple[tuple[tuple[int, int], tuple[int, int, int]], ...]] = {
    "kraft.version": (((3, 9), (0, 1, 0)),),                       # KRaftVersion.KRAFT_VERSION_1: 3.9-IV0
    "group.version": (((4, 0), (0, 1, 1)),),                       # GroupVersion.GV_1: 4.0-IV0
    "transaction.version": (((4, 0), (0, 2, 2)),),                 # TransactionVersion.TV_2: 4.0-IV2
    "eligible.leader.replicas.version": (((4, 0), (0, 1, 0)),      # ELRV_1 production, not default in 4.0
                                         ((4, 1), (0, 1, 1))),     # ELRV_1 bootstrap 4.1-IV0
    "share.version": (((4, 2), (0, 1, 1)),),                       # ShareVersion.SV_1: 4.2-IV0 (4.1: preview)
    "streams.version": (((4, 2), (0, 1, 1)),),                     # StreamsVersion.SV_1: 4.2-IV1 (4.1: EA)
}


def _features(version: tuple[int, int]) -> dict[str, Feature]:
    level = _METADATA_LEVEL.get(version)
    if level is None:
        return {}
    out = {"metadata.version": Feature(_MIN_METADATA_LEVEL[version[0]], level, level)}
    for name, rows in _FEATURE_LEVELS.items():
        levels = [lv for since, lv in rows if since <= version]
        if levels:
            out[name] = Feature(*levels[-1])
    return out


PRODUCE = 0
KIP_896_PRODUCE = (0, 2)          # the Produce versions (message formats v0/v1) Kafka 4.0 removed


def _release(version: tuple[int, int]) -> Release:
    consumer = version >= (4, 0)
    ranges = {k: v for k, v in BROKER_API_VERSIONS[version].items() if consumer or k not in CONSUMER_GROUP_APIS}
    announced_only = {PRODUCE: KIP_896_PRODUCE} if version >= (4, 0) else {}
    return Release(name=f"{version[0]}.{version[1]}", version=version, api_versions=MappingProxyType(ranges),
                   features=MappingProxyType(_features(version)), consumer_group_protocol=consumer,
                   announced_only=MappingProxyType(announced_only), share_groups=version >= (4, 2))


RELEASES: dict[str, Release] = {r.name: r for r in map(_release, [
    (2, 8), (3, 0), (3, 1), (3, 2), (3, 3), (3, 4), (3, 5), (3, 6), (3, 7), (3, 8), (3, 9),
    (4, 0), (4, 1), (4, 2), (4, 3)])}
NEWEST = RELEASES["4.3"]
DEFAULT_RELEASE = "4.3"


def release(name: str) -> Release:
    """The release named "X.Y"; ValueError listing the known ones otherwise."""
    r = RELEASES.get(name.strip())
    if r is None:
        raise ValueError(f"unknown Kafka version {name!r}; known: {', '.join(RELEASES)}")
    return r
