"""The KIP-848 consumer groups' records in Kafka's __consumer_offsets format (records.py reads and writes
them with the others): Kafka's own key versions 3-8, each the record type - 3 group metadata with the
KIP-1101 metadata hash, 4 partition metadata (the subscribed topics' metadata as Kafka 4.0 keeps it, which the
hash replaced in 4.1: written as 4.0, only its tombstone from 4.1), 5 member metadata,
6 target assignment metadata, 7 target assignment of a member, 8 current assignment of a member, 16 a
subscribed regular expression's resolution -, values v0, flexible. The structs are kafka-python `ApiData` classes built from this package's JSON schemas
(structs.py)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from .structs import LazySchemas, decode_struct, encode_struct, key_version

# the key and value classes, each built the first time it is used (structs.LazySchemas)
_S = LazySchemas(__name__, pairs=(
    "ConsumerGroupMetadata",
    "ConsumerGroupPartitionMetadata",
    "ConsumerGroupMemberMetadata",
    "ConsumerGroupTargetAssignmentMetadata",
    "ConsumerGroupTargetAssignmentMember",
    "ConsumerGroupCurrentMemberAssignment",
    "ConsumerGroupRegularExpression",
))
__getattr__ = _S.module_getattr()

# KIP-848 consumer group records: Kafka's own key versions (the record type) and value version 0
CONSUMER_GROUP_METADATA_KEY_VERSION = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION = 4     # Kafka 4.0's; deprecated by KIP-1101 (4.1)
CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION = 5
CONSUMER_GROUP_TARGET_METADATA_KEY_VERSION = 6
CONSUMER_GROUP_TARGET_MEMBER_KEY_VERSION = 7
CONSUMER_GROUP_CURRENT_ASSIGNMENT_KEY_VERSION = 8
CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION = 16

# an assignment as records carry it: ((topic id, (partition, ...)), ...), both sorted
Assignment = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True)
class ConsumerGroupMetadataRecord:
    """ConsumerGroupMetadataKey/Value (type 3): a consumer group's epoch and its KIP-1101 metadata hash."""
    group_id: str
    epoch: int = 0
    metadata_hash: int = 0
    tombstone: bool = False


# a subscribed topic's metadata as Kafka 4.0 keeps it: (topic id, topic name, partition count)
SubscribedTopic = tuple[uuid.UUID, str, int]


@dataclass(frozen=True)
class ConsumerGroupPartitionMetadataRecord:
    """ConsumerGroupPartitionMetadataKey/Value (type 4): the metadata of the topics a consumer group subscribes
    to, as Kafka 4.0 writes it (each topic's id, name and partition count, sorted by name; no racks - 4.0
    writes an empty PartitionMetadata list; racks an older log carries are read and dropped). KIP-1101 (4.1)
    replaced it with the metadata hash: a 4.1+ coordinator writes only its tombstone."""
    group_id: str
    topics: tuple[SubscribedTopic, ...] = ()
    tombstone: bool = False


@dataclass(frozen=True)
class ConsumerMemberRecord:
    """ConsumerGroupMemberMetadataKey/Value (type 5): a member's subscription and identity."""
    group_id: str
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # ClassicMemberMetadata (tagged field 0): a member served through the classic protocol inside a consumer
    # group (online migration): its session timeout and its JoinGroup protocols ((name, metadata), ...)
    classic: ClassicMemberMetadata | None = None
    tombstone: bool = False


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a consumer group keeps of a member that speaks the classic protocol: its session timeout and the
    protocols of its JoinGroup, in the member's order of preference."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class TargetAssignmentMetadataRecord:
    """ConsumerGroupTargetAssignmentMetadataKey/Value (type 6): the epoch of the group's target assignment."""
    group_id: str
    assignment_epoch: int = 0
    tombstone: bool = False


@dataclass(frozen=True)
class TargetAssignmentMemberRecord:
    """ConsumerGroupTargetAssignmentMemberKey/Value (type 7): one member's target partitions."""
    group_id: str
    member_id: str
    partitions: Assignment = ()
    tombstone: bool = False


@dataclass(frozen=True)
class CurrentAssignmentRecord:
    """ConsumerGroupCurrentMemberAssignmentKey/Value (type 8): a member's epoch, reconciliation state
    (0 stable, 1 unrevoked partitions, 2 unreleased partitions) and the partitions it owns or must revoke."""
    group_id: str
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    assigned: Assignment = ()
    pending_revocation: Assignment = ()
    tombstone: bool = False


@dataclass(frozen=True)
class RegularExpressionRecord:
    """ConsumerGroupRegularExpressionKey/Value (type 16): what a regular expression some members of the group
    subscribe to resolved to - the topic names it matched, the version of the topic table it was resolved
    against, and when."""
    group_id: str
    regex: str
    topics: tuple[str, ...] = ()
    version: int = 0
    timestamp: int = 0
    tombstone: bool = False


CONSUMER_GROUP_RECORDS = (ConsumerGroupMetadataRecord, ConsumerGroupPartitionMetadataRecord, ConsumerMemberRecord,
                          TargetAssignmentMetadataRecord, TargetAssignmentMemberRecord, CurrentAssignmentRecord,
                          RegularExpressionRecord)

ConsumerGroupRecord = (ConsumerGroupMetadataRecord | ConsumerGroupPartitionMetadataRecord | ConsumerMemberRecord
                       | TargetAssignmentMetadataRecord | TargetAssignmentMemberRecord | CurrentAssignmentRecord
                       | RegularExpressionRecord)


def _topic_partitions(cls, assignment: Assignment) -> list:
    return [cls(topic_id=tid, partitions=list(parts)) for tid, parts in assignment]


def _assignment(items) -> Assignment:
    return tuple(sorted((t.topic_id, tuple(sorted(t.partitions))) for t in items))


def _classic_value(c: ClassicMemberMetadata | None):
    if c is None:
        return None
    C = _S.ConsumerGroupMemberMetadataValue.fields["classic_member_metadata"].data_class
    P = C.fields["supported_protocols"].data_class
    return C(session_timeout_ms=c.session_timeout_ms,
             supported_protocols=[P(name=n, metadata=m) for n, m in c.protocols])


def encode_consumer_record(r: ConsumerGroupRecord) -> tuple[bytes, bytes | None]:
    """The key (its record type as version) and value (v0, flexible) of a KIP-848 record."""
    if isinstance(r, ConsumerGroupMetadataRecord):
        key = _S.ConsumerGroupMetadataKey(group_id=r.group_id).encode(version=CONSUMER_GROUP_METADATA_KEY_VERSION)
        value = None if r.tombstone else _S.ConsumerGroupMetadataValue(epoch=r.epoch, metadata_hash=r.metadata_hash)
    elif isinstance(r, ConsumerGroupPartitionMetadataRecord):
        key = _S.ConsumerGroupPartitionMetadataKey(group_id=r.group_id).encode(
            version=CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION)
        T = _S.ConsumerGroupPartitionMetadataValue.fields["topics"].data_class
        value = None if r.tombstone else _S.ConsumerGroupPartitionMetadataValue(topics=[
            T(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[]) for tid, name, n in r.topics])
    elif isinstance(r, ConsumerMemberRecord):
        key = _S.ConsumerGroupMemberMetadataKey(group_id=r.group_id, member_id=r.member_id).encode(
            version=CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION)
        value = None if r.tombstone else _S.ConsumerGroupMemberMetadataValue(
            instance_id=r.instance_id, rack_id=r.rack_id, client_id=r.client_id, client_host=r.client_host,
            subscribed_topic_names=list(r.subscribed_topic_names), subscribed_topic_regex=r.subscribed_topic_regex,
            rebalance_timeout_ms=r.rebalance_timeout_ms, server_assignor=r.server_assignor,
            classic_member_metadata=_classic_value(r.classic))
    elif isinstance(r, TargetAssignmentMetadataRecord):
        key = _S.ConsumerGroupTargetAssignmentMetadataKey(group_id=r.group_id).encode(
            version=CONSUMER_GROUP_TARGET_METADATA_KEY_VERSION)
        value = None if r.tombstone else _S.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=r.assignment_epoch)
    elif isinstance(r, RegularExpressionRecord):
        key = _S.ConsumerGroupRegularExpressionKey(group_id=r.group_id, regular_expression=r.regex).encode(
            version=CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION)
        # positional: the field named Version would be taken for the struct's own version keyword
        value = None if r.tombstone else _S.ConsumerGroupRegularExpressionValue(list(r.topics), r.version, r.timestamp)
    elif isinstance(r, TargetAssignmentMemberRecord):
        key = _S.ConsumerGroupTargetAssignmentMemberKey(group_id=r.group_id, member_id=r.member_id).encode(
            version=CONSUMER_GROUP_TARGET_MEMBER_KEY_VERSION)
        V = _S.ConsumerGroupTargetAssignmentMemberValue
        value = None if r.tombstone else V(topic_partitions=_topic_partitions(
            V.fields["topic_partitions"].data_class, r.partitions))
    else:
        key = _S.ConsumerGroupCurrentMemberAssignmentKey(group_id=r.group_id, member_id=r.member_id).encode(
            version=CONSUMER_GROUP_CURRENT_ASSIGNMENT_KEY_VERSION)
        V = _S.ConsumerGroupCurrentMemberAssignmentValue
        T = V.fields["assigned_partitions"].data_class
        value = None if r.tombstone else V(
            member_epoch=r.member_epoch, previous_member_epoch=r.previous_member_epoch, state=r.state,
            assigned_partitions=_topic_partitions(T, r.assigned),
            partitions_pending_revocation=_topic_partitions(T, r.pending_revocation))
    return bytes(key), None if value is None else encode_struct(value, 0)


def decode_consumer_record(kv: int, key: bytes, value: bytes | None) -> ConsumerGroupRecord:
    """The record of key version `kv` (3-8, 16), from its key and value (None: a tombstone)."""
    if kv == CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION:
        rk = decode_struct(_S.ConsumerGroupRegularExpressionKey, key)
        if value is None:
            return RegularExpressionRecord(rk.group_id, rk.regular_expression, tombstone=True)
        rv = decode_struct(_S.ConsumerGroupRegularExpressionValue, value)
        return RegularExpressionRecord(rk.group_id, rk.regular_expression, tuple(rv.topics), rv.version,
                                       rv.timestamp)
    if kv == CONSUMER_GROUP_METADATA_KEY_VERSION:
        k = decode_struct(_S.ConsumerGroupMetadataKey, key)
        if value is None:
            return ConsumerGroupMetadataRecord(k.group_id, tombstone=True)
        val = decode_struct(_S.ConsumerGroupMetadataValue, value)
        return ConsumerGroupMetadataRecord(k.group_id, val.epoch, val.metadata_hash)
    if kv == CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION:
        pk = decode_struct(_S.ConsumerGroupPartitionMetadataKey, key)
        if value is None:
            return ConsumerGroupPartitionMetadataRecord(pk.group_id, tombstone=True)
        pv = decode_struct(_S.ConsumerGroupPartitionMetadataValue, value)
        return ConsumerGroupPartitionMetadataRecord(pk.group_id, tuple(sorted(
            ((t.topic_id, t.topic_name, t.num_partitions) for t in pv.topics), key=lambda t: t[1])))
    if kv == CONSUMER_GROUP_TARGET_METADATA_KEY_VERSION:
        k = decode_struct(_S.ConsumerGroupTargetAssignmentMetadataKey, key)
        if value is None:
            return TargetAssignmentMetadataRecord(k.group_id, tombstone=True)
        return TargetAssignmentMetadataRecord(
            k.group_id, decode_struct(_S.ConsumerGroupTargetAssignmentMetadataValue, value).assignment_epoch)
    if kv == CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION:
        k = decode_struct(_S.ConsumerGroupMemberMetadataKey, key)
        if value is None:
            return ConsumerMemberRecord(k.group_id, k.member_id, tombstone=True)
        # kafka-python's compiled decoder misreads the tagged nullable struct (ClassicMemberMetadata): this
        # value is read by its field-by-field decoder
        v = _S.ConsumerGroupMemberMetadataValue.decode(bytes(value), version=key_version(value))
        c = v.classic_member_metadata
        classic = None if c is None else ClassicMemberMetadata(
            c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))
        return ConsumerMemberRecord(k.group_id, k.member_id, v.instance_id, v.rack_id, v.client_id, v.client_host,
                                    tuple(v.subscribed_topic_names), v.subscribed_topic_regex,
                                    v.rebalance_timeout_ms, v.server_assignor, classic)
    if kv == CONSUMER_GROUP_TARGET_MEMBER_KEY_VERSION:
        k = decode_struct(_S.ConsumerGroupTargetAssignmentMemberKey, key)
        if value is None:
            return TargetAssignmentMemberRecord(k.group_id, k.member_id, tombstone=True)
        v = decode_struct(_S.ConsumerGroupTargetAssignmentMemberValue, value)
        return TargetAssignmentMemberRecord(k.group_id, k.member_id, _assignment(v.topic_partitions))
    k = decode_struct(_S.ConsumerGroupCurrentMemberAssignmentKey, key)
    if value is None:
        return CurrentAssignmentRecord(k.group_id, k.member_id, tombstone=True)
    v = decode_struct(_S.ConsumerGroupCurrentMemberAssignmentValue, value)
    return CurrentAssignmentRecord(k.group_id, k.member_id, v.member_epoch, v.previous_member_epoch, v.state,
                                   _assignment(v.assigned_partitions), _assignment(v.partitions_pending_revocation))
