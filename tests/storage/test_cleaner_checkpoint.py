"""The cleaner checkpoint (storage/compaction.py): `<data dir>/cleaner-offset-checkpoint`, Kafka's format,
raised before each swap to the base offset of the segment after the cleaned group, never lowered, replaced
atomically; a swap whose checkpoint cannot be written is abandoned. `tenure audit` relies on it: offsets at
or above it were never cleaned, so a hole there is a real gap."""
import os
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tenure.storage import compaction
from tenure.storage.checkpoints import CHECKPOINT, advance_checkpoint, read_checkpoint
from tenure.storage.compaction import CompactionPolicy, Compactor
from tenure.storage.segments import LogConfig, SegmentLog

T0 = 1_700_000_000_000


def batch(key: bytes, value: bytes, ts: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2 ** 30)
    b.append(0, timestamp=ts, key=key, value=value, headers=[])
    return bytes(b.build())


def offsets(plog):
    return [r.offset for _, raw in plog.batches(0) for r in DefaultRecordBatch(raw)]


def filled(path: Path, n: int = 40) -> SegmentLog:
    plog = SegmentLog(path, LogConfig(segment_bytes=400))
    for i in range(n):
        plog.append(batch(f"k{i % 3}".encode(), b"v" * 30, T0 + i))
    return plog


def test_a_pass_raises_the_checkpoint_to_the_end_of_what_it_cleaned(tmp_path):
    plog = filled(tmp_path / "__consumer_offsets-2")
    assert read_checkpoint(tmp_path) == {}
    active_base = plog.active.base_offset
    before = offsets(plog)
    Compactor().clean_fully(plog, CompactionPolicy(delete_retention_ms=0))
    after = offsets(plog)
    assert len(after) < len(before)                         # something was cleaned away
    # everything below the active segment was cleanable: the checkpoint is the active segment's base
    assert read_checkpoint(tmp_path) == {("__consumer_offsets", 2): active_base}
    assert (tmp_path / CHECKPOINT).read_text() == f"0\n1\n__consumer_offsets 2 {active_base}\n"
    # every offset the cleaner removed is below it; nothing at or above it is missing
    assert all(o < active_base for o in set(before) - set(after))
    assert [o for o in after if o >= active_base] == [o for o in before if o >= active_base]
    assert not (tmp_path / (CHECKPOINT + ".tmp")).exists()
    plog.close()


def test_entries_of_other_partitions_are_kept_and_never_lowered(tmp_path):
    a, b = filled(tmp_path / "__consumer_offsets-0"), filled(tmp_path / "t-1", n=30)
    Compactor().clean_fully(a, CompactionPolicy(delete_retention_ms=0))
    Compactor().clean_fully(b, CompactionPolicy(delete_retention_ms=0))
    cp = read_checkpoint(tmp_path)
    assert set(cp) == {("__consumer_offsets", 0), ("t", 1)}
    advance_checkpoint(a.dir, 1)                            # lower: ignored
    assert read_checkpoint(tmp_path) == cp
    advance_checkpoint(a.dir, cp[("__consumer_offsets", 0)] + 5)
    assert read_checkpoint(tmp_path)[("__consumer_offsets", 0)] == cp[("__consumer_offsets", 0)] + 5
    assert read_checkpoint(tmp_path)[("t", 1)] == cp[("t", 1)]
    a.close()
    b.close()


def test_a_malformed_checkpoint_is_refused_by_the_reader_and_rewritten_by_the_cleaner(tmp_path):
    (tmp_path / CHECKPOINT).write_text("0\n3\nt 0 5\n")
    with pytest.raises(ValueError, match="not a cleaner checkpoint"):
        read_checkpoint(tmp_path)
    plog = filled(tmp_path / "__consumer_offsets-0")
    Compactor().clean_fully(plog, CompactionPolicy(delete_retention_ms=0))
    assert read_checkpoint(tmp_path) == {("__consumer_offsets", 0): plog.active.base_offset}
    plog.close()


def test_a_swap_is_abandoned_when_its_checkpoint_cannot_be_written(tmp_path, monkeypatch):
    plog = filled(tmp_path / "__consumer_offsets-0")
    names = sorted(os.listdir(plog.dir))
    before = offsets(plog)

    def fail(*a, **kw):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(compaction, "advance_checkpoint", fail)
    with pytest.raises(OSError):
        Compactor().clean(plog, CompactionPolicy(delete_retention_ms=0), budget=1 << 62)
    assert sorted(os.listdir(plog.dir)) == names            # no .cleaned left, nothing swapped
    assert offsets(plog) == before
    assert not (tmp_path / CHECKPOINT).exists()
    plog.close()


def test_recovery_accepts_the_cleaners_gaps_below_the_checkpoint_only(tmp_path):
    """Below the checkpoint the cleaner dropped whole batches, so base offsets only move forward there;
    at and above it every batch continues the one before it exactly (a damaged base offset is caught)."""
    from tenure.storage.batch import parse_batches
    from tenure.storage.segments import CorruptLogError, segment_name
    plog = filled(tmp_path / "t-0")
    Compactor().clean_fully(plog, CompactionPolicy(delete_retention_ms=0))
    cp = read_checkpoint(tmp_path)[("t", 0)]
    after = offsets(plog)
    plog.close()
    reopened = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=400))
    assert offsets(reopened) == after and not reopened.truncated
    cleaned = reopened.segments[0].path
    reopened.close()
    # a base offset raised by one bit below the checkpoint: the batch that jumps is named, not the next
    raw = bytearray(cleaned.read_bytes())
    hs = parse_batches(bytes(raw))
    assert len(hs) >= 2 and hs[1].base_offset < cp
    raw[hs[0].position + 6] ^= 0x01                          # + 256
    cleaned.write_bytes(raw)
    with pytest.raises(CorruptLogError) as exc:
        SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=400))
    assert exc.value.path == cleaned and exc.value.position == hs[0].position, str(exc.value)
    assert "goes back into this batch: one of the two is damaged" in str(exc.value)
    raw[hs[0].position + 6] ^= 0x01
    cleaned.write_bytes(raw)
    # the newest segment was never cleaned: its last batch's damaged base offset is a tail, cut
    newest = tmp_path / "t-0" / segment_name(max(int(p.stem) for p in (tmp_path / "t-0").glob("*.log")))
    raw = bytearray(newest.read_bytes())
    last = parse_batches(bytes(raw))[-1]
    raw[last.position + 7] ^= 0x02
    newest.write_bytes(raw)
    again = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=400))
    assert again.log_end_offset == last.base_offset and len(again.truncated) == 1
    assert "does not continue the previous batch" in again.truncated[0].reason
    again.close()
