"""`tenure log synth` / tenure.tools.synth: a synthetic __consumer_offsets log a real server opens.

One small log with every change made frequent (restarts, rebalances, expirations, leaves, admin
removals, forced rebalances, fenced pods, deletions), three __consumer_offsets partitions and small
segments (so several roll): a real in-process server loads exactly the groups, instance maps and
offsets the generator says it wrote; `tenure log verify` passes; every record decodes; the static-member
events agree with the GroupMetadata records; the same seed gives the same bytes.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from tenure.config import ServerConfig
from tenure.protocol import records as rec
from tenure.server import ServerThread
from tenure.storage import parse_batches
from tenure.tools.cli import main
from tenure.tools.synth import SynthConfig, generate, segment_files

pytestmark = pytest.mark.timeout(120)

CFG = SynthConfig(records=6000, groups=12, members=4, partitions=8, topics=3, segment_bytes=64 * 1024,
                  offsets_partitions=3, restart_rate=0.02, rebalance_rate=0.01, expire_rate=0.01,
                  leave_rate=0.01, remove_rate=0.01, force_rate=0.01, fence_rate=0.5, delete_rate=0.005, seed=7)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth") / "data"
    return d, generate(d, CFG)


def read_records(data_dir: Path) -> dict[int, list]:
    """partition -> decoded records in offset order, read straight from the segment files."""
    out: dict[int, list] = {}
    offsets: dict[int, list[int]] = {}
    for seg in segment_files(data_dir):
        part = int(seg.parent.name.rsplit("-", 1)[1])
        data = seg.read_bytes()
        for h in parse_batches(data, verify_crc=True):
            for r in DefaultRecordBatch(data[h.position:h.position + h.size]):
                out.setdefault(part, []).append(rec.decode(r.key, r.value))
                offsets.setdefault(part, []).append(r.offset)
    for part, offs in offsets.items():
        assert offs == list(range(len(offs))), f"partition {part}: offsets not dense from 0"
    return out


def test_every_record_decodes_and_counts_match(synth):
    d, result = synth
    s = result["stats"]
    parts = read_records(d)
    records = [r for rs in parts.values() for r in rs]
    assert len(records) == s["records"] >= CFG.records
    assert len(parts) > 1                                                 # groups spread over partitions
    assert s["segments"] > CFG.offsets_partitions                       # segments rolled
    assert sum(isinstance(r, rec.StaticMemberEventRecord) for r in records) == s["event_records"]
    assert sum(isinstance(r, rec.GroupMetadataRecord) for r in records) == s["group_records"]
    assert sum(r.tombstone for r in records) == s["tombstones"]
    causes = {c: 0 for c in rec.STATIC_EVENT_CAUSES}
    for r in records:
        if isinstance(r, rec.StaticMemberEventRecord) and not r.tombstone:
            causes[r.cause] += 1
    assert causes == s["causes"]
    for cause in (rec.JOINED, rec.REPLACED, rec.FENCED, rec.EXPIRED, rec.LEFT, rec.REMOVED, rec.FORCED_REBALANCE):
        assert causes[cause] > 0, cause
    assert s["deletions"] > 0 and s["rebalances"] > 0
    # timestamps advance within each group's history
    last: dict[str, int] = {}
    for r in records:
        ts = r.commit_timestamp if isinstance(r, rec.OffsetCommitRecord) else (
            r.current_state_timestamp if isinstance(r, rec.GroupMetadataRecord) else r.timestamp)
        if r.tombstone:
            continue
        assert ts >= last.get(r.group_id, 0)
        last[r.group_id] = ts


def test_events_agree_with_group_metadata(synth):
    """Fold each group's events in log order: at every GroupMetadata record the folded instance map is
    the record's; a replaced event's new id is the id the next GroupMetadata has for that instance."""
    d, result = synth
    checked = 0
    for records in read_records(d).values():
        fold: dict[str, dict[str, str]] = {}
        latest: dict[str, dict[str, str]] = {}
        awaiting: dict[tuple[str, str], str] = {}                        # replaced, not yet in a GroupMetadata
        generation: dict[str, int] = {}
        for r in records:
            m = fold.setdefault(r.group_id, {})
            if isinstance(r, rec.GroupMetadataRecord):
                if r.tombstone:
                    assert not m, f"{r.group_id} deleted with members {m}"
                    fold.pop(r.group_id)
                    latest.pop(r.group_id, None)
                    generation.pop(r.group_id, None)
                    continue
                imap = {mr.group_instance_id: mr.member_id for mr in r.members}
                assert imap == m, f"{r.group_id} gen {r.generation}: metadata {imap} != events {m}"
                for (gid, iid), new in list(awaiting.items()):
                    if gid == r.group_id:
                        assert imap.get(iid) == new
                        del awaiting[(gid, iid)]
                assert r.generation >= generation.get(r.group_id, 0)
                generation[r.group_id] = r.generation
                latest[r.group_id] = imap
                checked += 1
            elif isinstance(r, rec.StaticMemberEventRecord):
                if r.tombstone:
                    assert r.group_instance_id not in m
                    continue
                cur = m.get(r.group_instance_id)
                assert r.generation == generation.get(r.group_id, 0)
                if r.cause == rec.JOINED:
                    assert cur is None and r.old_member_id is None and r.new_member_id
                    m[r.group_instance_id] = r.new_member_id
                elif r.cause == rec.REPLACED:
                    assert cur == r.old_member_id and r.new_member_id not in (None, cur)
                    m[r.group_instance_id] = r.new_member_id
                    awaiting[(r.group_id, r.group_instance_id)] = r.new_member_id
                elif r.cause in (rec.EXPIRED, rec.LEFT, rec.REMOVED):
                    assert cur == r.old_member_id is not None and r.new_member_id is None
                    del m[r.group_instance_id]
                elif r.cause == rec.FENCED:
                    assert cur == r.new_member_id and r.old_member_id not in (None, cur)
                elif r.cause == rec.FORCED_REBALANCE:
                    assert cur == r.old_member_id == r.new_member_id
                else:
                    pytest.fail(f"unexpected cause {r.cause}")
        assert not awaiting
        # the log ends with every change finished: the fold is the latest GroupMetadata's map
        for gid, m in fold.items():
            assert m == latest.get(gid, {}), gid
    assert checked > CFG.groups


def test_server_loads_the_groups(synth):
    d, result = synth
    expected, committed = result["expected"], result["committed"]
    cfg = ServerConfig(port=0, data_dir=str(d), offsets_partitions=CFG.offsets_partitions, cleaner_interval_ms=0)
    with ServerThread(cfg) as s:
        def state(server):
            rt = server.runtime
            groups = {gid: rt.group(gid) for gid in rt.group_ids()}
            offsets = {gid: rt.committed_offsets(gid) for gid in groups}
            return (server.load_report,
                    {gid: (g.generation, dict(g.static_members)) for gid, g in groups.items()},
                    {gid: {p: r.offset for (_, p), r in o.items()} for gid, o in offsets.items() if o})
        report, groups, offsets = s.call(state, s.server)
    assert report.records == result["stats"]["records"]
    assert not report.unknown and not report.undecodable
    assert groups == {gid: (e["generation"], e["instances"]) for gid, e in expected.items()}
    assert len(groups) == CFG.groups
    assert offsets == {gid: {int(p): o for p, o in ps.items()} for gid, ps in committed.items()}


def test_verify_passes(synth, capsys):
    d, _ = synth
    assert main(["log", "verify", str(d)]) == 0
    assert "clean" in capsys.readouterr().out


def test_deterministic_for_a_seed(tmp_path):
    small = dataclasses.replace(CFG, records=1500)
    a, b, c = (generate(tmp_path / n, cfg) for n, cfg in
               (("a", small), ("b", small), ("c", dataclasses.replace(small, seed=8))))
    files = {n: [(p.relative_to(tmp_path / n), p.read_bytes()) for p in segment_files(tmp_path / n)]
             for n in "abc"}
    assert files["a"] == files["b"]
    assert files["a"] != files["c"]
    assert a["expected"] == b["expected"] and a["stats"]["records"] == b["stats"]["records"]


def test_cli_synth(tmp_path, capsys):
    d = tmp_path / "data"
    assert main(["log", "synth", str(d), "--records", "800", "--groups", "5", "--members", "3",
                 "--seed", "3", "--offsets-partitions", "2"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"synth {d}: ") and "records in" in out[0]
    assert main(["log", "verify", str(d)]) == 0
    capsys.readouterr()
    assert main(["log", "synth", str(d), "--records", "10"]) == 2                 # holds logs already
    assert "already holds logs" in capsys.readouterr().err


def test_the_simulation_is_checked_against_real_coordinator_shards(synth):
    """generate() replays every record it writes into the coordinator shard of its partition and checks the
    shards' groups and offsets against what it returns; a simulation that disagreed would not pass."""
    import copy

    from tenure.coordinator import GroupShard, partition_for
    from tenure.tools.synth import check_against_shards

    d, result = synth
    shards = [GroupShard(partition=p) for p in range(CFG.offsets_partitions)]
    for part, records in read_records(d).items():
        for x in records:
            assert partition_for(x.group_id, CFG.offsets_partitions) == part
            shards[part].replay(x)
    check_against_shards(result, shards)
    gid = next(iter(result["expected"]))
    wrong = copy.deepcopy(result)
    wrong["expected"][gid]["generation"] += 1
    with pytest.raises(AssertionError, match=f"group {gid}: the shard holds generation"):
        check_against_shards(wrong, shards)
    wrong = copy.deepcopy(result)
    p, o = next(iter(wrong["committed"][gid].items()))
    wrong["committed"][gid][p] = o + 1
    with pytest.raises(AssertionError, match=f"group {gid}: the shard holds offsets"):
        check_against_shards(wrong, shards)
