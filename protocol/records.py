"""The coordinator's records in Kafka's __consumer_offsets format.

A record is a key (int16 key version + key struct) and a value (int16 value version + value
struct, or None for a tombstone). The key version names the record type: 0/1 offset commit,
2 group metadata. The structs are kafka-python `ApiData` classes built from this package's JSON
schemas, so there is one codec engine for requests and records alike.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.protocol.api_data import ApiData

from . import schemas

_I16 = struct.Struct(">h")

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION = 3


class GroupMetadataKey(ApiData, load_json=schemas):
    pass


class GroupMetadataValue(ApiData, load_json=schemas):
    pass


class OffsetCommitKey(ApiData, load_json=schemas):
    pass


class OffsetCommitValue(ApiData, load_json=schemas):
    pass


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataRecord:
    """GroupMetadataKey/Value: the whole group at a stable point (value None = tombstone)."""
    group_id: str
    protocol_type: str = ""
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = ()
    tombstone: bool = False


@dataclass(frozen=True)
class OffsetCommitRecord:
    group_id: str
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    tombstone: bool = False


Record = GroupMetadataRecord | OffsetCommitRecord


class UnknownRecordType(ValueError):
    def __init__(self, key_version: int) -> None:
        super().__init__(f"unknown __consumer_offsets record key version {key_version}")
        self.key_version = key_version


def encode(record: Record) -> tuple[bytes, bytes | None]:
    if isinstance(record, GroupMetadataRecord):
        key = bytes(GroupMetadataKey(group=record.group_id).encode(version=GROUP_METADATA_KEY_VERSION))
        if record.tombstone:
            return key, None
        M = GroupMetadataValue.MemberMetadata
        v = GROUP_METADATA_VALUE_VERSION
        value = GroupMetadataValue(
            protocol_type=record.protocol_type, generation=record.generation, protocol=record.protocol,
            leader=record.leader, current_state_timestamp=record.current_state_timestamp,
            members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                       client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                       session_timeout=m.session_timeout_ms, subscription=m.subscription,
                       assignment=m.assignment) for m in record.members])
        return key, bytes(value.encode(version=v))
    if isinstance(record, OffsetCommitRecord):
        key = bytes(OffsetCommitKey(
            group=record.group_id, topic=record.topic, partition=record.partition
        ).encode(version=OFFSET_COMMIT_KEY_VERSION))
        if record.tombstone:
            return key, None
        v = OFFSET_COMMIT_VALUE_VERSION
        value = OffsetCommitValue(offset=record.offset, leader_epoch=record.leader_epoch,
                                  metadata=record.metadata, commit_timestamp=record.commit_timestamp)
        return key, bytes(value.encode(version=v))
    raise TypeError(f"not a coordinator record: {record!r}")


def key_version(key: bytes) -> int:
    if key is None or len(key) < 2:
        raise ValueError("record key shorter than its version prefix")
    return _I16.unpack_from(key, 0)[0]


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode one record (the ApiData codec reads each int16 version prefix itself)."""
    kv = key_version(key)
    if kv == GROUP_METADATA_KEY_VERSION:
        k = GroupMetadataKey.decode(bytes(key))
        if value is None:
            return GroupMetadataRecord(group_id=k.group, tombstone=True)
        vv = key_version(value)
        val = GroupMetadataValue.decode(bytes(value))
        return GroupMetadataRecord(
            group_id=k.group, protocol_type=val.protocol_type, generation=val.generation,
            protocol=val.protocol, leader=val.leader,
            current_state_timestamp=val.current_state_timestamp if vv >= 2 else -1,
            members=tuple(MemberRecord(
                m.member_id, m.group_instance_id if vv >= 3 else None, m.client_id, m.client_host,
                m.rebalance_timeout if vv >= 1 else m.session_timeout, m.session_timeout,
                bytes(m.subscription), bytes(m.assignment)) for m in val.members))
    if kv in (0, OFFSET_COMMIT_KEY_VERSION):
        k = OffsetCommitKey.decode(bytes(key))
        if value is None:
            return OffsetCommitRecord(k.group, k.topic, k.partition, tombstone=True)
        vv = key_version(value)
        val = OffsetCommitValue.decode(bytes(value))
        return OffsetCommitRecord(k.group, k.topic, k.partition, val.offset,
                                  val.leader_epoch if vv >= 3 else -1, val.metadata, val.commit_timestamp)
    raise UnknownRecordType(kv)
