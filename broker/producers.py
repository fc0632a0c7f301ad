"""Producer ids (`ProducerIds`, shared by idempotent and transactional producers) and one partition's producer
state (`ProducerState`: Kafka's ProducerStateManager reduced to what a test server needs - the sequence checks
that drop a retried batch, and what DescribeProducers reports). A `Partition` (partition.py) holds its own."""
from __future__ import annotations

from collections import deque

from tenure.protocol.errors import ErrorCode
from tenure.storage import BatchHeader

BATCHES_KEPT = 5  # the producer keeps at most 5 in-flight batches per partition


class _ProducerEntry:
    """One producer id's state in a partition: its epoch, its last sequence and timestamp, its recent batches
    (first sequence, last sequence, base offset). A plain class: a dataclass's generated methods were never used
    and its build cost ~0.4 ms of every server's start-up."""

    __slots__ = ("epoch", "last_sequence", "last_timestamp", "recent")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.last_sequence = -1
        self.last_timestamp = -1
        self.recent: deque[tuple[int, int, int]] = deque(maxlen=BATCHES_KEPT)


class ProducerIds:
    """The producer ids handed out (InitProducerId, and the transaction coordinator's)."""

    def __init__(self) -> None:
        self._next_id = 1000

    def allocate(self, producer_id: int, producer_epoch: int) -> tuple[int, int]:
        """InitProducerId: a fresh id at epoch 0, or (KIP-360) the same id at the next epoch."""
        if producer_id >= 0:
            return producer_id, (producer_epoch + 1) & 0x7FFF
        return self.next_producer_id(), 0

    def next_producer_id(self) -> int:
        """A producer id never handed out before (idempotent and transactional producers share them)."""
        pid = self._next_id
        self._next_id += 1
        return pid

    def reserve(self, producer_id: int) -> None:
        """Ids up to `producer_id` are taken (the transaction coordinator loaded them from its log)."""
        self._next_id = max(self._next_id, producer_id + 1)


class ProducerState:
    """The idempotent and transactional producers one partition has seen."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}

    def check(self, h: BatchHeader) -> tuple[ErrorCode, int | None]:
        """Before appending a client's batch: (NONE, None) to append, (NONE, offset) for a duplicate already
        in the log at `offset`, or an error."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return ErrorCode.NONE, None
        st = self._producers.get(h.producer_id)
        if st is None or h.producer_epoch > st.epoch:
            return ErrorCode.NONE, None
        if h.producer_epoch < st.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        for first, last, base in st.recent:
            if first == h.base_sequence and last == h.last_sequence:
                return ErrorCode.NONE, base
        if h.base_sequence != (st.last_sequence + 1) & 0x7FFFFFFF:
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return ErrorCode.NONE, None

    def appended(self, h: BatchHeader) -> None:
        """A batch is in the log (stamped with its offsets): a sequenced one moves its producer on."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return
        st = self._producers.get(h.producer_id)
        if st is None or h.producer_epoch > st.epoch:
            st = self._producers[h.producer_id] = _ProducerEntry(h.producer_epoch)
        st.last_sequence = h.last_sequence
        st.last_timestamp = h.max_timestamp
        st.recent.append((h.base_sequence, h.last_sequence, h.base_offset))

    def active(self) -> list[tuple[int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp) of the producers the partition knows."""
        return [(pid, st.epoch, st.last_sequence, st.last_timestamp) for pid, st in sorted(self._producers.items())]
