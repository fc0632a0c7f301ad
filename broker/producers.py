"""Producer ids and idempotent-producer sequence checks (what Kafka's ProducerStateManager does for
one partition, reduced to the part a single-node test server needs: dedup of retried batches)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tenure.protocol.errors import ErrorCode
from tenure.storage import BatchHeader

BATCHES_KEPT = 5  # the producer keeps at most 5 in-flight batches per partition


@dataclass
class _PartitionProducer:
    epoch: int
    last_sequence: int = -1
    last_timestamp: int = -1
    recent: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))


class ProducerStates:
    def __init__(self) -> None:
        self._next_id = 1000
        self._state: dict[tuple[str, int, int], _PartitionProducer] = {}

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

    def check(self, topic: str, partition: int, h: BatchHeader) -> tuple[ErrorCode, int | None]:
        """Before appending: (NONE, None) to append, (NONE, offset) for a duplicate already in the
        log at `offset`, or an error."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return ErrorCode.NONE, None
        st = self._state.get((topic, partition, h.producer_id))
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

    def appended(self, topic: str, partition: int, h: BatchHeader) -> None:
        if h.producer_id < 0 or h.base_sequence < 0:
            return
        key = (topic, partition, h.producer_id)
        st = self._state.get(key)
        if st is None or h.producer_epoch > st.epoch:
            st = self._state[key] = _PartitionProducer(h.producer_epoch)
        st.last_sequence = h.last_sequence
        st.last_timestamp = h.max_timestamp
        st.recent.append((h.base_sequence, h.last_sequence, h.base_offset))

    def active(self, topic: str, partition: int) -> list[tuple[int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp) of the producers the partition knows."""
        return [(pid, st.epoch, st.last_sequence, st.last_timestamp)
                for (t, p, pid), st in sorted(self._state.items()) if t == topic and p == partition]

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._state if k[0] == topic]:
            del self._state[key]
