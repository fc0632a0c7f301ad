"""`log_gap`: offsets missing where no compaction could have removed them - at or above the partition's
cleaner checkpoint (storage/compaction.py writes it before each swap). A log missing a segment file or a
batch shows its exact gap; a compacted log, whose holes are all below the checkpoint, shows none."""
import os

from tenure.audit import job
from tenure.protocol import records as rec
from tenure.storage.batch import parse_batches
from tenure.storage.checkpoints import CHECKPOINT, read_checkpoint
from tenure.storage.compaction import CompactionPolicy, Compactor

from .logs import T0, Writer, offsets_in


def commits(w: Writer, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        w.add(rec.OffsetCommitRecord(f"g{i % 2}", "t", i % 3, i, -1, "", T0 + i), T0 + i)


def gaps(tables) -> list[tuple[int, int, int]]:
    """(partition, first missing, last missing) of every log_gap row, from its detail."""
    out = []
    for r in tables["anomalies"].filter("kind = 'log_gap'").collect():
        words = r["detail"].split()
        lo, hi = (int(x) for x in words[1].split(".."))
        part = int(words[3].rsplit("-", 1)[1])
        assert r["count"] == hi - lo + 1 and r["group"] is None
        out.append((part, lo, hi))
    return sorted(out)


def test_gaps_only_where_nothing_was_cleaned(spark, tmp_path):
    expected = []
    # partition 0: never cleaned; its third segment file is removed
    w = Writer(tmp_path, 0, segment_bytes=400)
    commits(w, 30)
    segs = w.log.segments
    assert len(segs) > 4
    lost = (segs[2].base_offset, segs[3].base_offset - 1)
    os.remove(segs[2].path)
    expected.append((0, *lost))
    w.close()
    # partition 1: compacted (holes everywhere below the active segment), nothing lost
    w = Writer(tmp_path, 1, segment_bytes=400)
    commits(w, 30)
    before = offsets_in(w.log)
    Compactor().clean_fully(w.log, CompactionPolicy(delete_retention_ms=0))
    assert len(offsets_in(w.log)) < len(before) // 2
    w.close()
    # partition 2: compacted, then more segments appended; one above the checkpoint is removed, and a batch
    # is cut out of the middle of another one
    w = Writer(tmp_path, 2, segment_bytes=400)
    commits(w, 30)
    Compactor().clean_fully(w.log, CompactionPolicy(delete_retention_ms=0))
    commits(w, 30, start=30)
    cp = read_checkpoint(tmp_path)[("__consumer_offsets", 2)]
    above = [s for s in w.log.segments if s.base_offset >= cp]
    assert len(above) > 4
    victim, after = above[1], above[2]
    w.close()
    os.remove(victim.path)
    expected.append((2, victim.base_offset, after.base_offset - 1))
    data = after.path.read_bytes()
    hs = parse_batches(data)
    assert len(hs) >= 3
    cut = hs[1]
    after.path.write_bytes(data[:cut.position] + data[cut.position + cut.size:])
    expected.append((2, cut.base_offset, cut.last_offset))
    # partition 3: never cleaned; its first segment file (offset 0) is gone
    w = Writer(tmp_path, 3, segment_bytes=400)
    commits(w, 20)
    first, second = w.log.segments[0], w.log.segments[1]
    w.close()
    os.remove(first.path)
    expected.append((3, 0, second.base_offset - 1))

    tables, _ = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out")))
    assert tables["errors"].count() == 0
    assert gaps(tables) == sorted(expected)

    # without the checkpoint nothing tells compaction holes from lost records: partition 1's holes show up
    os.remove(tmp_path / CHECKPOINT)
    tables, _ = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out")))
    found = gaps(tables)
    assert {p for p, _, _ in found} == {0, 1, 2, 3}
    assert all(e in found for e in expected)


def test_damage_is_not_also_a_gap(spark, tmp_path):
    """A damaged batch is reported as damage; the offsets it hides are not reported again as a gap."""
    w = Writer(tmp_path, 0, segment_bytes=1 << 20)
    commits(w, 10)
    seg = w.log.segments[0].path
    w.close()
    data = bytearray(seg.read_bytes())
    h = parse_batches(bytes(data))[4]
    data[h.position + h.size - 2] ^= 0xFF
    seg.write_bytes(bytes(data))
    tables, _ = job.build(spark, job.Options(str(tmp_path), str(tmp_path / "out")))
    assert [r["kind"] for r in tables["errors"].collect()] == ["damage"]
    assert gaps(tables) == []
    assert tables["anomalies"].filter("kind = 'log_damage'").count() == 1
