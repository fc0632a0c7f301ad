"""The read tasks' offsets_history part files (`offsets_sink.OffsetsSink`, `offsets_sink.OffsetsWriter`): a
task writes the plain offset commits of its piece as Parquet and yields everything else as rows. What it writes
and yields must be what the rows of a read without a sink say, filtered by the sink's rules: plain (not
transactional) commits and their tombstones, not catch-up checkpoints, within --group/--since/--until - same
rows, same order, the job's OFFSETS_SCHEMA types - and every other row (errors, group records, transactional
commits, markers, checkpoints) unchanged, with the "I" row's counts of records and errors those of the read
without a sink."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import types as T

from tenure.audit import job, listing, offsets_sink, read
from tenure.catchup.ranges import PREFIX
from tenure.protocol.markers import control_batch

from .logs import T0, open_log
from .test_read_commits import batches, commit_kv, raw_batch

_ARROW = {T.StringType: pa.string(), T.IntegerType: pa.int32(), T.LongType: pa.int64(), T.BooleanType: pa.bool_()}
OFFSETS_ARROW = pa.schema([pa.field(f.name, _ARROW[type(f.dataType)]) for f in job.OFFSETS_SCHEMA.fields])
CHECKPOINT = f"{PREFIX} instance=i1 ranges=0-10@5"


def synth_log(data_dir) -> None:
    """test_read_commits' batches (every key and value version, tombstones, undecodable records, group records,
    a transactional batch), a commit marker, catch-up checkpoints, then enough commits over many keys and log
    times to fill several row groups (the writer's ROWS is made small) and several pieces."""
    log = open_log(data_dir)
    for pairs, producer in batches():
        log.append(raw_batch(pairs, T0, producer))
    log.append(control_batch(42, 3, True, 0, T0 + 1))
    log.append(raw_batch([commit_kv("app.catchup", "t", 0, 9, metadata=CHECKPOINT),
                          commit_kv("app.catchup", "t", 0, 10, metadata=PREFIX + " instance=i1 ranges=\x00"),
                          commit_kv("app.catchup", "t", 1, 11, metadata=PREFIX + "x instance=i1"),  # not one
                          commit_kv("g0", "t", 0, 12, metadata=PREFIX + " stopped instance=i1")], T0 + 2))
    for b in range(60):
        log.append(raw_batch([commit_kv(f"g{(b + i) % 4}", "t" if i % 3 else "u", (b * i) % 5, b * 10 + i,
                                        metadata=f"m{i % 3}" if i % 4 else "", tombstone=(b + i) % 11 == 0)
                              for i in range(7)], T0 + 10 * b))
    log.close()


def taken(row: tuple, sink: offsets_sink.OffsetsSink) -> bool:
    """The plain offset commits a sink writes (its rules, restated): not transactional, not a catch-up
    checkpoint."""
    return row[3] == "offset_commit" and row[25] is None and (row[24] is None or not row[24].startswith(
        PREFIX + " instance="))


def passes(row: tuple, sink: offsets_sink.OffsetsSink) -> bool:
    return (sink.group is None or row[4] == sink.group) and (sink.since is None or row[2] >= sink.since) and (
        sink.until is None or row[2] < sink.until)


def history_row(row: tuple) -> dict:
    return dict(zip(offsets_sink.OFFSETS_FIELDS, (row[4], row[20], row[21], row[22], row[23], row[24], row[5],
                                                  row[0], row[1], row[2], None, None, None, None, None)))


SINKS = [dict(), dict(group="g1"), dict(since=T0 + 100, until=T0 + 400), dict(group="app.catchup"),
         dict(group="g2", since=T0 + 300), dict(group="nobody")]


@pytest.mark.parametrize("filters", SINKS, ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "all")
@pytest.mark.parametrize("split_bytes", [None, 4096])
def test_the_part_files_hold_what_the_rows_without_a_sink_say(tmp_path, monkeypatch, filters, split_bytes):
    monkeypatch.setattr(offsets_sink.OffsetsWriter, "ROWS", 16)
    synth_log(tmp_path / "log")
    listings, _ = listing.list_partitions(str(tmp_path / "log"))
    units = listings[0].units(split_bytes)
    assert len(units) > (1 if split_bytes else 0)
    sink = offsets_sink.OffsetsSink(str(tmp_path / "staging"), **filters)
    os.makedirs(sink.staging)
    written = 0
    for unit in units:
        plain = list(read.unit_rows(unit))
        got = list(read.unit_rows(unit, sink))
        commits = [r[1:-1] for r in plain if r[0] == "R" and taken(r[1:-1], sink)]
        want = [history_row(r) for r in commits if passes(r, sink)]
        # every other row as it is without a sink, in the same order
        assert [r for r in got if r[0] != "I"] == [r for r in plain if r[0] != "I" and not (
            r[0] == "R" and taken(r[1:-1], sink))]
        info, plain_info = read.json.loads(got[-1][-1]), read.json.loads(plain[-1][-1])
        assert got[-1][0] == plain[-1][0] == "I" and sum(r[0] == "I" for r in got) == 1
        assert info[:15] == plain_info[:15]          # the records decoded and errors counted are the same
        # the record rows by type (what the job's later stages take as rows)
        assert info[19] == {t: sum(r[0] == "R" and r[4] == t for r in got) for t in {r[4] for r in got if r[0] == "R"}}
        assert plain_info[19] == {t: sum(r[0] == "R" and r[4] == t for r in plain)
                                  for t in {r[4] for r in plain if r[0] == "R"}}
        name = info[18]
        if not want:
            assert info[15:19] == [0, None, None, None] and name is None
            continue
        times = [w["log_time"] for w in want]
        assert info[15:18] == [len(want), min(times), max(times)]
        table = pq.read_table(os.path.join(sink.staging, name))
        assert table.schema.equals(OFFSETS_ARROW)
        assert table.to_pylist() == want
        written += len(want)
    assert sorted(os.listdir(sink.staging)) == sorted(n for n in os.listdir(sink.staging) if not n.startswith("."))
    if not filters:                                  # the log's cases are all there
        assert written > 3 * 16
        kinds = [r[4] for u in units for r in read.unit_rows(u, sink) if r[0] == "R"]
        assert {"txn_marker", "group_metadata", "static_member_event", "offset_commit"} <= set(kinds)
        assert sum(r[0] == "E" for u in units for r in read.unit_rows(u, sink)) == 2


@pytest.mark.parametrize("rows", [16, 1 << 16])
def test_a_part_file_that_cannot_be_written_fails_the_task(tmp_path, monkeypatch, rows):
    """A write failure (here: the staging directory is gone) is the task's failure, for Spark to retry -
    never an error row saying a record does not decode, with the commits it held lost."""
    monkeypatch.setattr(offsets_sink.OffsetsWriter, "ROWS", rows)
    synth_log(tmp_path / "log")
    listings, _ = listing.list_partitions(str(tmp_path / "log"))
    sink = offsets_sink.OffsetsSink(str(tmp_path / "gone"))
    with pytest.raises(FileNotFoundError):
        for unit in listings[0].units():
            for row in read.unit_rows(unit, sink):
                assert not (row[0] == "E" and "FileNotFoundError" in row[-1])
