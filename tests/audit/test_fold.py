"""The fold property: the final state folded from the audit's member_map_history and generations equals the
coordinator's own state after `replay` of the same log (latest record per key, as a server loads it), for
random histories written with the storage engine, uncompacted and fully compacted; and damaged input
gives error rows and a non-zero error count, not a crash."""
import random
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.audit import job
from tenure.coordinator import GroupShard
from tenure.coordinator.runtime import CoordinatorRuntime
from tenure.protocol import records as rec
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.storage.compaction import CompactionPolicy, Compactor
from tenure.storage.segments import LogConfig, SegmentLog

REMOVE_CAUSES = [rec.EXPIRED, rec.LEFT, rec.REMOVED, rec.SYNC_EXPIRED, rec.REGISTRATION_EXPIRED, rec.GROUP_FULL]


def random_history(seed: int, n: int = 300) -> list[rec.Record]:
    """A coordinator-like stream: static events as the map changes, GroupMetadata snapshots now and then
    (so the log may end with changes no snapshot has caught up with), commits, group deletions."""
    r = random.Random(seed)
    out: list[rec.Record] = []
    groups: dict[str, dict] = {}
    ids = iter(range(10**6))
    now = 1_700_000_000_000

    def snapshot(gid, g):
        g["gen"] += 1
        members = [rec.MemberRecord(mid, iid, "c", "/h", 30000, 10000, b"s", b"a") for iid, mid in g["map"].items()]
        members += [rec.MemberRecord(f"dyn-{next(ids)}", None, "c", "/h", 30000, 10000, b"s", b"a")
                    for _ in range(r.randrange(2))]
        out.append(rec.GroupMetadataRecord(gid, "consumer", g["gen"], "range" if members else None,
                                           members[0].member_id if members else None, now, tuple(members)))

    for _ in range(n):
        now += r.randrange(1, 5000)
        gid = f"g{r.randrange(3)}"
        g = groups.setdefault(gid, {"gen": 0, "map": {}, "keys": set()})
        k = r.random()
        def ev(cause, iid, old, new, gid=gid, g=g, now=now, out=out):
            out.append(rec.StaticMemberEventRecord(gid, iid, cause, old, new, g["gen"], now, "c", "/h"))
        if k < 0.25:
            iid = f"i{r.randrange(5)}"
            new = f"{iid}-{next(ids)}"
            if iid in g["map"]:
                ev(rec.REPLACED, iid, g["map"][iid], new)
                if r.random() < 0.3:
                    ev(rec.FENCED, iid, g["map"][iid], new)
            else:
                ev(rec.JOINED, iid, None, new)
            g["map"][iid] = new
            g["keys"].add(iid)
        elif k < 0.35 and g["map"]:
            iid = r.choice(sorted(g["map"]))
            ev(r.choice(REMOVE_CAUSES), iid, g["map"].pop(iid), None)
        elif k < 0.40 and g["map"]:
            for iid, mid in g["map"].items():
                ev(rec.FORCED_REBALANCE, iid, mid, mid)
        elif k < 0.70:
            snapshot(gid, g)
        elif k < 0.90:
            out.append(rec.OffsetCommitRecord(gid, "t", r.randrange(3), r.randrange(1000), -1, "", now))
        elif k < 0.93:
            out.append(rec.OffsetCommitRecord(gid, "t", r.randrange(3), tombstone=True))
        elif k < 0.95 and g["gen"]:
            out.append(rec.GroupMetadataRecord(gid, tombstone=True))
            out += [rec.StaticMemberEventRecord(gid, iid, tombstone=True) for iid in sorted(g["keys"])]
            groups.pop(gid)
    return out


def write_log(data_dir: Path, records, partitions: int = 2, segment_bytes: int = 8192) -> list[SegmentLog]:
    logs = [SegmentLog(data_dir / f"__consumer_offsets-{p}", LogConfig(segment_bytes=segment_bytes))
            for p in range(partitions)]
    for i in range(0, len(records), 5):
        chunk = records[i:i + 5]
        by_part: dict[int, list] = {}
        for x in chunk:
            by_part.setdefault(int(x.group_id[1:]) % partitions, []).append(x)
        for p, xs in by_part.items():
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                          producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
            for j, x in enumerate(xs):
                key, value = rec.encode(x)
                b.append(j, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=[])
            logs[p].append(bytes(b.build()))
    return logs


class _Topic:
    """__consumer_offsets as the coordinator sees an internal topic (coordinator/writer.py's InternalTopic)."""
    name = OFFSETS_TOPIC

    def __init__(self, partitions):
        self.partitions = partitions


def replayed_state(logs) -> dict:
    co = GroupShard()
    CoordinatorRuntime(lambda _partition: co, _Topic(logs)).load()
    return {gid: (g.generation, dict(g.static_members)) for gid, g in co.groups.items()
            if g.generation > 0 or g.static_members}


def folded_state(tables) -> dict:
    state: dict[str, tuple[int, dict]] = {}
    for row in tables["generations"].orderBy("log_partition", "log_offset").collect():
        if row["generation"] is None:
            state.pop(row["group"], None)
        else:
            state[row["group"]] = (row["generation"], {})
    for row in tables["member_map_history"].filter("valid_to_offset IS NULL").collect():
        state[row["group"]][1][row["instance_id"]] = row["member_id"]
    return state


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("compacted", [False, True], ids=["uncompacted", "compacted"])
def test_fold_of_the_audit_tables_equals_replay(spark, tmp_path, seed, compacted):
    history = random_history(seed)
    logs = write_log(tmp_path, history)
    if compacted:
        for plog in logs:
            Compactor().clean_fully(plog, CompactionPolicy(delete_retention_ms=0, min_compaction_lag_ms=0))
    expected = replayed_state(logs)
    for plog in logs:
        plog.close()
    tables, files = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out")))
    assert files > 2
    assert tables["errors"].count() == 0
    assert folded_state(tables) == expected
    assert expected                                    # the histories are not trivial
    # a consistent history, compacted or not, has no member ids mapped at once and no offset gaps
    kinds = {r["kind"] for r in tables["anomalies"].select("kind").distinct().collect()}
    assert not kinds & {"concurrent_member_ids", "log_gap", "log_damage"}, kinds
    # every record of the log is in exactly one table, nothing silently dropped
    n_events = sum(isinstance(x, rec.StaticMemberEventRecord) for x in history)
    if not compacted:
        assert tables["static_events"].count() == n_events
        assert tables["offsets_history"].count() == sum(isinstance(x, rec.OffsetCommitRecord) for x in history)


def test_a_flipped_byte_gives_error_rows_and_a_non_zero_count(spark, tmp_path, capsys):
    logs = write_log(tmp_path, random_history(7), partitions=1)
    for plog in logs:
        plog.close()
    seg = sorted((tmp_path / "__consumer_offsets-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0xFF
    seg.write_bytes(bytes(data))
    code, summary = job.run(job.Options(str(tmp_path), str(tmp_path / "out"), report=False), spark=spark)
    assert code == 1
    assert summary["errors"] >= 1
    errors = [r.asDict() for r in spark.read.parquet(str(tmp_path / "out" / "errors")).collect()]
    assert errors and all(e["kind"] == "damage" and e["file"] == str(seg) for e in errors)
    assert "CRC-32C" in errors[0]["reason"] or "length" in errors[0]["reason"]
    anomalies = spark.read.parquet(str(tmp_path / "out" / "anomalies")).filter("kind = 'log_damage'").count()
    assert anomalies == len(errors)
    out = capsys.readouterr().out
    assert "errors" in out and "damage" in out


def test_a_torn_tail_of_the_newest_segment_is_not_damage(spark, tmp_path):
    logs = write_log(tmp_path, random_history(8), partitions=1)
    for plog in logs:
        plog.close()
    seg = sorted((tmp_path / "__consumer_offsets-0").glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00" * 8 + (500).to_bytes(4, "big") + b"\x00" * 20)     # a batch still being written
    code, summary = job.run(job.Options(str(tmp_path), str(tmp_path / "out"), report=False), spark=spark)
    assert code == 0 and summary["errors"] == 0
    assert summary["errors_by_kind"] == {"torn_tail": 1}


def test_group_and_time_filters(spark, tmp_path):
    logs = write_log(tmp_path, random_history(1))
    expected = replayed_state(logs)
    for plog in logs:
        plog.close()
    gid = sorted(expected)[0]
    tables, _ = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out"), group=gid))
    assert folded_state(tables) == {gid: expected[gid]}          # one group's records fold on their own
    assert {r["group"] for r in tables["static_events"].select("group").distinct().collect()} == {gid}
    all_gens = sorted(r["time"] for r in tables["generations"].collect())
    since, until = all_gens[len(all_gens) // 3], all_gens[2 * len(all_gens) // 3]
    tables, _ = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out"), group=gid, since=since,
                                             until=until))
    times = sorted(r["time"] for r in tables["generations"].collect())
    assert times == [t for t in all_gens if since <= t < until]
    for r in tables["member_map_history"].collect():
        assert r["valid_from_time"] < until and (r["valid_to_time"] is None or r["valid_to_time"] >= since)
