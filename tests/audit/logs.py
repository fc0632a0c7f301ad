"""Crafted `__consumer_offsets` logs for the audit tests: coordinator records written with the project's own
record codec (tenure.protocol.records) and storage engine (SegmentLog), one batch per call, with chosen log
times."""
from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tenure.protocol import records as rec
from tenure.storage.segments import LogConfig, SegmentLog

T0 = 1_700_000_000_000


def batch(records: list, ts: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2 ** 31 - 1)
    for i, r in enumerate(records):
        key, value = rec.encode(r)
        b.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(b.build())


def open_log(data_dir: Path, partition: int = 0, segment_bytes: int = 1 << 20) -> SegmentLog:
    return SegmentLog(Path(data_dir) / f"__consumer_offsets-{partition}", LogConfig(segment_bytes=segment_bytes))


def member(mid: str, iid: str | None) -> rec.MemberRecord:
    return rec.MemberRecord(mid, iid, "c", "/h", 30000, 10000, b"s", b"a")


def gm(group: str, generation: int, pairs: list[tuple[str, str | None]], ts: int) -> rec.GroupMetadataRecord:
    """A GroupMetadata record with members (member id, instance id)."""
    ms = tuple(member(mid, iid) for mid, iid in pairs)
    return rec.GroupMetadataRecord(group, "consumer", generation, "range" if ms else None,
                                   ms[0].member_id if ms else None, ts, ms)


def ev(group: str, iid: str, cause: str, old: str | None, new: str | None, ts: int,
       generation: int = 1) -> rec.StaticMemberEventRecord:
    return rec.StaticMemberEventRecord(group, iid, cause, old, new, generation, ts, "c", "/h")


class Writer:
    """Appends one record per batch to one partition, each at its own log time."""

    def __init__(self, data_dir: Path, partition: int = 0, segment_bytes: int = 1 << 20) -> None:
        self.log = open_log(data_dir, partition, segment_bytes)

    def add(self, record, ts: int) -> int:
        base, _ = self.log.append(batch([record], ts))
        return base

    def close(self) -> None:
        self.log.close()


def offsets_in(plog: SegmentLog) -> list[int]:
    """Every record offset in the log, read through the storage engine."""
    return [r.offset for _, raw in plog.batches(0) for r in DefaultRecordBatch(raw)]
