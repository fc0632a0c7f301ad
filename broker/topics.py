"""The topic catalogue: names, topic ids, partitions (each a storage `Log`) and topic configs."""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
import weakref
from collections.abc import Callable, Iterable

from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import KAFKA_INTERNAL_TOPICS, OFFSETS_TOPIC, TRANSACTION_TOPIC  # noqa: F401 - OFFSETS_TOPIC: audit/ and tools/ import it here (for now)
from tenure.storage import Log, MemoryLog

log = logging.getLogger("tenure.broker")

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
# Kafka's internal topics (its Topic.isInternal): written only by their coordinators, never by Produce
TRANSACTION_STATE_TOPIC = TRANSACTION_TOPIC   # the name audit/read.py imports (until it takes protocol's)

DEFAULT_TOPIC_CONFIGS: dict[str, str] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "segment.bytes": "1073741824",
    "max.message.bytes": "1048588",
    "min.insync.replicas": "1",
    "message.timestamp.type": "CreateTime",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
}


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Topic:
    """One topic: its name, id, partitions' logs, configs (those set), whether it is internal, and in cluster mode
    the replication factor asked at creation (-1: the cluster's default) and the replicas of the partitions placed
    by hand (a manual assignment or a reassignment), kept in the catalog. (A plain class: its users read and set its
    fields, nothing compares or prints it, and a dataclass's build cost ~0.5 ms of every server's start-up.)"""

    __slots__ = ("name", "topic_id", "partitions", "configs", "internal", "replication_factor", "replicas")

    def __init__(self, name: str, topic_id: uuid.UUID, partitions: list[Log], configs: dict[str, str] | None = None,
                 internal: bool = False, replication_factor: int = -1,
                 replicas: dict[int, list[int]] | None = None) -> None:
        self.name = name
        self.topic_id = topic_id
        self.partitions = partitions
        self.configs: dict[str, str] = {} if configs is None else configs
        self.internal = internal
        self.replication_factor = replication_factor
        self.replicas: dict[int, list[int]] = {} if replicas is None else replicas

    def config(self, name: str) -> str | None:
        return self.configs.get(name, DEFAULT_TOPIC_CONFIGS.get(name))


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name is {len(name)} characters, the maximum is {MAX_NAME_LENGTH}")
    if not _LEGAL.match(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


class TopicRegistry:
    """Topics by name and id. With a `catalog` path (the on-disk mode) the set of topics - names, ids,
    partition counts, configs - is written there (atomically) on every change and read back by `load`,
    while each partition's records live in the log the factory opens for it."""

    def __init__(self, default_partitions: int = 1,
                 log_factory: Callable[[str, int], Log] | None = None,
                 catalog: str | os.PathLike | None = None, max_partitions_per_topic: int | None = None,
                 max_partitions: int | None = None, room: Callable[[str, int], None] | None = None,
                 replica_racks: Callable[[str, int], list[str]] | None = None) -> None:
        self.default_partitions = default_partitions
        self.max_partitions_per_topic = max_partitions_per_topic   # None: no cap
        self.max_partitions = max_partitions                       # all topics together; None: no cap
        self.room = room             # room(what, n): raises TopicError if n more logs cannot be opened
        self._log_factory = log_factory or (lambda topic, partition: MemoryLog(f"{topic}-{partition}"))
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self.catalog = catalog
        # altered broker and group configs ({"broker": {"" | "0": {...}}, "group": {name: {...}}}), kept here
        # so that they are saved in the catalog with the topics (broker/configs.py reads them)
        self.dynamic_configs: dict[str, dict[str, dict[str, str]]] = {}
        # who keeps something derived from a topic's id, partitions or racks (the coordinators' topic-hash
        # caches): told by topics_changed; held weakly, so a dropped cache drops out by itself
        self._watchers: weakref.WeakSet = weakref.WeakSet()
        # (topic, partition) -> the racks of that partition's replicas' brokers (those with a rack); a cluster
        # with racks gives it, a single broker without a rack has none
        self.replica_racks = replica_racks

    def watch(self, watcher) -> None:
        """`watcher.topics_changed(names)` is called whenever topics change (see `topics_changed`)."""
        self._watchers.add(watcher)

    def topics_changed(self, names: Iterable[str] | None = None) -> None:
        """These topics' identity, partitions or replica racks changed: tell the watchers. The table calls it
        on create, delete and added partitions; the cluster mode calls it when a broker stops or starts or a
        partition's replicas move (None: any topic may have changed)."""
        names = None if names is None else list(names)
        for watcher in list(self._watchers):
            watcher.topics_changed(names)

    def partition_racks(self, topic: Topic) -> list[list[str]]:
        """The racks of each partition's replicas, by partition id (what a topic's KIP-1101 hash covers)."""
        if self.replica_racks is None:
            return [[] for _ in topic.partitions]
        return [self.replica_racks(topic.name, p) for p in range(len(topic.partitions))]

    def load(self) -> list[Topic]:
        """Open every topic the catalog lists (recovering their logs); returns them."""
        if self.catalog is None or not os.path.exists(self.catalog):
            return []
        with open(self.catalog, encoding="utf-8") as f:
            doc = json.load(f)
        entries = doc["topics"]
        self.dynamic_configs = doc.get("configs", {})
        for e in entries:
            topic = Topic(e["name"], uuid.UUID(e["topic_id"]),
                          [self._log_factory(e["name"], i) for i in range(e["partitions"])],
                          dict(e.get("configs", {})), bool(e.get("internal", False)),
                          int(e.get("replication_factor", -1)),
                          {int(k): list(v) for k, v in e.get("replicas", {}).items()})
            self._by_name[topic.name] = topic
            self._by_id[topic.topic_id] = topic
        return list(self._by_name.values())

    def _save(self) -> None:
        if self.catalog is None:
            return
        doc = {"version": 1, "topics": [
            {"name": t.name, "topic_id": str(t.topic_id), "partitions": len(t.partitions),
             "configs": t.configs, "internal": t.internal,
             **({"replication_factor": t.replication_factor} if t.replication_factor != -1 else {}),
             **({"replicas": {str(k): v for k, v in sorted(t.replicas.items())}} if t.replicas else {})}
            for t in self._by_name.values()],
            "configs": self.dynamic_configs}
        tmp = f"{self.catalog}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.catalog)
        fd = os.open(os.path.dirname(os.path.abspath(self.catalog)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides (already validated) and persist them."""
        self._by_name[name].configs = dict(configs)
        self._save()

    def set_placement(self, name: str, replication_factor: int | None = None,
                      replicas: dict[int, list[int]] | None = None) -> None:
        """Record a topic's replication factor and/or the replicas of some of its partitions; persist them."""
        topic = self._by_name[name]
        if replication_factor is not None:
            topic.replication_factor = replication_factor
        if replicas:
            topic.replicas.update({p: list(r) for p, r in replicas.items()})
        self._save()

    def set_dynamic_configs(self, kind: str, name: str, configs: dict[str, str]) -> None:
        """Replace the altered configs of a broker ("" = cluster default) or group; persist them."""
        of_kind = self.dynamic_configs.setdefault(kind, {})
        if configs:
            of_kind[name] = dict(configs)
        else:
            of_kind.pop(name, None)
        self._save()

    brokers = 1             # the brokers of the cluster (the largest replication factor a creation may ask)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return list(self._by_name.values())

    def is_internal(self, name: str) -> bool:
        topic = self._by_name.get(name)
        return name in KAFKA_INTERNAL_TOPICS or (topic is not None and topic.internal)

    def refuse_internal(self, name: str, what: str) -> None:
        """Raise INVALID_TOPIC_EXCEPTION if `name` is an internal topic: only its coordinator changes it."""
        if self.is_internal(name):
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"cannot {what} internal topic {name}: only the group coordinator writes it")

    def partition(self, name: str, index: int) -> Log | None:
        t = self._by_name.get(name)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def check_create(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str]) -> int:
        """Validate a creation; returns the partition count it would get."""
        validate_topic_name(name)
        if name in self._by_name:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        n = self.default_partitions if partitions == -1 else partitions
        if n <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"number of partitions must be positive, got {n}")
        self._check_caps(name, n, n, f"topic {name!r}")
        if self.room is not None:
            self.room(f"topic {name!r}", n)
        if replication_factor != -1 and not 1 <= replication_factor <= self.brokers:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor {replication_factor} is larger than the {self.brokers} available "
                             f"broker(s)" if replication_factor > 0 else
                             "replication factor must be larger than 0, or -1 to use the default")
        for key in configs:
            if key not in DEFAULT_TOPIC_CONFIGS:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"unknown topic config {key!r}")
        return n

    def _check_caps(self, name: str, total: int, adding: int, what: str) -> None:
        """The partition caps: `total` partitions for topic `name`, `adding` of them new."""
        cap = self.max_partitions_per_topic
        if cap is not None and total > cap:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"topic {name!r} would have {total} partitions, above "
                                                           f"this server's limit of {cap} per topic "
                                                           f"(--max-partitions-per-topic)")
        if self.max_partitions is not None:
            after = self.partition_count() + adding
            if after > self.max_partitions:
                raise TopicError(ErrorCode.POLICY_VIOLATION, f"{what} would bring this server to {after} "
                                                             f"partitions, above its limit of {self.max_partitions} "
                                                             f"(--max-partitions)")

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self._by_name.values())

    def _open_logs(self, name: str, start: int, stop: int, what: str) -> list[Log]:
        """Open the logs of partitions start..stop-1 of a topic: all of them, or none (a failure closes
        and removes the ones opened, and raises KAFKA_STORAGE_ERROR naming the partition)."""
        logs: list[Log] = []
        try:
            for i in range(start, stop):
                logs.append(self._log_factory(name, i))
        except OSError as exc:
            self._discard(logs)
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"could not create partition {start + len(logs)} of "
                                                            f"topic {name!r}: {exc}; none of its {stop - start} "
                                                            f"{what} were kept") from exc
        return logs

    @staticmethod
    def _discard(logs: list[Log]) -> None:
        """Close and remove logs that were never part of a topic (an undone creation)."""
        for plog in logs:
            try:
                plog.delete()
            except OSError as exc:
                log.error("could not remove %s of an undone creation: %s", plog.name, exc)

    def create(self, name: str, partitions: int = -1, replication_factor: int = -1,
               configs: dict[str, str] | None = None, internal: bool = False,
               topic_id: uuid.UUID | None = None) -> Topic:
        configs = dict(configs or {})
        n = self.check_create(name, partitions, replication_factor, configs)
        topic = Topic(name, topic_id or uuid.uuid4(), self._open_logs(name, 0, n, "partition(s)"), configs, internal)
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        try:
            self._save()
        except OSError as exc:
            del self._by_name[name]
            del self._by_id[topic.topic_id]
            self._discard(topic.partitions)
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"could not record topic {name!r} in the catalog: "
                                                            f"{exc}; none of its {n} partition(s) were kept") from exc
        self.topics_changed([name])          # a name created again is a new topic id
        return topic

    def delete(self, name: str) -> Topic:
        topic = self._by_name.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        self.refuse_internal(name, "delete")
        del self._by_name[name]
        del self._by_id[topic.topic_id]
        self.topics_changed([name])
        self._save()
        for plog in topic.partitions:
            plog.delete()
        return topic

    def add_partitions(self, name: str, total: int, validate_only: bool = False) -> None:
        topic = self._by_name.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        self.refuse_internal(name, "add partitions to")
        have = len(topic.partitions)
        if total <= have:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"topic {name!r} has {have} partitions; cannot change it to {total}")
        what = f"adding {total - have} partition(s) to topic {name!r}"
        self._check_caps(name, total, total - have, what)
        if self.room is not None:
            self.room(what, total - have)
        if not validate_only:
            added = self._open_logs(name, have, total, "new partition(s)")
            topic.partitions.extend(added)
            try:
                self._save()
            except OSError as exc:
                del topic.partitions[have:]
                self._discard(added)
                raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"could not record the new partitions of topic "
                                                                f"{name!r} in the catalog: {exc}; none of its "
                                                                f"{total - have} new partition(s) were kept") from exc
            self.topics_changed([name])
