"""One topic-partition as this broker keeps it (Kafka's `kafka.cluster.Partition` with its `UnifiedLog` and
`ProducerStateManager`, reduced to one storage shared by every broker): its log, its high watermark, its
producers, its transaction index and the fetches long-polling it; its leader epoch and epoch cache are read
from the cluster table (cluster.py), which decides leaders for every broker of the process and asks the
partitions for the facts of their logs (`log_end_offset`, `last_epoch`) when it places one or starts a new
leader epoch.

Appends and reads go through the replica manager (replica_manager.py), the only code that changes a
partition: a partition only keeps its state consistent with its log.
"""
from __future__ import annotations

import asyncio

from tenure.storage import Log

from .cluster import Cluster, PartitionState
from .producers import ProducerState
from .txn_index import TxnIndex


class Partition:
    def __init__(self, topic: str, index: int, log: Log, cluster: Cluster) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self._cluster = cluster
        # the offset up to which records are committed and consumers read (Kafka's high watermark). Its own
        # value: with one storage every append is committed at once, so it follows the log end after each
        # append; a replicated partition would move it as its followers catch up
        self.high_watermark = log.log_end_offset
        self.producers = ProducerState()
        self.txns = TxnIndex()
        # long-polling fetches of this partition, in the order they began waiting: woken in that order, so the
        # fetch that waited longest reads first (a share partition hands its records to it, as Kafka's purgatory
        # completes the oldest waiting share fetch first)
        self.waiters: dict[asyncio.Future[None], None] = {}

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, hw={self.high_watermark})"

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def state(self) -> PartitionState:
        """Its replicas, leader, leader epoch and epoch cache (the cluster table's)."""
        return self._cluster.state(self.topic, self.index)

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) of a leader epoch from the epoch cache (OffsetsForLeaderEpoch)."""
        return self.state.end_offset_for(epoch, self.log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, or the high watermark (read_committed reads
        below it)."""
        return self.txns.last_stable_offset(self.high_watermark)

    def advance_high_watermark(self) -> None:
        """Everything in the log is committed (one storage: nothing to wait for)."""
        self.high_watermark = self.log.log_end_offset

    def last_epoch(self) -> int:
        """The partition leader epoch of the log's last batch (0: none, or in memory): a cluster restarted on
        its data dir goes on from the epochs its clients saw (their positions carry them)."""
        segments = getattr(self.log, "segments", None)      # on disk: read the last batches' headers only
        end = self.log.log_end_offset
        if not segments or end == 0:
            return 0
        for seg in reversed(segments):
            if seg.size:
                pos = seg.position_for(end - 1)
                return max([h.partition_leader_epoch for h, _ in seg.headers_from(pos)] + [0])
        return 0

    def wake(self) -> None:
        """Wake the fetches long-polling this partition (after an append, a delete, a stop)."""
        waiters, self.waiters = self.waiters, {}
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
