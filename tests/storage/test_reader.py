"""The one segment reader (storage/reader.py): torn tails, a file growing while it is read (follow),
byte-range splits falling inside batches, damaged batches with and without resync, offsets going back,
a damaged length that declares more than the file holds, and a borrowed descriptor."""
import os
import random
import struct

import pytest

from tenure.storage.batch import LOG_OVERHEAD
from tenure.storage.reader import BadBatch, Batch, SegmentReader, read_range
from tenure.storage.segments import LogConfig, SegmentLog
from tests.support.wire import build_batch


def write_segment(tmp_path, sizes=(10, 300, 40, 2000, 5, 70, 900, 12)) -> tuple[str, list[tuple[int, int, bytes]]]:
    """A segment file of batches of different sizes (written by the log, so offsets are stamped); returns
    its path and (position, base offset, bytes) of each batch."""
    plog = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20))
    for i, size in enumerate(sizes):
        plog.append(build_batch([(f"k{i}-{j}".encode(), bytes([65 + i]) * size) for j in range(1 + i % 3)]))
    path = str(plog.active.path)
    plog.close()
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, base, data[pos:pos + LOG_OVERHEAD + length]))
        pos += LOG_OVERHEAD + length
    return path, out


def items(reader) -> list:
    with reader:
        return list(reader)


def sound(found) -> list[tuple[int, int, bytes]]:
    assert all(isinstance(x, Batch) for x in found), found
    return [(b.position, b.header.base_offset, b.data) for b in found]


def corrupt(path, position: int, value: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(value)


def test_reads_every_batch_with_its_position_offset_and_bytes(tmp_path):
    path, batches = write_segment(tmp_path)
    assert sound(items(SegmentReader(path))) == batches
    assert sound(items(SegmentReader(path, chunk=64))) == batches        # batches larger than a chunk
    pos = batches[3][0]
    assert sound(items(SegmentReader(path, pos))) == batches[3:]        # from a batch position


@pytest.mark.parametrize("cut", [1, LOG_OVERHEAD - 1, LOG_OVERHEAD + 3, 70])
def test_a_torn_tail_is_reported_torn_after_the_sound_batches(tmp_path, cut):
    path, batches = write_segment(tmp_path)
    last_pos = batches[-1][0]
    with open(path, "r+b") as f:
        f.truncate(last_pos + cut)
    found = items(SegmentReader(path))
    assert sound(found[:-1]) == batches[:-1]
    bad = found[-1]
    assert isinstance(bad, BadBatch) and bad.torn and bad.position == last_pos and "torn batch" in bad.reason
    assert bad.resumes is None
    assert sound(items(SegmentReader(path, resync=True))[:-1]) == batches[:-1]   # nothing to resync to


def test_follow_returns_what_is_complete_and_resumes_when_the_file_grows(tmp_path):
    path, batches = write_segment(tmp_path)
    data = open(path, "rb").read()
    grow = tmp_path / "growing.log"
    grow.write_bytes(b"")
    seen = []
    with open(grow, "ab", buffering=0) as w, SegmentReader(str(grow), follow=True, chunk=128) as r:
        written = 0
        rng = random.Random(7)
        while written < len(data):
            step = rng.choice([1, 5, 13, 100, 700])
            w.write(data[written:written + step])
            written = min(written + step, len(data))
            for item in r:
                assert isinstance(item, Batch), item       # an incomplete batch is never reported
                seen.append(item)
            complete = [b for b in batches if b[0] + len(b[2]) <= written]
            assert sound(seen) == complete, written          # each batch once, as soon as it is complete
            assert r.position == (complete[-1][0] + len(complete[-1][2]) if complete else 0)
            assert r.pending == written - r.position
    assert sound(seen) == batches


def test_follow_still_reports_damage(tmp_path):
    path, batches = write_segment(tmp_path)
    corrupt(path, batches[2][0] + 30, b"\xff\xfe")
    found = items(SegmentReader(path, follow=True))
    assert sound(found[:2]) == batches[:2]
    assert isinstance(found[2], BadBatch) and "CRC-32C" in found[2].reason and not found[2].torn
    assert len(found) == 3
    # a length too short for a batch header, in the last bytes of the file: damage, not a batch to wait for
    with open(path, "r+b") as f:
        f.truncate(batches[2][0] + LOG_OVERHEAD + 10)
    corrupt(path, batches[2][0] + 8, struct.pack(">i", 20))
    found = items(SegmentReader(path, follow=True))
    assert isinstance(found[2], BadBatch) and not found[2].torn and "below a batch header" in found[2].reason


def test_without_follow_a_torn_batch_is_read_again_while_the_file_grows(tmp_path):
    path, batches = write_segment(tmp_path)
    data = open(path, "rb").read()
    last_pos = batches[-1][0]
    with open(path, "r+b") as f:
        f.truncate(last_pos + 20)

    class Appending(SegmentReader):                  # the writer finishes the batch after the first look
        looks = 0

        def _stat(self):
            Appending.looks += 1
            if Appending.looks == 2:
                with open(path, "ab") as f:
                    f.write(data[last_pos + 20:])
            return super()._stat()

    assert sound(items(Appending(path))) == batches


def test_byte_ranges_falling_inside_batches_read_every_batch_exactly_once(tmp_path):
    path, batches = write_segment(tmp_path)
    size = os.path.getsize(path)
    rng = random.Random(12)
    for cuts in [[], [1], [size - 1], [batches[3][0]], [batches[3][0] + 1, batches[3][0] + 2]] + \
            [sorted(rng.sample(range(1, size), rng.randint(1, 12))) for _ in range(150)]:
        bounds = [0, *cuts, None]
        got = []
        for a, b in zip(bounds, bounds[1:]):
            piece = sound(items(read_range(path, a, b)))
            assert all(a <= p < (size if b is None else b) for p, _, _ in piece)   # the batches starting in it
            got += piece
        assert got == batches, cuts
    for p, _, _ in batches:
        inside = p + 7
        assert sound(items(read_range(path, inside, None))) == [b for b in batches if b[0] >= inside]


def test_a_range_past_a_broken_length_chain_is_empty(tmp_path):
    path, batches = write_segment(tmp_path)
    corrupt(path, batches[2][0] + 8, struct.pack(">i", 3))     # a length below a batch header
    assert items(read_range(path, batches[5][0], None)) == []
    found = items(read_range(path, 0, batches[5][0]))
    assert sound(found[:2]) == batches[:2]
    assert isinstance(found[2], BadBatch) and found[2].header is None and "below a batch header" in found[2].reason


def test_a_damaged_batch_stops_the_reader_unless_resync_finds_a_sound_batch_after_it(tmp_path):
    path, batches = write_segment(tmp_path)
    corrupt(path, batches[3][0] + 100, b"\x00\x01\x02")             # inside the records: the CRC fails
    found = items(SegmentReader(path))
    assert sound(found[:3]) == batches[:3]
    bad = found[3]
    assert (bad.position, bad.offset, bad.torn, bad.resumes) == (batches[3][0], batches[3][1], False, None)
    assert "CRC-32C" in bad.reason and len(found) == 4
    found = items(SegmentReader(path, resync=True))
    assert found[3].resumes == batches[4][0]
    assert sound(found[:3] + found[4:]) == batches[:3] + batches[4:]
    # two damaged batches in a row: the first one's length leads to no sound batch, so resync stops there
    corrupt(path, batches[4][0] + LOG_OVERHEAD + 9, b"\x07")          # batch 4's magic
    found = items(SegmentReader(path, resync=True))
    assert sound(found[:3]) == batches[:3]
    assert isinstance(found[3], BadBatch) and found[3].resumes is None and len(found) == 4


def test_a_damaged_length_past_the_end_is_torn_and_not_read(tmp_path):
    path, batches = write_segment(tmp_path)
    corrupt(path, batches[1][0] + 8, struct.pack(">i", 0x7FFFFFF0))
    found = items(SegmentReader(path, resync=True))
    assert sound(found[:1]) == batches[:1]
    bad = found[1]
    assert isinstance(bad, BadBatch) and bad.torn and bad.header is None and bad.resumes is None
    assert f"declares {0x7FFFFFF0 + LOG_OVERHEAD} bytes" in bad.reason and len(found) == 2


def test_expect_offset_checks_that_base_offsets_move_forward(tmp_path):
    path, batches = write_segment(tmp_path)
    assert sound(items(SegmentReader(path, expect_offset=0))) == batches
    found = items(SegmentReader(path, expect_offset=1))
    assert isinstance(found[0], BadBatch) and "goes back" in found[0].reason
    corrupt(path, batches[4][0], struct.pack(">q", batches[2][1]))    # base offset is outside the CRC
    found = items(SegmentReader(path, expect_offset=0))
    assert sound(found[:4]) == batches[:4]
    assert isinstance(found[4], BadBatch) and found[4].offset == batches[2][1] and "goes back" in found[4].reason
    assert sound(items(SegmentReader(path))) == batches[:4] + [(batches[4][0], batches[2][1],
                                                                open(path, "rb").read()[batches[4][0]:batches[5][0]])] \
        + batches[5:]


def test_a_borrowed_descriptor_is_not_closed_and_stop_bounds_the_read(tmp_path):
    path, batches = write_segment(tmp_path)
    fd = os.open(path, os.O_RDONLY)
    try:
        with SegmentReader(fd, 0, batches[4][0] + 1) as r:            # batch 4 starts inside: read whole
            assert sound(list(r)) == batches[:5]
        assert os.fstat(fd).st_size == os.path.getsize(path)          # still open
    finally:
        os.close(fd)


def test_follow_tails_a_segment_a_log_appends_to_from_another_thread(tmp_path):
    """A live log appending (its own writes, batch by batch, from another thread) while a follower polls:
    every batch is read once, whole and in order, and the follower ends where the log ends."""
    import threading
    import time

    plog = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=1 << 30))
    path = str(plog.active.path)
    n = 300
    done = threading.Event()

    def writer():
        for i in range(n):
            plog.append(build_batch([(b"k%d" % i, bytes(i % 200))] * (1 + i % 4)))
        done.set()

    t = threading.Thread(target=writer)
    seen = []
    with SegmentReader(path, follow=True, expect_offset=0, chunk=4096) as r:
        t.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            finished = done.is_set()
            got = list(r)
            seen += got
            if finished and r.pending == 0:
                break
            if not got:
                time.sleep(0.001)
        t.join()
    assert all(isinstance(b, Batch) for b in seen)
    assert [b.header.base_offset for b in seen] == [h.base_offset for h, _ in plog.batches(0)]
    assert len(seen) == n and seen[-1].header.next_offset == plog.log_end_offset
    assert r.position == os.path.getsize(path)
    plog.close()


def test_exact_from_makes_base_offsets_continue_exactly_from_that_offset_on(tmp_path):
    """Below `exact_from` (the cleaner checkpoint, for recovery) a batch may skip offsets the cleaner
    removed; from it on, each base offset must be exactly the previous batch's next offset."""
    path, batches = write_segment(tmp_path)
    gap_at = batches[3][1]
    corrupt(path, batches[3][0], struct.pack(">q", gap_at + 1))       # batch 3 now skips one offset
    found = items(SegmentReader(path, expect_offset=0, exact_from=0))
    assert sound(found[:3]) == batches[:3]
    assert isinstance(found[3], BadBatch) and found[3].offset == gap_at + 1
    assert f"does not continue the previous batch (expected {gap_at})" in found[3].reason
    found = items(SegmentReader(path, expect_offset=0, exact_from=gap_at + 1))   # the gap is below the line
    assert all(isinstance(b, Batch) for b in found[:4]) and found[3].header.base_offset == gap_at + 1
    assert isinstance(found[4], BadBatch)                                         # batch 4 now overlaps it
    assert f"base offset {batches[4][1]} does not continue the previous batch (expected {batches[4][1] + 1})" \
        in found[4].reason
