"""The configs tenure describes and lets clients alter: topic, broker and group resources.

Each config is a `ConfigDef` (name, Kafka's config type, default, a line of documentation, whether it can
change at runtime, and a value check). `ConfigStore` answers DescribeConfigs entries (value, source,
read-only flag, synonyms, type, documentation) and applies AlterConfigs/IncrementalAlterConfigs, checking
every change before applying any, as Kafka does per resource. Overrides are kept by the topic registry so
that they are written to the data dir's catalog with the topics.

What the values mean to tenure: topic configs are kept and reported (tenure enforces `max.message.bytes`
at its default and `cleanup.policy=compact` on `__consumer_offsets`; retention is not enforced). A broker
config that is dynamic in Kafka (the `log.*` defaults behind topic configs) may be altered for the node
(`"0"`) or cluster-wide (`""`), and a topic without its own override then reports that value. The broker configs
are those of the Kafka release presented (`ConfigStore.present`; protocol/releases.py says which release has
which and their defaults); a broker config name the release has no config of is kept as a dynamic config and
described as UNKNOWN, as Kafka does. Group configs
(Kafka 3.8+/4: the KIP-848 and share-group timeouts) are kept and reported per group; a KIP-848 consumer
group's coordinator reads its `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`
(coordinator/consumer/group_config.py), whose defaults are the server's group.consumer.* values; the classic
protocol does not read them, as Kafka's classic groups do not.
"""
from __future__ import annotations

from collections.abc import Callable

from tenure.protocol.errors import ErrorCode
from tenure.protocol.releases import NEWEST, Release

from .topics import DEFAULT_TOPIC_CONFIGS, TopicError

# DescribeConfigs resource types
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_GROUP = 32

# config sources (DescribeConfigs v1+)
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8

# config types (DescribeConfigs v3+); UNKNOWN: a name the broker has no definition of
UNKNOWN = 0
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)
_TYPE_NAMES = {BOOLEAN: "BOOLEAN", STRING: "STRING", INT: "INT", SHORT: "SHORT", LONG: "LONG", LIST: "LIST"}
_INT_RANGE = {INT: (-2**31, 2**31 - 1), SHORT: (-2**15, 2**15 - 1), LONG: (-2**63, 2**63 - 1)}

# IncrementalAlterConfigs operations
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


class UnknownServerError(TopicError):
    """UNKNOWN_SERVER_ERROR (-1) without a message, as Kafka answers an unexpected exception."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, None)   # type: ignore[arg-type]


class ConfigError(TopicError):
    """A config change Kafka refuses: INVALID_CONFIG (40) unless said otherwise."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_CONFIG) -> None:
        super().__init__(code, message)


class ConfigDef:
    """One config a DescribeConfigs reports and an alter checks: its name, type, default, documentation, whether it
    may change at runtime, and the values it takes. (A plain class: its users read its fields, nothing compares or
    prints it, and a dataclass's build cost ~0.5 ms of every server's start-up.)"""

    __slots__ = ("name", "type", "default", "doc", "dynamic", "choices", "at_least", "within")

    def __init__(self, name: str, type: int, default: str | None, doc: str, dynamic: bool = True,
                 choices: tuple[str, ...] = (), at_least: int | None = None,
                 within: tuple[str, int, str, int] | None = None) -> None:
        self.name = name
        self.type = type
        self.default = default
        self.doc = doc
        self.dynamic = dynamic              # may change at runtime (else read-only)
        self.choices = choices              # allowed values (each element for a LIST)
        self.at_least = at_least            # lower bound for INT/SHORT/LONG
        self.within = within                # group configs: (min broker config, min, max config, max)

    def with_default(self, default: str | None) -> ConfigDef:
        """The same config with another default."""
        return ConfigDef(self.name, self.type, default, self.doc, self.dynamic, self.choices, self.at_least,
                         self.within)

    def check(self, value: str | None) -> None:
        if value is None:
            raise ConfigError(f"Null value not supported for {self.name}")
        bad = f"Invalid value {value} for configuration {self.name}"
        if self.type in _INT_RANGE:
            lo, hi = _INT_RANGE[self.type]
            try:
                n = int(value.strip())
            except ValueError:
                raise ConfigError(f"{bad}: Not a number of type {_TYPE_NAMES[self.type]}") from None
            if not lo <= n <= hi:
                raise ConfigError(f"{bad}: Not a number of type {_TYPE_NAMES[self.type]}")
            if self.at_least is not None and n < self.at_least:
                raise ConfigError(f"{bad}: Value must be at least {self.at_least}")
            if self.within is not None:             # as Kafka's GroupConfig, against the broker's bounds
                lo_name, lo, hi_name, hi = self.within
                if n < lo:
                    raise ConfigError(f"{self.name} must be greater than or equal to {lo_name}")
                if n > hi:
                    raise ConfigError(f"{self.name} must be less than or equal to {hi_name}")
        elif self.type == BOOLEAN:
            if value.strip().lower() not in ("true", "false"):
                raise ConfigError(f"{bad}: Expected value to be either true or false")
        elif self.choices:
            items = [v.strip() for v in value.split(",")] if self.type == LIST else [value]
            for item in items:
                if item not in self.choices:
                    raise ConfigError(f"{bad}: String must be one of: {', '.join(self.choices)}")


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TOPIC_CONFIGS = _defs(
    ConfigDef("cleanup.policy", LIST, DEFAULT_TOPIC_CONFIGS["cleanup.policy"],
              "How old segments are retired: delete them, compact them by key, or both.",
              choices=("delete", "compact")),
    ConfigDef("compression.type", STRING, DEFAULT_TOPIC_CONFIGS["compression.type"],
              "The codec batches are stored with; producer keeps what the producer sent.", choices=COMPRESSION),
    ConfigDef("retention.ms", LONG, DEFAULT_TOPIC_CONFIGS["retention.ms"],
              "How long a segment is kept before deletion (-1: no limit).", at_least=-1),
    ConfigDef("retention.bytes", LONG, DEFAULT_TOPIC_CONFIGS["retention.bytes"],
              "The largest size a partition may grow to before old segments are deleted (-1: no limit)."),
    ConfigDef("segment.bytes", INT, DEFAULT_TOPIC_CONFIGS["segment.bytes"],
              "The size at which a partition rolls a new segment file.", at_least=14),
    ConfigDef("max.message.bytes", INT, DEFAULT_TOPIC_CONFIGS["max.message.bytes"],
              "The largest record batch the topic accepts.", at_least=0),
    ConfigDef("min.insync.replicas", INT, DEFAULT_TOPIC_CONFIGS["min.insync.replicas"],
              "Replicas that must acknowledge a write with acks=all (one node: 1).", at_least=1),
    ConfigDef("message.timestamp.type", STRING, DEFAULT_TOPIC_CONFIGS["message.timestamp.type"],
              "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
              choices=("CreateTime", "LogAppendTime")),
    ConfigDef("min.compaction.lag.ms", LONG, DEFAULT_TOPIC_CONFIGS["min.compaction.lag.ms"],
              "The least time a record stays uncompacted.", at_least=0),
    ConfigDef("delete.retention.ms", LONG, DEFAULT_TOPIC_CONFIGS["delete.retention.ms"],
              "How long tombstones are kept on a compacted topic.", at_least=0),
)
assert set(TOPIC_CONFIGS) == set(DEFAULT_TOPIC_CONFIGS)

# the broker config behind each topic config (Kafka's topic config synonyms), first the one that wins
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.type": ("compression.type",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "retention.bytes": ("log.retention.bytes",),
    "segment.bytes": ("log.segment.bytes",),
    "max.message.bytes": ("message.max.bytes",),
    "min.insync.replicas": ("min.insync.replicas",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
}

def _member_timeouts(kind: str, who: str, session: int = 45000, interval: int = 5000) -> tuple[ConfigDef, ConfigDef]:
    """A group's session timeout and heartbeat interval for `kind` ("consumer", "share") members, defaulting to
    the broker's (`session`, `interval`) and bounded by the broker's group.<kind>.min/max.* settings: Kafka's
    defaults (45000-60000, 5000-15000), widened to take in the broker's own value (tenure's may be below
    Kafka's least, for tests)."""
    def bounded(what: str, lo: int, hi: int, own: int) -> tuple[str, int, str, int]:
        return f"group.{kind}.min.{what}", min(lo, own), f"group.{kind}.max.{what}", max(hi, own)
    return (ConfigDef(f"{kind}.session.timeout.ms", INT, str(session), f"The session timeout of {who}.",
                      within=bounded("session.timeout.ms", 45000, 60000, session)),
            ConfigDef(f"{kind}.heartbeat.interval.ms", INT, str(interval), f"The heartbeat interval of {who}.",
                      within=bounded("heartbeat.interval.ms", 5000, 15000, interval)))


def group_defs(consumer_session: int = 45000, consumer_interval: int = 5000, share_session: int = 45000,
               share_interval: int = 5000) -> dict[str, ConfigDef]:
    """The GROUP resource's configs, the consumer and share ones after the broker's group.consumer.* and
    group.share.* values."""
    return _defs(
        *_member_timeouts("consumer", "the group's consumer-protocol (KIP-848) members", consumer_session,
                          consumer_interval),
        *_member_timeouts("share", "a share group's members", share_session, share_interval),
        ConfigDef("share.record.lock.duration.ms", INT, "30000",
                  "How long a share group's member holds an acquired record.",
                  within=("group.share.min.record.lock.duration.ms", 15000,
                          "group.share.max.record.lock.duration.ms", 60000)),
        ConfigDef("share.auto.offset.reset", STRING, "latest",
                  "Where a share group starts reading a partition it has no offset for.",
                  choices=("latest", "earliest")),
        ConfigDef("share.delivery.count.limit", INT, "5",
                  "How many times a share group delivers a record before it archives it.",
                  within=("group.share.min.delivery.count.limit", 2, "group.share.max.delivery.count.limit", 10)),
        ConfigDef("share.partition.max.record.locks", INT, "2000",
                  "How many records a share group holds in flight per partition.",
                  within=("group.share.min.partition.max.record.locks", 100,
                          "group.share.max.partition.max.record.locks", 4000)),
        ConfigDef("share.isolation.level", STRING, "read_uncommitted",
                  "Whether a share group's members get the records of open and aborted transactions.",
                  choices=("read_uncommitted", "read_committed")),
    )


GROUP_CONFIGS = group_defs()          # with Kafka's broker defaults; a ConfigStore uses the server's


def _broker_defs(release: Release = NEWEST) -> dict[str, ConfigDef]:
    """The broker configs tenure reports presenting `release` (their values set by tenure's options come from
    ConfigStore): those the release has, with its defaults (protocol/releases.py BROKER_CONFIG_SINCE and
    BROKER_CONFIG_DEFAULTS)."""
    return {name: d.with_default(release.broker_config_default(name, d.default))
            for name, d in _ALL_BROKER_DEFS.items() if release.reports_broker_config(name)}


def _all_broker_defs() -> dict[str, ConfigDef]:
    """Every broker config tenure reports in some release, with the newest release's defaults."""
    t = {d.name: d for d in TOPIC_CONFIGS.values()}
    return _defs(
        ConfigDef("broker.id", INT, "-1", "This node's id.", dynamic=False),
        ConfigDef("node.id", INT, "-1", "This node's id in the cluster (tenure: 0..N-1 with --brokers N).",
                  dynamic=False),
        ConfigDef("broker.rack", STRING, None, "The rack of this broker (tenure: --racks).", dynamic=False),
        ConfigDef("process.roles", LIST, "", "The roles of this node: broker and controller in one.",
                  dynamic=False),
        ConfigDef("listeners", LIST, "PLAINTEXT://:9092", "The address tenure listens on.", dynamic=False),
        ConfigDef("advertised.listeners", LIST, None, "The address clients are told to connect to.",
                  dynamic=False),
        ConfigDef("log.dirs", LIST, None, "The data dir holding the partitions' segment files (none: in memory).",
                  dynamic=False),
        ConfigDef("num.partitions", INT, "1", "Partitions of a topic created without a count.", dynamic=False),
        ConfigDef("auto.create.topics.enable", BOOLEAN, "true",
                  "Whether Metadata creates a topic it is asked about.", dynamic=False),
        ConfigDef("default.replication.factor", INT, "1", "Replicas of a topic created without a factor.",
                  dynamic=False),
        ConfigDef("offsets.topic.num.partitions", INT, "50", "Partitions of __consumer_offsets.", dynamic=False),
        ConfigDef("share.coordinator.state.topic.num.partitions", INT, "50", "Partitions of __share_group_state.",
                  dynamic=False),
        ConfigDef("offsets.topic.replication.factor", SHORT, "3", "Replicas of __consumer_offsets.",
                  dynamic=False),
        ConfigDef("socket.request.max.bytes", INT, "104857600", "The largest request frame accepted.",
                  dynamic=False),
        ConfigDef("group.initial.rebalance.delay.ms", INT, "3000",
                  "How long a new group waits for more members before its first rebalance.", dynamic=False),
        ConfigDef("group.min.session.timeout.ms", INT, "6000", "The least session timeout a member may ask for.",
                  dynamic=False),
        ConfigDef("group.max.session.timeout.ms", INT, "1800000",
                  "The largest session timeout a member may ask for.", dynamic=False),
        ConfigDef("group.max.size", INT, "2147483647", "The most members a group may have.", dynamic=False),
        ConfigDef("group.consumer.session.timeout.ms", INT, "45000",
                  "A consumer group (KIP-848) member's session timeout, unless its group sets its own.",
                  dynamic=False),
        ConfigDef("group.consumer.heartbeat.interval.ms", INT, "5000",
                  "How often consumer group (KIP-848) members heartbeat, unless their group sets its own.",
                  dynamic=False),
        ConfigDef("group.coordinator.rebalance.protocols", LIST, "classic,consumer,streams",
                  "The rebalance protocols the group coordinator serves (Kafka's default of the release presented; "
                  "what tenure serves is what ApiVersions and its features announce).", dynamic=False,
                  choices=("classic", "consumer", "share", "streams")),
        ConfigDef("group.share.session.timeout.ms", INT, "45000",
                  "A share group member's session timeout, unless its group sets its own.", dynamic=False),
        ConfigDef("group.share.heartbeat.interval.ms", INT, "5000",
                  "How often share group members heartbeat, unless their group sets its own.", dynamic=False),
        ConfigDef("log.cleaner.backoff.ms", LONG, "15000",
                  "The pause between log cleaner passes over compacted partitions.", dynamic=False),
        # the dynamic defaults behind topic configs
        ConfigDef("log.cleanup.policy", LIST, t["cleanup.policy"].default, t["cleanup.policy"].doc,
                  choices=t["cleanup.policy"].choices),
        ConfigDef("compression.type", STRING, t["compression.type"].default, t["compression.type"].doc,
                  choices=COMPRESSION),
        ConfigDef("log.retention.ms", LONG, None, "Retention in ms; overrides log.retention.minutes.",
                  at_least=-1),
        ConfigDef("log.retention.minutes", INT, None, "Retention in minutes; overrides log.retention.hours.",
                  dynamic=False),
        ConfigDef("log.retention.hours", INT, "168", "Retention in hours.", dynamic=False),
        ConfigDef("log.retention.bytes", LONG, t["retention.bytes"].default, t["retention.bytes"].doc),
        ConfigDef("log.segment.bytes", INT, t["segment.bytes"].default, t["segment.bytes"].doc,
                  dynamic=False),                 # tenure's segment size is its --segment-bytes
        ConfigDef("message.max.bytes", INT, t["max.message.bytes"].default, t["max.message.bytes"].doc,
                  dynamic=False),                 # tenure enforces it at this value
        ConfigDef("min.insync.replicas", INT, "1", t["min.insync.replicas"].doc, at_least=1),
        ConfigDef("log.message.timestamp.type", STRING, t["message.timestamp.type"].default,
                  t["message.timestamp.type"].doc, choices=t["message.timestamp.type"].choices),
        ConfigDef("log.cleaner.min.compaction.lag.ms", LONG, "0", t["min.compaction.lag.ms"].doc, at_least=0),
        ConfigDef("log.cleaner.delete.retention.ms", LONG, t["delete.retention.ms"].default,
                  t["delete.retention.ms"].doc, at_least=0),
    )


_ALL_BROKER_DEFS = _all_broker_defs()


class Entry:
    """One described config: what DescribeConfigs needs for it. (A plain class: DescribeConfigs reads its
    fields, nothing compares or prints it, and a dataclass's build cost ~0.3 ms at import.)"""

    __slots__ = ("name", "value", "source", "read_only", "type", "doc", "synonyms")

    def __init__(self, name: str, value: str | None, source: int, read_only: bool, type: int, doc: str | None,
                 synonyms: list[tuple[str, str | None, int]]) -> None:
        self.name, self.value, self.source, self.read_only = name, value, source, read_only
        self.type, self.doc, self.synonyms = type, doc, synonyms


class ConfigStore:
    """Describe and alter configs of the topic, broker and group resources (see the module docstring).

    `static` are the broker configs set by tenure's own options (STATIC_BROKER_CONFIG); dynamic overrides live
    in `registry.dynamic_configs` ({"broker": {"" | "0": {...}}, "group": {name: {...}}}) and topic overrides
    in each topic's `configs`, so the registry persists them all in its catalog."""

    def __init__(self, registry, static: Callable[[int], dict[str, str | None]], release: Release = NEWEST) -> None:
        self.registry = registry
        self._static = static                  # node id -> that broker's static configs
        self.present(release)
        self._group_defs: dict[str, ConfigDef] | None = None

    def present(self, release: Release) -> None:
        """Report and accept the broker configs of `release` (the Kafka release the server presents)."""
        self.release = release
        self.broker_defs = _broker_defs(release)

    @property
    def group_defs(self) -> dict[str, ConfigDef]:
        """The GROUP resource's configs after the server's group.consumer.* and group.share.* values (read
        once: they are static)."""
        if self._group_defs is None:
            static = self._static(0)
            self._group_defs = group_defs(int(static.get("group.consumer.session.timeout.ms") or 45000),
                                          int(static.get("group.consumer.heartbeat.interval.ms") or 5000),
                                          int(static.get("group.share.session.timeout.ms") or 45000),
                                          int(static.get("group.share.heartbeat.interval.ms") or 5000))
        return self._group_defs

    # ------------------------------------------------------------------ describing
    def _broker_layers(self, name: str, node_id: int) -> list[tuple[int, str | None]]:
        """Every value a broker config of broker `node_id` has, the winning one first: per node, cluster default,
        static, default."""
        dyn = self.registry.dynamic_configs.get("broker", {})
        out = []
        if name in dyn.get(str(node_id), {}):
            out.append((SOURCE_DYNAMIC_BROKER, dyn[str(node_id)][name]))
        if name in dyn.get("", {}):
            out.append((SOURCE_DYNAMIC_DEFAULT_BROKER, dyn[""][name]))
        d = self.broker_defs.get(name)
        if d is None:                          # a name set dynamically that this release has no config of
            return out
        static = self._static(node_id)
        if name in static:
            out.append((SOURCE_STATIC_BROKER, static[name]))
        if d.default is not None:
            out.append((SOURCE_DEFAULT, d.default))
        return out

    def broker_entries(self, resource_name: str, node_id: int) -> list[Entry]:
        """The answering broker's id (`node_id`): every broker config of the release presented, then any name
        set dynamically that the release has no config of (type UNKNOWN, read-only, no documentation: as Kafka
        reports a dynamic broker config it has no definition of). The cluster default (""): as Kafka, only the
        configs altered cluster-wide, with synonyms below that level."""
        dyn = self.registry.dynamic_configs.get("broker", {})
        cluster_wide = dyn.get("", {})
        unknown = sorted({n for n in (*cluster_wide, *dyn.get(str(node_id), {})) if n not in self.broker_defs})
        out = []
        for name in [*self.broker_defs, *unknown]:
            d = self.broker_defs.get(name)
            layers = self._broker_layers(name, node_id)
            if resource_name == "":
                if name not in cluster_wide:
                    continue
                layers = [x for x in layers if x[0] != SOURCE_DYNAMIC_BROKER]
            source, value = layers[0] if layers else (SOURCE_DEFAULT, None)
            out.append(Entry(name, value, source, d is None or not d.dynamic, UNKNOWN if d is None else d.type,
                             None if d is None else d.doc, [(name, v, s) for s, v in layers]))
        return out

    def topic_default(self, name: str, node_id: int) -> tuple[list[tuple[str, str | None, int]], str | None, int]:
        """(synonyms, value, source) of a topic config no topic overrides: the broker config behind it on broker
        `node_id`, as Kafka derives it (a dynamic or static broker value wins over the default)."""
        synonyms = [(b, v, s) for b in TOPIC_SYNONYMS[name] for s, v in self._broker_layers(b, node_id)]
        b, value, source = synonyms[0]
        if source == SOURCE_DEFAULT:
            return synonyms, TOPIC_CONFIGS[name].default, SOURCE_DEFAULT
        if value is not None and b in ("log.retention.minutes", "log.retention.hours"):
            value = str(int(value) * (60_000 if b == "log.retention.minutes" else 3_600_000))
        return synonyms, value, source

    def topic_entries(self, overrides: dict[str, str], node_id: int) -> list[Entry]:
        """The entries of a topic with these config overrides (a topic's `configs`), as broker `node_id` answers."""
        out = []
        for d in TOPIC_CONFIGS.values():
            synonyms, value, source = self.topic_default(d.name, node_id)
            if d.name in overrides:
                value, source = overrides[d.name], SOURCE_DYNAMIC_TOPIC
                synonyms = [(d.name, value, SOURCE_DYNAMIC_TOPIC)] + synonyms
            out.append(Entry(d.name, value, source, False, d.type, d.doc, synonyms))
        return out

    def group_entries(self, group: str) -> list[Entry]:
        overrides = self.registry.dynamic_configs.get("group", {}).get(group, {})
        out = []
        for d in self.group_defs.values():
            synonyms = [(d.name, d.default, SOURCE_DEFAULT)]
            if d.name in overrides:
                synonyms.insert(0, (d.name, overrides[d.name], SOURCE_GROUP))
            _, value, source = synonyms[0]
            out.append(Entry(d.name, value, source, False, d.type, d.doc, synonyms))
        return out

    # ------------------------------------------------------------------ altering
    def defs_for(self, resource_type: int) -> dict[str, ConfigDef]:
        return {RESOURCE_TOPIC: TOPIC_CONFIGS, RESOURCE_BROKER: self.broker_defs,
                RESOURCE_GROUP: self.group_defs}[resource_type]

    def current_overrides(self, resource_type: int, name: str) -> dict[str, str]:
        if resource_type == RESOURCE_TOPIC:
            return dict(self.registry.get(name).configs)
        kind = "broker" if resource_type == RESOURCE_BROKER else "group"
        return dict(self.registry.dynamic_configs.get(kind, {}).get(name, {}))

    def check(self, resource_type: int, names, new: dict[str, str]) -> None:
        """Refuse the first change Kafka would refuse: a topic or group config name it does not know, a broker
        config it cannot change at runtime (of every name the request touched), a bad value (of those `new`
        sets). A broker config name the release presented does not know is accepted, as Kafka's
        ConfigAdminManager accepts it: DynamicBrokerConfig refuses only the release's own read-only configs and
        bad values of its own configs (INVALID_REQUEST: its ConfigException turned into InvalidRequestException),
        and the controller checks only the resource name."""
        defs = self.defs_for(resource_type)
        kind = {RESOURCE_TOPIC: "topic", RESOURCE_BROKER: "broker", RESOURCE_GROUP: "group"}[resource_type]
        unknown = [k for k in names if k not in defs]
        if unknown and resource_type != RESOURCE_BROKER:
            raise ConfigError(f"Unknown {kind} config name: {unknown[0]}")
        fixed = sorted(k for k in names if k in defs and not defs[k].dynamic)
        if fixed:
            raise ConfigError(f"Cannot update these configs dynamically: Set({', '.join(fixed)})",
                              ErrorCode.INVALID_REQUEST)
        for k in names:
            if k in new and k in defs:
                try:
                    defs[k].check(new[k])
                except ConfigError as exc:       # a broker's: DynamicBrokerConfig's ConfigException, so 42
                    if resource_type != RESOURCE_BROKER:
                        raise
                    raise ConfigError(exc.message, ErrorCode.INVALID_REQUEST) from None
        if resource_type == RESOURCE_GROUP:              # Kafka's GroupConfig: over the whole group's values
            for kind in ("consumer", "share"):
                session, interval = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
                if int(new.get(session, defs[session].default or 0)) <= int(new.get(interval,
                                                                                    defs[interval].default or 0)):
                    raise ConfigError(f"{session} must be greater than {interval}")

    def replace(self, resource_type: int, name: str, new: dict[str, str]) -> None:
        """Make `new` the whole set of overrides of the resource (checked by the caller) and persist it."""
        if resource_type == RESOURCE_TOPIC:
            self.registry.set_topic_configs(name, new)
        else:
            self.registry.set_dynamic_configs("broker" if resource_type == RESOURCE_BROKER else "group", name, new)


def incremental(defs: dict[str, ConfigDef], current: dict[str, str], ops, broker: bool = False) -> dict[str, str]:
    """The overrides after IncrementalAlterConfigs' operations (SET, DELETE, APPEND, SUBTRACT) on `current`.
    `broker`: a broker resource, where APPEND or SUBTRACT of a name the release has no config of fails as Kafka's
    ConfigAdminManager fails it - looking up the config's type throws a NoSuchElementException, answered
    UNKNOWN_SERVER_ERROR with no message (ApiError keeps messages out of that error)."""
    new = dict(current)
    for name, op, value in ops:
        d = defs.get(name)
        if broker and d is None and op in (OP_APPEND, OP_SUBTRACT):
            raise UnknownServerError()
        if op == OP_SET:
            new[name] = value
        elif op == OP_DELETE:
            new.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if d is not None and d.type != LIST:
                raise ConfigError(f"Config value append is not allowed for config key: {name}"
                                  if op == OP_APPEND else
                                  f"Config value subtract is not allowed for config key: {name}")
            base = new.get(name, d.default if d is not None else None) or ""
            items = [x for x in base.split(",") if x]
            given = [x.strip() for x in (value or "").split(",") if x.strip()]
            if op == OP_APPEND:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            new[name] = ",".join(items)
        else:
            raise ConfigError(f"Unknown operation type {op} for config {name}", ErrorCode.INVALID_REQUEST)
    return new
