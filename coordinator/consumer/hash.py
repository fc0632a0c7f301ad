"""The KIP-1101 group metadata hash: one 64-bit number per consumer group that changes when, and only when,
a subscribed topic's identity, partition count or partition racks change.

Both hashes are MurmurHash3 (x64, 128 bits, seed 0, the first 64 bits as a signed int64:
`mmh3.hash64(data, seed=0, x64arch=True, signed=True)[0]`). A topic hash is taken over these bytes, in order
(numbers big-endian, strings UTF-8 with no length):

    0x00                                   magic byte (the hash version)
    topic id, most significant 64 bits     int64
    topic id, least significant 64 bits    int64
    topic name                             UTF-8
    partition count                        int64
    for each partition id 0..count-1:
        partition id                       int32
        its replicas' racks                sorted (Python string order, duplicates kept), joined by ";",
                                           UTF-8; nothing when no replica has a rack

The group hash is 0 with no topics; otherwise, with the topic hashes in the order of their topic names as
h1..hn, it is the hash of (1*h1 + 2*h2 + ... + n*hn) mod 2**64 as 8 big-endian bytes - KIP-1101's
"hash(a + 2*b)", so that swapping two topics' hashes changes it. The values are only ever compared with
tenure's own earlier values (ConsumerGroupMetadataValue.MetadataHash), never with a Kafka broker's (Kafka 4.1
hashes another encoding with XXH3-64).

Before KIP-1101 (tenure presenting Kafka 4.0) a consumer group keeps, instead of the hash, the subscribed topics'
id, name and partition count (`TopicHashCache.subscription_metadata`, written as ConsumerGroupPartitionMetadata
records), and only a change of those bumps its epoch.

`TopicHashCache` keeps the hash of each subscribed topic, computed on first use from the topic table and
dropped when the topic changes (the table tells its watchers) or when no group subscribes to it any more.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Protocol

import mmh3

from tenure.protocol.consumer_group_records import ConsumerGroupMetadataRecord, ConsumerGroupPartitionMetadataRecord

MAGIC = 0x00
RACK_SEPARATOR = ";"
_HEAD = struct.Struct(">BQQ")
_COUNT = struct.Struct(">q")
_PARTITION = struct.Struct(">i")
_U64 = (1 << 64) - 1


def _hash64(data: bytes) -> int:
    return mmh3.hash64(data, seed=0, x64arch=True, signed=True)[0]


def topic_hash_input(topic_id: uuid.UUID, name: str, partition_racks: Sequence[Sequence[str]]) -> bytes:
    """The bytes a topic hash is computed over (see the module's docstring); `partition_racks[p]` holds the
    racks of partition p's replicas, in any order (an empty list: no rack known)."""
    parts = [_HEAD.pack(MAGIC, topic_id.int >> 64, topic_id.int & _U64), name.encode("utf-8"),
             _COUNT.pack(len(partition_racks))]
    for partition, racks in enumerate(partition_racks):
        parts.append(_PARTITION.pack(partition))
        if racks:
            parts.append(RACK_SEPARATOR.join(sorted(racks)).encode("utf-8"))
    return b"".join(parts)


def topic_hash(topic_id: uuid.UUID, name: str, partition_racks: Sequence[Sequence[str]]) -> int:
    """The topic's hash (a signed int64): its id, name, partition count and each partition's racks."""
    return _hash64(topic_hash_input(topic_id, name, partition_racks))


def group_hash_input(topic_hashes: dict[str, int]) -> bytes:
    """The bytes a group hash is computed over: the sum of i * h_i over the topic hashes h_1..h_n in
    topic-name order, modulo 2**64, as 8 big-endian bytes."""
    total = sum(i * topic_hashes[name] for i, name in enumerate(sorted(topic_hashes), start=1))
    return (total & _U64).to_bytes(8, "big")


def group_hash(topic_hashes: dict[str, int]) -> int:
    """The group's metadata hash from {topic name: topic hash} of its subscribed topics; 0 with none."""
    if not topic_hashes:
        return 0
    return _hash64(group_hash_input(topic_hashes))


class _Topic(Protocol):
    name: str
    topic_id: uuid.UUID
    partitions: list


class _Topics(Protocol):
    def get(self, name: str) -> _Topic | None: ...


PartitionRacks = Callable[[_Topic], Sequence[Sequence[str]]]


def no_racks(topic: _Topic) -> list[list[str]]:
    """One broker without a rack: no partition has a rack."""
    return [[] for _ in topic.partitions]


def existing(topics: _Topics, names: Iterable[str]) -> Iterable[str]:
    """The names to look up in the topic table `topics` for these subscribed `names`: when they outnumber the
    topics the table holds (a subscription of 100,000 names), only the table's topics among them, found without
    a call per subscribed name; else the names themselves. Either way those that exist are among them."""
    every = getattr(topics, "all", None)
    if every is None or not isinstance(names, (set, frozenset)):
        return names
    known = every()
    return [t.name for t in known if t.name in names] if len(known) < len(names) else names


class TopicHashCache:
    """Topic hashes by topic name, computed lazily from `topics` (the topic table: `get(name)` -> a topic with
    `topic_id` and `partitions`, or None) and `racks(topic)` (the racks of each partition's replicas; by
    default the table's `partition_racks`).

    One cache serves the groups of one coordinator shard, as in Kafka. It holds only topics some group has
    asked for; `evict` / `topics_changed` drop entries whose topic changed (the topic table calls
    `topics_changed` on its watchers), `retain` drops the ones no group subscribes to any more."""

    def __init__(self, topics: _Topics, racks: PartitionRacks | None = None) -> None:
        self.topics = topics
        # the racks: given, else the topic table's own `partition_racks` (the broker's table has one), else none
        table_racks: PartitionRacks = getattr(topics, "partition_racks", no_racks)
        self.racks = racks or table_racks
        self._hashes: dict[str, int] = {}
        self.computed = 0          # how many hashes were computed (a miss each), for tests and the bench
        watch = getattr(topics, "watch", None)
        if watch is not None:
            watch(self)

    def hash_of(self, name: str) -> int | None:
        """The topic's hash, computed now if not cached; None if the topic does not exist."""
        cached = self._hashes.get(name)
        if cached is not None:
            return cached
        topic = self.topics.get(name)
        if topic is None:
            return None
        value = topic_hash(topic.topic_id, topic.name, self.racks(topic))
        self._hashes[name] = value
        self.computed += 1
        return value

    def group_hash(self, subscribed: Iterable[str]) -> int:
        """The metadata hash of a group subscribed to these topic names (those that do not exist are left
        out, as Kafka leaves them out)."""
        hashes = {}
        for name in existing(self.topics, subscribed):
            h = self.hash_of(name)
            if h is not None:
                hashes[name] = h
        return group_hash(hashes)

    def subscription_metadata(self, subscribed: Iterable[str]) -> tuple[tuple[uuid.UUID, str, int], ...]:
        """What Kafka 4.0 keeps instead of the hash (before KIP-1101): each subscribed topic's (id, name, partition
        count), sorted by name, those that do not exist left out. No racks: a rack moving changes nothing as 4.0
        (its TopicMetadata has none), while it changes the 4.1+ hash."""
        out = []
        for name in sorted(set(subscribed)):
            topic = self.topics.get(name)
            if topic is not None:
                out.append((topic.topic_id, topic.name, len(topic.partitions)))
        return tuple(out)

    def evict(self, name: str) -> None:
        self._hashes.pop(name, None)

    def topics_changed(self, names: Iterable[str] | None = None) -> None:
        """Topics changed (partitions added, deleted, created again, racks moved): forget their hashes.
        None means any topic may have changed (a broker stopped or started)."""
        if names is None:
            self._hashes.clear()
            return
        for name in names:
            self._hashes.pop(name, None)

    def retain(self, subscribed: AbstractSet[str]) -> None:
        """Keep only the hashes of these topics (the ones some group of this shard subscribes to)."""
        for name in [n for n in self._hashes if n not in subscribed]:
            del self._hashes[name]

    def __contains__(self, name: str) -> bool:
        return name in self._hashes

    def __len__(self) -> int:
        return len(self._hashes)


def epoch_records(metadata_hash: bool, topics: TopicHashCache, group_id: str, epoch: int, subscribed: Iterable[str],
                  kept: tuple = (), has_partition_metadata_record: bool = False) -> list:
    """The records of a consumer group's epoch bump to `epoch` (its subscribed topics `subscribed`; `kept`: the
    subscription metadata the group keeps, `has_partition_metadata_record`: a type 4 record is in the log).
    `metadata_hash` (KIP-1101, Kafka 4.1+): the ConsumerGroupMetadata record with the hash, then the tombstone of
    a type 4 record still in the log. Else as Kafka 4.0: a ConsumerGroupPartitionMetadata record first when the
    subscription metadata changed, then the ConsumerGroupMetadata record without hash."""
    subscribed = set(subscribed)
    if metadata_hash:
        out: list = [ConsumerGroupMetadataRecord(group_id, epoch, topics.group_hash(subscribed))]
        if has_partition_metadata_record:
            out.append(ConsumerGroupPartitionMetadataRecord(group_id, tombstone=True))
        return out
    meta = topics.subscription_metadata(subscribed)
    out = [] if meta == kept else [ConsumerGroupPartitionMetadataRecord(group_id, meta)]
    return out + [ConsumerGroupMetadataRecord(group_id, epoch, 0)]
