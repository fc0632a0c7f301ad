"""Transaction markers: the control batches that end a producer's transaction in a partition (Kafka's
EndTransactionMarker), written by the transaction coordinator's side into data partitions and into
`__consumer_offsets`, read by the data plane, the coordinator's loader and the audit."""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CONTROL_KEY = struct.Struct(">hh")        # version 0, type (0 abort, 1 commit)
CONTROL_VALUE = struct.Struct(">hi")      # version 0, coordinator epoch
ABORT, COMMIT = 0, 1

if TYPE_CHECKING:
    from .txn_records import TxnMarker as TxnMarker


def __getattr__(name: str) -> Any:
    """`TxnMarker`: the transaction coordinator's (txn_records.py, imported with it), named here as well."""
    if name == "TxnMarker":
        from .txn_records import TxnMarker
        return TxnMarker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
