"""Retention of `cleanup.policy=delete` topics, as Kafka's log manager applies it every
log.retention.check.interval.ms: whole segments go from the oldest on while each one's newest record is older
than `retention.ms`, then while the log is bigger than `retention.bytes` by at least the segment's size; never
past the high watermark. The log start offset moves to the first record kept (ListOffsets' earliest follows,
Fetch below it answers OFFSET_OUT_OF_RANGE), through the same `advance_start` as DeleteRecords."""
from __future__ import annotations

import logging

from .replica_manager import ReplicaManager
from .topics import TopicRegistry

log = logging.getLogger("tenure.broker")


def retained_start(spans: list[tuple[int, int, int, int]], now_ms: int, retention_ms: int, retention_bytes: int,
                   high_watermark: int) -> int | None:
    """The log start offset retention leaves (None: nothing goes). `spans`: the log's segments, oldest first, as
    (base offset, next offset, bytes, max timestamp)."""
    gone = 0                                       # segments deleted, a prefix
    if retention_ms >= 0:
        while gone < len(spans) and 0 <= spans[gone][3] < now_ms - retention_ms and spans[gone][1] <= high_watermark:
            gone += 1
    if retention_bytes >= 0:
        excess = sum(s[2] for s in spans[gone:]) - retention_bytes
        while gone < len(spans) and excess - spans[gone][2] >= 0 and spans[gone][1] <= high_watermark:
            excess -= spans[gone][2]
            gone += 1
    return spans[gone - 1][1] if gone else None


def enforce_retention(topics: TopicRegistry, replicas: ReplicaManager, now_ms: int) -> int:
    """One retention pass over the user topics whose cleanup.policy includes delete; the partitions whose log
    start moved."""
    moved = 0
    for topic in topics.all():
        if topic.internal or "delete" not in (topic.config("cleanup.policy") or ""):
            continue
        ms, size = int(topic.config("retention.ms") or -1), int(topic.config("retention.bytes") or -1)
        if ms < 0 and size < 0:
            continue
        for i in range(len(topic.partitions)):
            p = replicas.get(topic.name, i)
            if p is None:
                continue
            start = retained_start(p.log.segment_spans(), now_ms, ms, size, p.high_watermark)
            if start is not None and start > p.log_start_offset:
                p.log.advance_start(start)
                moved += 1
                log.info("retention of %s-%d: log start offset now %d", topic.name, i, p.log_start_offset)
    return moved
