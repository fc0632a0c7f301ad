"""The KIP-932 share groups' records in Kafka's __consumer_offsets format (records.py reads and writes them with
the others): Kafka's own key versions, each the record type - 9 partition metadata (replaced by the metadata
hash: read and ignored), 10 member metadata, 11 group metadata, 12 target assignment metadata, 13 target
assignment of a member, 14 current assignment of a member, 15 state partition metadata (which share partitions
have persisted state: read and ignored, tenure's share partitions keep theirs beside the data) -, values v0,
flexible. The structs are kafka-python `ApiData` classes built from this package's JSON schemas (structs.py)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from .structs import LazySchemas, decode_struct

# the key and value classes, each built the first time it is used (structs.LazySchemas)
_S = LazySchemas(__name__, pairs=(
    "ShareGroupMetadata",
    "ShareGroupMemberMetadata",
    "ShareGroupTargetAssignmentMetadata",
    "ShareGroupTargetAssignmentMember",
    "ShareGroupCurrentMemberAssignment",
))
__getattr__ = _S.module_getattr()

SHARE_GROUP_PARTITION_METADATA_KEY_VERSION = 9         # deprecated: read and ignored
SHARE_GROUP_MEMBER_METADATA_KEY_VERSION = 10
SHARE_GROUP_METADATA_KEY_VERSION = 11
SHARE_GROUP_TARGET_METADATA_KEY_VERSION = 12
SHARE_GROUP_TARGET_MEMBER_KEY_VERSION = 13
SHARE_GROUP_CURRENT_ASSIGNMENT_KEY_VERSION = 14
SHARE_GROUP_STATE_PARTITION_METADATA_KEY_VERSION = 15   # read and ignored
FIRST_KEY_VERSION, LAST_KEY_VERSION = 9, 15

# an assignment as records carry it: ((topic id, (partition, ...)), ...), both sorted
Assignment = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True)
class ShareGroupMetadataRecord:
    """ShareGroupMetadataKey/Value (type 11): a share group's epoch."""
    group_id: str
    epoch: int = 0
    tombstone: bool = False


@dataclass(frozen=True)
class ShareMemberRecord:
    """ShareGroupMemberMetadataKey/Value (type 10): a member's subscription and identity."""
    group_id: str
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    tombstone: bool = False


@dataclass(frozen=True)
class ShareTargetMetadataRecord:
    """ShareGroupTargetAssignmentMetadataKey/Value (type 12): the epoch of the group's target assignment."""
    group_id: str
    assignment_epoch: int = 0
    tombstone: bool = False


@dataclass(frozen=True)
class ShareTargetMemberRecord:
    """ShareGroupTargetAssignmentMemberKey/Value (type 13): one member's target partitions."""
    group_id: str
    member_id: str
    partitions: Assignment = ()
    tombstone: bool = False


@dataclass(frozen=True)
class ShareAssignmentRecord:
    """ShareGroupCurrentMemberAssignmentKey/Value (type 14): a member's epoch, state (0: stable - a share member
    has nothing to revoke) and the partitions it has."""
    group_id: str
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = 0
    assigned: Assignment = ()
    tombstone: bool = False


@dataclass(frozen=True)
class ShareIgnoredRecord:
    """A share group record type tenure reads and ignores (9 partition metadata, 15 state partition metadata)."""
    group_id: str
    key_version: int
    tombstone: bool = True


SHARE_GROUP_RECORDS = (ShareGroupMetadataRecord, ShareMemberRecord, ShareTargetMetadataRecord,
                       ShareTargetMemberRecord, ShareAssignmentRecord, ShareIgnoredRecord)
ShareGroupRecord = (ShareGroupMetadataRecord | ShareMemberRecord | ShareTargetMetadataRecord | ShareTargetMemberRecord
                    | ShareAssignmentRecord | ShareIgnoredRecord)


def _topic_partitions(cls, assignment: Assignment) -> list:
    return [cls(topic_id=tid, partitions=list(parts)) for tid, parts in assignment]


def _assignment(items) -> Assignment:
    return tuple(sorted((t.topic_id, tuple(sorted(t.partitions))) for t in items))


def encode_share_record(r: ShareGroupRecord) -> tuple[bytes, bytes | None]:
    """The key (its record type as version) and value (v0, flexible) of a KIP-932 group record."""
    value = None
    if isinstance(r, ShareGroupMetadataRecord):
        key = _S.ShareGroupMetadataKey(group_id=r.group_id).encode(version=SHARE_GROUP_METADATA_KEY_VERSION)
        value = None if r.tombstone else _S.ShareGroupMetadataValue(epoch=r.epoch)
    elif isinstance(r, ShareMemberRecord):
        key = _S.ShareGroupMemberMetadataKey(group_id=r.group_id, member_id=r.member_id).encode(
            version=SHARE_GROUP_MEMBER_METADATA_KEY_VERSION)
        value = None if r.tombstone else _S.ShareGroupMemberMetadataValue(
            rack_id=r.rack_id, client_id=r.client_id, client_host=r.client_host,
            subscribed_topic_names=list(r.subscribed_topic_names))
    elif isinstance(r, ShareTargetMetadataRecord):
        key = _S.ShareGroupTargetAssignmentMetadataKey(group_id=r.group_id).encode(
            version=SHARE_GROUP_TARGET_METADATA_KEY_VERSION)
        value = None if r.tombstone else _S.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=r.assignment_epoch)
    elif isinstance(r, ShareTargetMemberRecord):
        key = _S.ShareGroupTargetAssignmentMemberKey(group_id=r.group_id, member_id=r.member_id).encode(
            version=SHARE_GROUP_TARGET_MEMBER_KEY_VERSION)
        V = _S.ShareGroupTargetAssignmentMemberValue
        value = None if r.tombstone else V(topic_partitions=_topic_partitions(
            V.fields["topic_partitions"].data_class, r.partitions))
    elif isinstance(r, ShareAssignmentRecord):
        key = _S.ShareGroupCurrentMemberAssignmentKey(group_id=r.group_id, member_id=r.member_id).encode(
            version=SHARE_GROUP_CURRENT_ASSIGNMENT_KEY_VERSION)
        V = _S.ShareGroupCurrentMemberAssignmentValue
        value = None if r.tombstone else V(
            member_epoch=r.member_epoch, previous_member_epoch=r.previous_member_epoch, state=r.state,
            assigned_partitions=_topic_partitions(V.fields["assigned_partitions"].data_class, r.assigned))
    else:
        raise TypeError(f"share group record type {r.key_version} is read, not written")
    return bytes(key), None if value is None else bytes(value.encode(version=0))


def decode_share_record(kv: int, key: bytes, value: bytes | None) -> ShareGroupRecord:
    """The record of key version `kv` (9-15), from its key and value (None: a tombstone)."""
    if kv == SHARE_GROUP_METADATA_KEY_VERSION:
        k = decode_struct(_S.ShareGroupMetadataKey, key)
        if value is None:
            return ShareGroupMetadataRecord(k.group_id, tombstone=True)
        return ShareGroupMetadataRecord(k.group_id, decode_struct(_S.ShareGroupMetadataValue, value).epoch)
    if kv == SHARE_GROUP_MEMBER_METADATA_KEY_VERSION:
        k = decode_struct(_S.ShareGroupMemberMetadataKey, key)
        if value is None:
            return ShareMemberRecord(k.group_id, k.member_id, tombstone=True)
        v = decode_struct(_S.ShareGroupMemberMetadataValue, value)
        return ShareMemberRecord(k.group_id, k.member_id, v.rack_id, v.client_id, v.client_host,
                                 tuple(v.subscribed_topic_names))
    if kv == SHARE_GROUP_TARGET_METADATA_KEY_VERSION:
        k = decode_struct(_S.ShareGroupTargetAssignmentMetadataKey, key)
        if value is None:
            return ShareTargetMetadataRecord(k.group_id, tombstone=True)
        return ShareTargetMetadataRecord(
            k.group_id, decode_struct(_S.ShareGroupTargetAssignmentMetadataValue, value).assignment_epoch)
    if kv == SHARE_GROUP_TARGET_MEMBER_KEY_VERSION:
        k = decode_struct(_S.ShareGroupTargetAssignmentMemberKey, key)
        if value is None:
            return ShareTargetMemberRecord(k.group_id, k.member_id, tombstone=True)
        v = decode_struct(_S.ShareGroupTargetAssignmentMemberValue, value)
        return ShareTargetMemberRecord(k.group_id, k.member_id, _assignment(v.topic_partitions))
    if kv == SHARE_GROUP_CURRENT_ASSIGNMENT_KEY_VERSION:
        k = decode_struct(_S.ShareGroupCurrentMemberAssignmentKey, key)
        if value is None:
            return ShareAssignmentRecord(k.group_id, k.member_id, tombstone=True)
        v = decode_struct(_S.ShareGroupCurrentMemberAssignmentValue, value)
        return ShareAssignmentRecord(k.group_id, k.member_id, v.member_epoch, v.previous_member_epoch, v.state,
                                     _assignment(v.assigned_partitions))
    # 9 and 15: keyed by the group id alone, as type 11 - read with that struct
    k = decode_struct(_S.ShareGroupMetadataKey, SHARE_GROUP_METADATA_KEY_VERSION.to_bytes(2, "big") + bytes(key[2:]))
    return ShareIgnoredRecord(k.group_id, kv, tombstone=value is None)
