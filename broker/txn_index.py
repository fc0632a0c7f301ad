"""The data partitions' side of transactions: which transactions are open in a partition (its last stable
offset), which were aborted (the aborted-transactions list a read_committed Fetch carries), read from the
transactional batches and control batches (commit and abort markers) appended to it.

This is what Kafka's ProducerStateManager and transaction index keep per partition: a transaction is open in
a partition from its producer's first transactional batch there until the producer's marker; the partition's
last stable offset is the first offset of its oldest open transaction (or the high watermark when none is
open). A `Partition` (partition.py) holds one `TxnIndex`; with a data dir it is rebuilt at start-up from the
log itself.
"""
from __future__ import annotations

from collections.abc import Iterable

from tenure.protocol.markers import COMMIT, marker_type
from tenure.storage import BatchHeader
from tenure.storage.batch import HEADER_SIZE, read_header


class TxnIndex:
    """Open and aborted transactions of one partition."""

    def __init__(self) -> None:
        self.open: dict[int, int] = {}                      # producer id -> first offset
        self.aborted_txns: list[tuple[int, int, int]] = []  # (producer id, first, last offset)

    def appended(self, h: BatchHeader, raw: bytes) -> None:
        """A batch is in the log (`raw`: its bytes): a transactional data batch opens its producer's
        transaction from there (if not open yet), a control batch (a marker) ends it."""
        if not h.is_transactional:
            return
        if h.is_control:
            self.ended(h.producer_id, marker_type(raw) == COMMIT, h.base_offset)
        else:
            self.open.setdefault(h.producer_id, h.base_offset)

    def ended(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        """A marker is in the log at `marker_offset`: the producer's transaction there ends."""
        first = self.open.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted_txns.append((producer_id, first, marker_offset))

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(self.open.values(), default=high_watermark)

    def open_at(self, producer_id: int) -> int:
        """The first offset of the producer's open transaction in the partition, or -1."""
        return self.open.get(producer_id, -1)

    def aborted(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping offsets [start, end)."""
        return [(pid, first) for pid, first, last in self.aborted_txns if last >= start and first < end]

    def trim(self, log_start_offset: int) -> None:
        """Forget aborted transactions wholly before the log start (deleted records, compaction)."""
        self.aborted_txns = [a for a in self.aborted_txns if a[2] >= log_start_offset]

    def rebuild(self, batches: Iterable[tuple[BatchHeader, bytes]]) -> None:
        """Read the partition's (header, bytes) batches from its log start: the state a live server had."""
        self.open.clear()
        self.aborted_txns.clear()
        for h, raw in batches:
            self.appended(h, raw)


def cut_at(data: bytes, end_offset: int) -> bytes:
    """The batches of `data` (read from a log) that start before `end_offset` (a read_committed fetch stops
    at the last stable offset)."""
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        h = read_header(data, pos)
        if h.base_offset >= end_offset:
            return data[:pos]
        pos += h.size
    return data
