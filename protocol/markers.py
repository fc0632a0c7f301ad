"""Transaction markers: the control batches that end a producer's transaction in a partition (Kafka's
EndTransactionMarker), written by the transaction coordinator's side into data partitions and into
`__consumer_offsets`, read by the data plane, the coordinator's loader and the audit."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CONTROL_KEY = struct.Struct(">hh")        # version 0, type (0 abort, 1 commit)
CONTROL_VALUE = struct.Struct(">hi")      # version 0, coordinator epoch
ABORT, COMMIT = 0, 1


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


class _ControlBatchBuilder(DefaultRecordBatchBuilder):
    """kafka-python's batch builder with the control flag set (it leaves control batches to brokers)."""

    def _get_attributes(self, include_compression_type=True):
        return super()._get_attributes(include_compression_type) | self.CONTROL_MASK


def control_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                  timestamp_ms: int) -> bytes:
    """A control batch of one marker record, as Kafka writes it (transactional, control, sequence -1)."""
    b = _ControlBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                             producer_epoch=producer_epoch, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, timestamp=timestamp_ms, key=CONTROL_KEY.pack(0, COMMIT if commit else ABORT),
             value=CONTROL_VALUE.pack(0, coordinator_epoch), headers=[])
    return bytes(b.build())


def marker_type(batch: bytes) -> int:
    """The marker type (ABORT or COMMIT) of a control batch's first record."""
    for r in DefaultRecordBatch(batch):
        return CONTROL_KEY.unpack_from(r.key, 0)[1]
    raise ValueError("control batch without a record")
