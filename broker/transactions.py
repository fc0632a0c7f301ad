"""The data partitions' side of transactions: which transactions are open in each partition (the last
stable offset), which were aborted (the aborted-transactions list a read_committed Fetch carries), and
the control batches (commit and abort markers) the transaction coordinator has written into them.

This is what Kafka's ProducerStateManager and transaction index keep per partition, reduced to one node:
a transaction is open in a partition from its producer's first transactional batch there until the
producer's marker; the partition's last stable offset is the first offset of its oldest open transaction
(or the high watermark when none is open). With a data dir it is rebuilt at start-up from the log itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tenure.protocol.markers import (  # noqa: F401 - COMMIT, marker_type: audit/read.py imports them here
    COMMIT,
    TxnMarker,
    control_batch,
    marker_type,
)
from tenure.storage import BatchHeader
from tenure.storage.batch import HEADER_SIZE, read_header


@dataclass
class _PartitionTxns:
    open: dict[int, int] = field(default_factory=dict)                  # producer id -> first offset
    aborted: list[tuple[int, int, int]] = field(default_factory=list)   # (producer id, first, last offset)


class TxnIndex:
    """Open and aborted transactions of every data partition."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, int], _PartitionTxns] = {}

    def appended(self, topic: str, partition: int, h: BatchHeader) -> None:
        """A transactional data batch is in the log: its producer's transaction is open from there."""
        if h.is_transactional and not h.is_control:
            self._parts.setdefault((topic, partition), _PartitionTxns()).open.setdefault(h.producer_id,
                                                                                       h.base_offset)

    def ended(self, topic: str, partition: int, producer_id: int, commit: bool, marker_offset: int) -> None:
        """A marker is in the log at `marker_offset`: the producer's transaction there ends."""
        st = self._parts.get((topic, partition))
        first = st.open.pop(producer_id, None) if st is not None else None
        if first is not None and not commit:
            st.aborted.append((producer_id, first, marker_offset))

    def last_stable_offset(self, topic: str, partition: int, high_watermark: int) -> int:
        st = self._parts.get((topic, partition))
        return min(st.open.values(), default=high_watermark) if st is not None else high_watermark

    def open_at(self, topic: str, partition: int, producer_id: int) -> int:
        """The first offset of the producer's open transaction in the partition, or -1."""
        st = self._parts.get((topic, partition))
        return st.open.get(producer_id, -1) if st is not None else -1

    def aborted(self, topic: str, partition: int, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping offsets [start, end)."""
        st = self._parts.get((topic, partition))
        if st is None:
            return []
        return [(pid, first) for pid, first, last in st.aborted if last >= start and first < end]

    def trim(self, topic: str, partition: int, log_start_offset: int) -> None:
        """Forget aborted transactions wholly before the log start (deleted records, compaction)."""
        st = self._parts.get((topic, partition))
        if st is not None:
            st.aborted = [a for a in st.aborted if a[2] >= log_start_offset]

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._parts if k[0] == topic]:
            del self._parts[key]

    def rebuild(self, topic: str, partition: int, batches) -> None:
        """Read one partition's (header, bytes) batches from its log start: the state a live server had."""
        self._parts.pop((topic, partition), None)
        for h, raw in batches:
            if not h.is_transactional:
                continue
            if h.is_control:
                self.ended(topic, partition, h.producer_id, marker_type(raw) == COMMIT, h.base_offset)
            else:
                self.appended(topic, partition, h)


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
