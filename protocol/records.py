"""The coordinator's records in Kafka's __consumer_offsets format.

A record is a key (int16 key version + key struct) and a value (int16 value version + value
struct, or None for a tombstone). The key version names the record type: 0/1 offset commit,
2 group metadata (Kafka's own), 3-8 KIP-848 consumer groups (Kafka's own: 3 group metadata with the
KIP-1101 metadata hash, 4 partition metadata - replaced by the hash, read and ignored -, 5 member metadata,
6 target assignment metadata, 7 target assignment of a member, 8 current assignment of a member; values
v0, flexible; their structs and record classes are in consumer_group_records.py, and `encode`/`decode` here
read and write them with the others), 9-15 KIP-932 share groups (Kafka's own: share_group_records.py), 345 static-member event and 346 coordinator load (this project's own,
see below). The structs are kafka-python `ApiData` classes built from this package's JSON schemas
(structs.py), so there is one codec engine for requests and records alike.

Static-member events (StaticMemberEventKey v345 / StaticMemberEventValue v0)
---------------------------------------------------------------------------
The history of the `group.instance.id -> member.id` map, with causes. Key = (group, instance id), so
after compaction the latest event of each instance survives; a tombstone (value None) is written for
every such key when the group is deleted. Key version 345 (after KIP-345) is one Kafka does not use for
__consumer_offsets (it uses 0..~20). tenure's loader skips key versions it does not know
(`UnknownRecordType`) with a warning, as Kafka's newer coordinator loader does; older Kafka tools that
decode __consumer_offsets (e.g. its offsets formatter) may refuse them instead. Value fields: cause, old_member_id (nullable),
new_member_id (nullable), generation (int32: the group's generation when the event happened, before any
rebalance it starts), timestamp (int64 ms), client_id, client_host (the client whose request caused the
event; for events with no request - timers, forced rebalance - the member's own recorded client).

Causes (`cause` is a string, one of `STATIC_EVENT_CAUSES`):
- joined: an instance id gets its first member id in the group (old None, new id).
- replaced: a mapped instance id joins with member id "" and gets a new member id (KIP-345 static
  replacement; old -> new).
- fenced: a request is answered FENCED_INSTANCE_ID (82) because it names a mapped instance id with
  another member id (old = the id presented, new = the mapped id), one per request (per identity of a
  batch LeaveGroup); also one per parked JoinGroup/SyncGroup of the replaced member answered 82 at
  replacement time (old = replaced id, new = replacement, client = the parked request's client).
- expired: the session timeout removed a static member (old id, new None).
- registration_expired: the KIP-345 draft registration timeout removed an offline static member.
- sync_expired: a static member sent no SyncGroup within the rebalance timeout and was removed.
- group_full: a static member rejoining a group at group.max.size was removed (error 81).
- left: a LeaveGroup naming the member's own member id removed it (v0-2, or v3+ with a member id).
- removed: a v3+ LeaveGroup identity with member id "" and a mapped instance id removed it: that is what
  the Admin client's removeMembersFromConsumerGroup sends (a consumer leaving names its own id).
- forced_rebalance: force_rebalance() of a static group: one event per member, old == new == its id.

Coordinator loads (CoordinatorLoadKey v346 / CoordinatorLoadValue v0)
---------------------------------------------------------------------
One record each time an offsets partition's coordinator moves to another broker of a cluster (docs/cluster.md),
written into that partition by the new coordinator once it has loaded it, before it serves: key = the
partition (so compaction keeps the latest move), value = broker (now coordinating), previous_broker (-1:
none), cause (`broker_stopped`, `broker_started`, `moved`, ...), leader_epoch (the partition's, after the
move), timestamp. Replay keeps the latest as the shard's `last_load`; the audit shows the moves beside the
member ids of each group of the partition.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from tenure.deferred import deferred

from .structs import DECODERS, LazySchemas, compiled_decoder, decode_struct, key_version

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION = 3
STATIC_MEMBER_EVENT_KEY_VERSION = 345
STATIC_MEMBER_EVENT_VALUE_VERSION = 0
COORDINATOR_LOAD_KEY_VERSION = 346
COORDINATOR_LOAD_VALUE_VERSION = 0

# the KIP-848 consumer groups' and the share groups' records: imported with their group kind (coordinator/kinds.py
# LazyKind), or by the first of their records read or written here
if TYPE_CHECKING:
    from . import consumer_group_records as cg
    from . import share_group_records as sg
else:
    cg = deferred("tenure.protocol.consumer_group_records")
    sg = deferred("tenure.protocol.share_group_records")

JOINED = "joined"
REPLACED = "replaced"
FENCED = "fenced"
EXPIRED = "expired"
REGISTRATION_EXPIRED = "registration_expired"
SYNC_EXPIRED = "sync_expired"
GROUP_FULL = "group_full"
LEFT = "left"
REMOVED = "removed"
FORCED_REBALANCE = "forced_rebalance"
STATIC_EVENT_CAUSES = (JOINED, REPLACED, FENCED, EXPIRED, REGISTRATION_EXPIRED, SYNC_EXPIRED, GROUP_FULL,
                       LEFT, REMOVED, FORCED_REBALANCE)


# the key and value classes, each built the first time it is used (structs.LazySchemas)
_S = LazySchemas(__name__, pairs=("GroupMetadata", "OffsetCommit", "StaticMemberEvent", "CoordinatorLoad"))
__getattr__ = _S.module_getattr()


@dataclass(frozen=True)
class MemberRecord:
    """One member of a classic group as GroupMetadataValue keeps it (its protocol's subscription and assignment)."""
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
    """OffsetCommitKey/Value: a group's committed offset of one partition (value None = tombstone)."""
    group_id: str
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    tombstone: bool = False


@dataclass(frozen=True)
class StaticMemberEventRecord:
    """StaticMemberEventKey/Value: one change (or challenge) of a group's instance-id map
    (value None = tombstone, written when the group is deleted)."""
    group_id: str
    group_instance_id: str
    cause: str = ""
    old_member_id: str | None = None
    new_member_id: str | None = None
    generation: int = -1
    timestamp: int = -1
    client_id: str = ""
    client_host: str = ""
    tombstone: bool = False


@dataclass(frozen=True)
class CoordinatorLoadRecord:
    """CoordinatorLoadKey/Value: offsets partition `offsets_partition` was loaded by coordinator `broker`,
    moved from `previous_broker`, for `cause`."""
    offsets_partition: int
    broker: int = -1
    previous_broker: int = -1
    cause: str = ""
    leader_epoch: int = -1
    timestamp: int = -1
    tombstone: bool = False


@dataclass(frozen=True)
class TransactionalOffsetCommit:
    """An offset committed inside a transaction (TxnOffsetCommit): the same OffsetCommit record, written in a
    transactional batch of the producer (id, epoch). It counts for the group only once that producer's
    commit marker follows it in the partition; an abort marker drops it."""
    producer_id: int
    producer_epoch: int
    record: OffsetCommitRecord

    @property
    def group_id(self) -> str:
        return self.record.group_id


@dataclass(frozen=True)
class TransactionEnd:
    """A producer's commit or abort marker in __consumer_offsets (a control batch, not a keyed record):
    its pending transactional offsets become the group's (commit) or are dropped (abort)."""
    producer_id: int
    producer_epoch: int
    commit: bool


Record: TypeAlias = (
    "GroupMetadataRecord | OffsetCommitRecord | StaticMemberEventRecord | CoordinatorLoadRecord"
    "| cg.ConsumerGroupMetadataRecord | cg.ConsumerGroupPartitionMetadataRecord | cg.ConsumerMemberRecord"
    "| cg.TargetAssignmentMetadataRecord | cg.TargetAssignmentMemberRecord | cg.CurrentAssignmentRecord"
    "| cg.RegularExpressionRecord | sg.ShareGroupRecord")


class UnknownRecordType(ValueError):
    def __init__(self, key_version: int) -> None:
        super().__init__(f"unknown __consumer_offsets record key version {key_version}")
        self.key_version = key_version


def encode(record: Record) -> tuple[bytes, bytes | None]:
    if isinstance(record, TransactionalOffsetCommit):
        record = record.record
    if isinstance(record, GroupMetadataRecord):
        key = bytes(_S.GroupMetadataKey(group=record.group_id).encode(version=GROUP_METADATA_KEY_VERSION))
        if record.tombstone:
            return key, None
        M = _S.GroupMetadataValue.MemberMetadata
        v = GROUP_METADATA_VALUE_VERSION
        value = _S.GroupMetadataValue(
            protocol_type=record.protocol_type, generation=record.generation, protocol=record.protocol,
            leader=record.leader, current_state_timestamp=record.current_state_timestamp,
            members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                       client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                       session_timeout=m.session_timeout_ms, subscription=m.subscription,
                       assignment=m.assignment) for m in record.members])
        return key, bytes(value.encode(version=v))
    if isinstance(record, OffsetCommitRecord):
        key = bytes(_S.OffsetCommitKey(
            group=record.group_id, topic=record.topic, partition=record.partition
        ).encode(version=OFFSET_COMMIT_KEY_VERSION))
        if record.tombstone:
            return key, None
        v = OFFSET_COMMIT_VALUE_VERSION
        value = _S.OffsetCommitValue(offset=record.offset, leader_epoch=record.leader_epoch,
                                  metadata=record.metadata, commit_timestamp=record.commit_timestamp)
        return key, bytes(value.encode(version=v))
    if isinstance(record, StaticMemberEventRecord):
        key = bytes(_S.StaticMemberEventKey(
            group=record.group_id, group_instance_id=record.group_instance_id
        ).encode(version=STATIC_MEMBER_EVENT_KEY_VERSION))
        if record.tombstone:
            return key, None
        if record.cause not in STATIC_EVENT_CAUSES:
            raise ValueError(f"unknown static-member event cause {record.cause!r}")
        value = _S.StaticMemberEventValue(
            cause=record.cause, old_member_id=record.old_member_id, new_member_id=record.new_member_id,
            generation=record.generation, timestamp=record.timestamp, client_id=record.client_id,
            client_host=record.client_host)
        return key, bytes(value.encode(version=STATIC_MEMBER_EVENT_VALUE_VERSION))
    if isinstance(record, CoordinatorLoadRecord):
        key = bytes(_S.CoordinatorLoadKey(partition=record.offsets_partition).encode(
            version=COORDINATOR_LOAD_KEY_VERSION))
        if record.tombstone:
            return key, None
        value = _S.CoordinatorLoadValue(broker=record.broker, previous_broker=record.previous_broker,
                                     cause=record.cause, leader_epoch=record.leader_epoch,
                                     timestamp=record.timestamp)
        return key, bytes(value.encode(version=COORDINATOR_LOAD_VALUE_VERSION))
    if isinstance(record, cg.CONSUMER_GROUP_RECORDS):
        return cg.encode_consumer_record(record)
    if isinstance(record, sg.SHARE_GROUP_RECORDS):
        return sg.encode_share_record(record)
    raise TypeError(f"not a coordinator record: {record!r}")


def offset_commit_key(key: bytes) -> tuple[str, str, int]:
    """An offset commit's key (key version 0 or 1) as its fields: (group, topic, partition). `decode` reads
    offset commit keys through it; the audit calls it once per distinct key (the same keys repeat)."""
    version = key_version(key)
    fast = DECODERS.get((_S.OffsetCommitKey, version))
    if fast is None:
        fast = compiled_decoder(_S.OffsetCommitKey, version)
    k = fast(key if type(key) is bytes else bytes(key), 2)[0]
    return k.group, k.topic, k.partition


def offset_commit_value(value: bytes) -> tuple[int, int, str, int]:
    """An offset commit's value as its fields: (offset, leader epoch - -1 before value v3 -, metadata,
    commit timestamp), through the same compiled decoder as every struct (`decode_struct`, inlined: this is the
    audit's per-record path). `decode` reads offset commit values through it."""
    vv = key_version(value)
    fast = DECODERS.get((_S.OffsetCommitValue, vv))
    if fast is None:
        fast = compiled_decoder(_S.OffsetCommitValue, vv)
    val = fast(value if type(value) is bytes else bytes(value), 2)[0]
    return val.offset, val.leader_epoch if vv >= 3 else -1, val.metadata, val.commit_timestamp


def decode(key: bytes, value: bytes | None) -> Record:
    """Decode one record (each key and value starts with its int16 version)."""
    kv = key_version(key)
    if kv == GROUP_METADATA_KEY_VERSION:
        k = decode_struct(_S.GroupMetadataKey, key)
        if value is None:
            return GroupMetadataRecord(group_id=k.group, tombstone=True)
        vv = key_version(value)
        val = decode_struct(_S.GroupMetadataValue, value)
        return GroupMetadataRecord(
            group_id=k.group, protocol_type=val.protocol_type, generation=val.generation,
            protocol=val.protocol, leader=val.leader,
            current_state_timestamp=val.current_state_timestamp if vv >= 2 else -1,
            members=tuple(MemberRecord(
                m.member_id, m.group_instance_id if vv >= 3 else None, m.client_id, m.client_host,
                m.rebalance_timeout if vv >= 1 else m.session_timeout, m.session_timeout,
                bytes(m.subscription), bytes(m.assignment)) for m in val.members))
    if kv in (0, OFFSET_COMMIT_KEY_VERSION):
        group, topic, partition = offset_commit_key(key)
        if value is None:
            return OffsetCommitRecord(group, topic, partition, tombstone=True)
        offset, leader_epoch, metadata, commit_timestamp = offset_commit_value(value)
        return OffsetCommitRecord(group, topic, partition, offset, leader_epoch, metadata, commit_timestamp)
    if kv == STATIC_MEMBER_EVENT_KEY_VERSION:
        k = decode_struct(_S.StaticMemberEventKey, key)
        if value is None:
            return StaticMemberEventRecord(k.group, k.group_instance_id, tombstone=True)
        val = decode_struct(_S.StaticMemberEventValue, value)
        # a cause this version does not know (written by a newer one) is kept as it is
        return StaticMemberEventRecord(k.group, k.group_instance_id, val.cause, val.old_member_id,
                                       val.new_member_id, val.generation, val.timestamp, val.client_id,
                                       val.client_host)
    if kv == COORDINATOR_LOAD_KEY_VERSION:
        k = decode_struct(_S.CoordinatorLoadKey, key)
        if value is None:
            return CoordinatorLoadRecord(k.partition, tombstone=True)
        val = decode_struct(_S.CoordinatorLoadValue, value)
        return CoordinatorLoadRecord(k.partition, val.broker, val.previous_broker, val.cause, val.leader_epoch,
                                     val.timestamp)
    if cg.CONSUMER_GROUP_METADATA_KEY_VERSION <= kv <= cg.CONSUMER_GROUP_CURRENT_ASSIGNMENT_KEY_VERSION \
            or kv == cg.CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION:
        return cg.decode_consumer_record(kv, key, value)
    if sg.FIRST_KEY_VERSION <= kv <= sg.LAST_KEY_VERSION:
        return sg.decode_share_record(kv, key, value)
    raise UnknownRecordType(kv)


def partition_key(record: Record) -> str | int:
    """What a record's __consumer_offsets partition is chosen by: its group id (a coordinator load record:
    its partition itself, an int)."""
    return record.offsets_partition if isinstance(record, CoordinatorLoadRecord) else record.group_id


def batch_producer(record) -> tuple[int, int] | None:
    """The (producer id, epoch) whose transactional batch carries `record`, or None (a plain batch)."""
    return (record.producer_id, record.producer_epoch) if isinstance(record, TransactionalOffsetCommit) else None
