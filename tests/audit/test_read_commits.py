"""The read stage's offset-commit path (each distinct key decoded once, the value straight into its fields)
gives the rows the generic path gives - rec.decode then the row -, for every key and value version, tombstones,
transactional batches and undecodable values, and its key cache stays bounded."""
from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.audit import listing, read
from tenure.protocol import records as rec

from .logs import T0, ev, gm, open_log


def raw_batch(pairs: list[tuple[bytes, bytes | None]], ts: int, producer: tuple[int, int] | None = None) -> bytes:
    pid, epoch = producer or (-1, -1)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer is not None,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=-1 if producer is None else 0,
                                  batch_size=2 ** 31 - 1)
    for i, (k, v) in enumerate(pairs):
        b.append(i, timestamp=ts + i, key=k, value=v, headers=[])
    return bytes(b.build())


def commit_kv(group, topic, partition, offset, metadata="m", key_version=1, value_version=3, tombstone=False):
    key = rec.OffsetCommitKey(group=group, topic=topic, partition=partition).encode(version=key_version)
    key = struct.pack(">h", key_version) + bytes(key)[2:]
    if tombstone:
        return bytes(key), None
    v = rec.OffsetCommitValue(offset=offset, leader_epoch=7, metadata=metadata, commit_timestamp=T0 + offset,
                              expire_timestamp=-1)
    return bytes(key), bytes(v.encode(version=value_version))


def batches() -> list[tuple[list, tuple | None]]:
    plain = [commit_kv(f"g{i % 3}", "t", i % 2, i, metadata="x" * (i % 5)) for i in range(12)]
    versions = [commit_kv("g0", "t", 0, 100, key_version=0, value_version=1),
                commit_kv("g0", "t", 0, 101, value_version=0),
                commit_kv("g0", "t", 0, 102, value_version=2),
                commit_kv("g1", "t", 1, 0, tombstone=True),
                commit_kv("g1", "u", 1, 0, key_version=0, tombstone=True)]
    bad = [commit_kv("g2", "t", 0, 5)[0], b"\x00"]          # a known key, a value too short for its version
    bad2 = (commit_kv("g2", "t", 0, 5)[0], b"\x00\x03\x00")  # a value cut inside its fields
    other = [rec.encode(gm("g0", 1, [("m1", "i1")], T0)), rec.encode(ev("g0", "i1", rec.JOINED, None, "m1", T0))]
    return [(plain, None), (versions, None), ([tuple(bad), bad2, *plain[:2]], None), (other, None),
            (plain[:4], (42, 3))]


def expected_rows(data_dir) -> list[tuple]:
    """What the generic path gives: rec.decode of each record, then its row (an error row where it fails)."""
    out, offset = [], 0
    for pairs, producer in batches():
        for i, (k, v) in enumerate(pairs):
            try:
                out.append(("R", read._record_row(0, offset + i, T0 + i, rec.decode(k, v), producer)))
            except Exception as exc:
                out.append(("E", f"record does not decode ({type(exc).__name__}: {exc})"))
        offset += len(pairs)
    return out


def read_rows(data_dir) -> list[tuple]:
    log = open_log(data_dir)
    for pairs, producer in batches():
        log.append(raw_batch(pairs, T0, producer))
    log.close()
    listings, _ = listing.list_partitions(str(data_dir))
    rows = [t for u in listings[0].units() for t in read.read_unit(u) if t[0] in "RE"]
    return [t if t[0] == "R" else ("E", t[1][5]) for t in rows]


def test_offset_commit_rows_equal_the_generic_decode(tmp_path):
    read._COMMIT_KEYS.clear()
    got = read_rows(tmp_path)
    assert got == expected_rows(tmp_path)
    kinds = [t[1][3] for t in got if t[0] == "R"]
    assert kinds.count("offset_commit") == 12 + 5 + 2 + 4 and "group_metadata" in kinds
    assert sum(t[0] == "E" for t in got) == 2
    assert {t[1][5] for t in got if t[0] == "R" and t[1][3] == "offset_commit"} == {True, False}


def test_the_key_cache_is_bounded(tmp_path, monkeypatch):
    read._COMMIT_KEYS.clear()
    monkeypatch.setattr(read, "_COMMIT_KEYS_MAX", 4)
    assert read_rows(tmp_path) == expected_rows(tmp_path)    # more distinct keys than the cache holds
    assert 0 < len(read._COMMIT_KEYS) <= 4
