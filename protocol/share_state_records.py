"""The share coordinator's records in Kafka's `__share_group_state` format: the state of one share partition
(a share group's view of one topic-partition) as ShareSnapshot (key version 0: the whole state) and ShareUpdate
(key version 1: the start offset and the state batches that changed, merged over the snapshot), both keyed by
(group id, topic id, partition), values v0 flexible. A state batch is (first offset, last offset, delivery
state - 0 available, 2 acknowledged, 4 archived -, delivery count). The structs are kafka-python `ApiData`
classes built from this package's JSON schemas (structs.py); `encode`, `decode`, `partition_key` and
`batch_producer` are the codec the coordinator runtime's writer and loader take."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from .internal_topics import share_coordinator_key
from .structs import LazySchemas, decode_struct, key_version

# the key and value classes, each built the first time it is used (structs.LazySchemas)
_S = LazySchemas(__name__, pairs=("ShareSnapshot", "ShareUpdate"))
__getattr__ = _S.module_getattr()

SHARE_SNAPSHOT_KEY_VERSION = 0
SHARE_UPDATE_KEY_VERSION = 1

# (first offset, last offset, delivery state, delivery count)
StateBatch = tuple[int, int, int, int]

# a ShareUpdate is a delta over the state (the batches that changed), not a full value: the loader replays
# every record of __share_group_state in log order, not only the latest of each key (coordinator/loader.py)
replay_every_record = True


@dataclass(frozen=True)
class ShareStateRecord:
    """A ShareSnapshot (`snapshot`: the whole state) or a ShareUpdate (the start offset, -1 for unchanged, and
    the batches that changed) of one share partition."""
    group_id: str
    topic_id: uuid.UUID
    partition: int
    snapshot: bool = True
    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = 0
    start_offset: int = 0
    batches: tuple[StateBatch, ...] = ()
    tombstone: bool = False


class UnknownRecordType(ValueError):
    def __init__(self, key_version: int) -> None:
        super().__init__(f"unknown __share_group_state record key version {key_version}")
        self.key_version = key_version


def partition_key(record: ShareStateRecord) -> str:
    """What a record's __share_group_state partition is chosen by: Kafka's coordinator key "group:topic
    id:partition" (SharePartitionKey.asCoordinatorKey, the topic id as Kafka writes a Uuid)."""
    return share_coordinator_key(record.group_id, record.topic_id, record.partition)


def batch_producer(record: ShareStateRecord) -> None:
    """Share state records go in plain batches."""
    return None


def encode(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    K, V = (_S.ShareSnapshotKey, _S.ShareSnapshotValue) if record.snapshot else (_S.ShareUpdateKey, _S.ShareUpdateValue)
    key = bytes(K(group_id=record.group_id, topic_id=record.topic_id, partition=record.partition).encode(
        version=SHARE_SNAPSHOT_KEY_VERSION if record.snapshot else SHARE_UPDATE_KEY_VERSION))
    if record.tombstone:
        return key, None
    B = V.fields["state_batches"].data_class
    batches = [B(first_offset=f, last_offset=last, delivery_state=s, delivery_count=n) for f, last, s, n in record.batches]
    if record.snapshot:
        value = V(snapshot_epoch=record.snapshot_epoch, state_epoch=record.state_epoch,
                  leader_epoch=record.leader_epoch, start_offset=record.start_offset, state_batches=batches)
    else:
        value = V(snapshot_epoch=record.snapshot_epoch, leader_epoch=record.leader_epoch,
                  start_offset=record.start_offset, state_batches=batches)
    return key, bytes(value.encode(version=0))


def decode(key: bytes, value: bytes | None) -> ShareStateRecord:
    kv = key_version(key)
    if kv not in (SHARE_SNAPSHOT_KEY_VERSION, SHARE_UPDATE_KEY_VERSION):
        raise UnknownRecordType(kv)
    snapshot = kv == SHARE_SNAPSHOT_KEY_VERSION
    k = decode_struct(_S.ShareSnapshotKey if snapshot else _S.ShareUpdateKey, key)
    if value is None:
        return ShareStateRecord(k.group_id, k.topic_id, k.partition, snapshot, tombstone=True)
    v = decode_struct(_S.ShareSnapshotValue if snapshot else _S.ShareUpdateValue, value)
    batches = tuple((b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches)
    return ShareStateRecord(k.group_id, k.topic_id, k.partition, snapshot, v.snapshot_epoch,
                            v.state_epoch if snapshot else 0, v.leader_epoch, v.start_offset, batches)
