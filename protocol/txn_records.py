"""The transaction coordinator's records in Kafka's __transaction_state format.

One record type, keyed by transactional id: TransactionLogKey (key version 0) and TransactionLogValue (0 and 1
read; written as Kafka writes it: version 0 while the `transaction.version` feature is 0, else version 1 with its
tagged `clientTransactionVersion` - Kafka's writer sets neither `previousProducerId` nor `nextProducerId`, which
stay at their default and are not written), the full state of one transactional id after each change
(a keyed, full-value upsert, so the latest record of each key is the state). A tombstone (value None)
removes the transactional id. The structs are kafka-python `ApiData` classes built from this package's
JSON schemas (structs.py), the same codec engine as the group coordinator's records.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .structs import LazySchemas

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 0
_I16 = struct.Struct(">h")

# TransactionStatus (int8), Kafka's TransactionState ids
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = range(8)
STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
               "PrepareEpochFence")


# the key and value classes, each built the first time it is used (structs.LazySchemas)
_S = LazySchemas(__name__, pairs=("TransactionLog",))
__getattr__ = _S.module_getattr()


@dataclass(frozen=True)
class TxnMarker:
    """One marker the transaction coordinator asks to be written: the end of `producer_id`'s transaction in
    one partition."""
    transactional_id: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int = 0


@dataclass(frozen=True)
class TransactionRecord:
    """The state of one transactional id (value None = tombstone)."""
    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    state: int = EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()
    last_update_ms: int = -1
    start_ms: int = -1
    # the epoch before the last fencing bump: memory only, as Kafka keeps it (-1 once loaded from the log)
    last_producer_epoch: int = field(default=-1, compare=False)
    tombstone: bool = False
    # the transaction version (KIP-890) of the client's last request in this transaction: 0 (v1: EndTxn v4-,
    # AddPartitionsToTxn v3-) or 2 (v2: EndTxn v5+, partitions added by Produce v12+ / TxnOffsetCommit v5+)
    client_version: int = 0
    # TransactionLogValue version this record is written with (1 from transaction.version 1)
    value_version: int = field(default=TRANSACTION_LOG_VALUE_VERSION, compare=False)
    # the producer id before this change (Kafka's previousProducerId: memory only, its writer does not write it)
    previous_producer_id: int = field(default=-1, compare=False)
    # v2: the producer id a prepared transaction whose epochs are exhausted completes with (memory only)
    next_producer_id: int = field(default=-1, compare=False)

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state] if 0 <= self.state < len(STATE_NAMES) else f"Unknown({self.state})"


def partition_key(record: TransactionRecord) -> str:
    """What a record's __transaction_state partition is chosen by (Kafka: the transactional id's hash)."""
    return record.transactional_id


def batch_producer(record: TransactionRecord) -> None:
    """Transaction state records go in plain batches."""
    return None


def encode(record: TransactionRecord) -> tuple[bytes, bytes | None]:
    if not isinstance(record, TransactionRecord):
        raise TypeError(f"not a transaction coordinator record: {record!r}")
    key = bytes(_S.TransactionLogKey(transactional_id=record.transactional_id)
                .encode(version=TRANSACTION_LOG_KEY_VERSION))
    if record.tombstone:
        return key, None
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(record.partitions):
        by_topic.setdefault(topic, []).append(partition)
    P = _S.TransactionLogValue.PartitionsSchema
    value = _S.TransactionLogValue(
        producer_id=record.producer_id, producer_epoch=record.producer_epoch,
        transaction_timeout_ms=record.timeout_ms, transaction_status=record.state,
        # null for an Empty transaction, as Kafka writes it
        transaction_partitions=None if record.state == EMPTY else
        [P(topic=t, partition_ids=ps) for t, ps in by_topic.items()],
        transaction_last_update_timestamp_ms=record.last_update_ms,
        transaction_start_timestamp_ms=record.start_ms, client_transaction_version=record.client_version)
    return key, bytes(value.encode(version=record.value_version))


class UnknownRecordType(ValueError):
    def __init__(self, key_version: int) -> None:
        super().__init__(f"unknown __transaction_state record key version {key_version}")
        self.key_version = key_version


def decode(key: bytes, value: bytes | None) -> TransactionRecord:
    if key is None or len(key) < 2:
        raise ValueError("record key shorter than its version prefix")
    kv = _I16.unpack_from(key, 0)[0]
    if kv != TRANSACTION_LOG_KEY_VERSION:
        raise UnknownRecordType(kv)
    k = _S.TransactionLogKey.decode(bytes(key))
    if value is None:
        return TransactionRecord(k.transactional_id, tombstone=True)
    v = _S.TransactionLogValue.decode(bytes(value))
    parts = frozenset((p.topic, i) for p in (v.transaction_partitions or ()) for i in p.partition_ids)
    flexible = v.version >= 1
    return TransactionRecord(k.transactional_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms,
                             v.transaction_status, parts, v.transaction_last_update_timestamp_ms,
                             v.transaction_start_timestamp_ms,
                             client_version=v.client_transaction_version if flexible else 0,
                             value_version=v.version,
                             previous_producer_id=v.previous_producer_id if flexible else -1,
                             next_producer_id=v.next_producer_id if flexible else -1)
