"""The KIP-1101 group metadata hash: one 64-bit number per consumer group that changes when, and only when,
a subscribed topic's identity, partition count or partition racks change.

A topic hash is computed over the fields Kafka 4.1's coordinator feeds its hasher, in the same order and
encoding (little-endian numbers; a string as its UTF-16 code units then its length in code units):

    0x00                                   magic byte (the hash version)
    topic id, most significant 64 bits     int64
    topic id, least significant 64 bits    int64
    topic name                             string
    partition count                        int32
    for each partition id 0..count-1:
        partition id                       int32
        for each rack of its replicas, sorted (duplicates kept):
            rack length in code units      int32
            rack                           string

The group hash is 0 with no topics; otherwise it is the hash of the topic hashes (int64 each) in the order of
their topic names, so that swapping two topics' hashes changes it. Kafka hashes these bytes with XXH3-64;
tenure hashes them with MurmurHash3 (x64, 128 bits, seed 0, the first 64 bits as a signed int64). The values
are only ever compared with tenure's own earlier values (ConsumerGroupMetadataValue.MetadataHash), never with
a Kafka broker's.

`TopicHashCache` keeps the hash of each subscribed topic, computed on first use from the topic table and
dropped when the topic changes (the table tells its watchers) or when no group subscribes to it any more.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import mmh3

MAGIC = 0x00
_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
_UUID = struct.Struct("<qq")
_U64 = (1 << 64) - 1


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _string(s: str) -> bytes:
    """A string as Kafka's hasher takes it: its UTF-16 code units (little-endian), then their count."""
    units = s.encode("utf-16-le", "surrogatepass")
    return units + _INT.pack(len(units) // 2)


def _java_order(s: str) -> bytes:
    """Sort key giving Java's String order (by UTF-16 code unit), which differs from Python's (by code point)
    only for characters beyond U+FFFF against U+E000..U+FFFF."""
    return s.encode("utf-16-be", "surrogatepass")


def _hash64(data: bytes) -> int:
    return mmh3.hash64(data, seed=0, x64arch=True, signed=True)[0]


def topic_hash_input(topic_id: uuid.UUID, name: str, partition_racks: Sequence[Sequence[str]]) -> bytes:
    """The bytes a topic hash is computed over (see the module's docstring); `partition_racks[p]` holds the
    racks of partition p's replicas, in any order (an empty list: no rack known)."""
    out = bytearray((MAGIC,))
    out += _UUID.pack(_signed64(topic_id.int >> 64), _signed64(topic_id.int & _U64))
    out += _string(name)
    out += _INT.pack(len(partition_racks))
    for partition, racks in enumerate(partition_racks):
        out += _INT.pack(partition)
        for rack in sorted(racks, key=_java_order):
            out += _INT.pack(len(rack.encode("utf-16-le", "surrogatepass")) // 2)
            out += _string(rack)
    return bytes(out)


def topic_hash(topic_id: uuid.UUID, name: str, partition_racks: Sequence[Sequence[str]]) -> int:
    """The topic's hash (a signed int64): its id, name, partition count and each partition's racks."""
    return _hash64(topic_hash_input(topic_id, name, partition_racks))


def group_hash_input(topic_hashes: dict[str, int]) -> bytes:
    """The bytes a group hash is computed over: each topic hash as an int64, in topic-name order."""
    return b"".join(_LONG.pack(topic_hashes[name]) for name in sorted(topic_hashes, key=_java_order))


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


class TopicHashCache:
    """Topic hashes by topic name, computed lazily from `topics` (the topic table: `get(name)` -> a topic with
    `topic_id` and `partitions`, or None) and `racks(topic)` (the racks of each partition's replicas).

    One cache serves the groups of one coordinator shard, as in Kafka. It holds only topics some group has
    asked for; `evict` / `topics_changed` drop entries whose topic changed (the topic table calls
    `topics_changed` on its watchers), `retain` drops the ones no group subscribes to any more."""

    def __init__(self, topics: _Topics, racks: PartitionRacks = no_racks) -> None:
        self.topics = topics
        self.racks = racks
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
        for name in subscribed:
            h = self.hash_of(name)
            if h is not None:
                hashes[name] = h
        return group_hash(hashes)

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

    def retain(self, subscribed: set[str]) -> None:
        """Keep only the hashes of these topics (the ones some group of this shard subscribes to)."""
        for name in [n for n in self._hashes if n not in subscribed]:
            del self._hashes[name]

    def __contains__(self, name: str) -> bool:
        return name in self._hashes

    def __len__(self) -> int:
        return len(self._hashes)
