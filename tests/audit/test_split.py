"""A segment file read as byte-range pieces (listing.split, listing.merge_pieces) gives exactly what one read of
the whole file gives - the same records, errors and gaps in the same order, the same per-file info - for any
piece size: pieces starting mid-batch, inside a big batch, at a damaged batch, on a torn tail, and inside a
record whose bytes hold a sound batch of their own; and where the pieces cannot chain (two damaged batches in a
row: one read stops at the first, a later piece reads on) the file is read again in one piece, which the job
does."""
import os

from tenure.audit import job, listing, read
from tenure.protocol import records as rec
from tenure.storage.batch import parse_batches

from .logs import T0, Writer, batch, ev, gm, member

SIZES = [1, 7, 50, 61, 97, 128, 200, 333, 500, 777, 1024, 1500]


def commit(i: int) -> rec.OffsetCommitRecord:
    return rec.OffsetCommitRecord(f"g{i % 3}", "t", i % 4, i, -1, "m" * (i % 40), T0 + i)


def write_log(tmp_path) -> dict[int, str]:
    """Partition 0: commits, static events, GroupMetadata of many members (batches larger than most pieces),
    a several-record batch, one member whose subscription bytes are a sound batch, and a torn tail.
    Partition 1: commits with a corrupted batch in the middle of an old segment (skipped), in another
    segment a damaged batch whose length is broken (the rest of that file cannot be read), and in a third
    two damaged batches in a row (the rest of that file cannot be read either)."""
    w = Writer(tmp_path, 0, segment_bytes=3000)
    fake = batch([commit(999)], T0)
    for i in range(60):
        w.add(commit(i), T0 + i)
        if i % 9 == 0:
            w.add(ev("g0", f"i{i}", rec.JOINED, None, f"m{i}", T0 + i), T0 + i)
        if i % 13 == 0:
            w.add(gm("g0", i, [(f"m{j}", f"i{j}") for j in range(25)], T0 + i), T0 + i)
    m = member("mf", "if")
    w.add(rec.GroupMetadataRecord("g1", "consumer", 3, "range", "mf", T0, (
        rec.MemberRecord(m.member_id, m.group_instance_id, "c", "/h", 1, 1, fake, fake),)), T0 + 61)
    w.log.append(batch([commit(i) for i in range(100, 130)], T0 + 62))
    for i in range(62, 80):
        w.add(commit(i), T0 + i)
    newest = w.log.segments[-1].path
    w.close()
    with open(newest, "ab") as f:                          # a batch still being written
        f.write(batch([commit(200)], T0)[:40])
    w = Writer(tmp_path, 1, segment_bytes=2000)
    for i in range(120):
        w.add(commit(i), T0 + i)
    segs = [s.path for s in w.log.segments]
    w.close()
    assert len(segs) >= 4

    def corrupt(path, at):
        data = bytearray(open(path, "rb").read())
        data[at] ^= 0xFF
        open(path, "wb").write(bytes(data))

    corrupt(segs[1], os.path.getsize(segs[1]) // 2)        # a byte inside a batch: its CRC fails
    corrupt(segs[2], 300 + 9)                               # ... a batch length: what follows is lost
    second, third = [h.position for h in parse_batches(open(segs[3], "rb").read())][1:3]
    corrupt(segs[3], second + 40)                           # two batches in a row whose CRC fails: one
    corrupt(segs[3], third + 40)                            # read stops there, later pieces read on
    return {0: newest, 1: segs[1]}


def read_partition(lst: listing.Listing, split_bytes):
    units = lst.units(split_bytes)
    rows = [t for u in units for t in read.read_unit(u)]
    merged, joins, broken = listing.merge_pieces([t[1] for t in rows if t[0] == "I"], lst.clean_to)
    body = [t for t in rows if t[0] in "RE"]
    gaps = sorted([t[1] for t in rows if t[0] == "G"] + joins)
    return units, body, gaps, merged, broken


def test_pieces_read_what_one_read_reads_for_any_piece_size(tmp_path):
    write_log(tmp_path)
    listings, _ = listing.list_partitions(str(tmp_path))
    broke = set()
    for p, lst in listings.items():
        _, body, gaps, merged, broken = read_partition(lst, None)
        assert not broken
        kinds = {e[4] for k, e in body if k == "E"}
        assert kinds == ({read.TORN_TAIL} if p == 0 else {read.DAMAGE}), kinds
        for size in SIZES:
            units, body2, gaps2, merged2, broken2 = read_partition(lst, size)
            assert len(units) > len(lst.files)
            if broken2:
                # the job reads these files again in one piece: the rest must already be identical
                broke.add((p, size))
                again = {path: [t for u in lst.units() if u.path == path for t in read.read_unit(u)]
                         for path in broken2}
                body2 = [t for u in units for t in _rows_of(u, again)]
                merged2 = sorted(merged2 + [t[1][:6] for rows in again.values() for t in rows if t[0] == "I"],
                                 key=lambda i: [f[1] for f in lst.files].index(i[1]))
                gaps2 = sorted([g for g in gaps2 if g[1] not in again]
                               + [t[1] for rows in again.values() for t in rows if t[0] == "G"])
            assert body2 == body, (p, size)
            assert gaps2 == gaps, (p, size)
            assert merged2 == merged, (p, size)
    # pieces find their first batch by walking the batch lengths from the file's start, so the
    # subscription holding a sound batch fools none of them; two damaged batches in a row (where one
    # read stops and a later piece reads on) make some piece sizes fall back
    assert not any(p == 0 for p, _ in broke) and any(p == 1 for p, _ in broke), broke


def _rows_of(unit, again):
    """A piece's records and errors, or for a file read again, that read's (once, at its first piece)."""
    if unit.path in again:
        if unit.piece == 0:
            yield from (t for t in again[unit.path] if t[0] in "RE")
        return
    yield from (t for t in read.read_unit(unit) if t[0] in "RE")


def test_split_cuts_only_files_larger_than_a_piece():
    u = listing.Unit(0, "/x", 0, False, (1, 2, 1000, 3))
    assert listing.split(u, None) == [u] and listing.split(u, 1000) == [u]
    pieces = listing.split(u, 300)
    assert [(p.start, p.end, p.piece, p.pieces) for p in pieces] == [
        (0, 250, 0, 4), (250, 500, 1, 4), (500, 750, 2, 4), (750, None, 3, 4)]


def test_the_job_reads_a_split_log_as_it_reads_it_whole(spark, tmp_path):
    write_log(tmp_path)
    lst = listing.list_partitions(str(tmp_path))[0][1]
    assert read_partition(lst, 97)[4]                       # a piece size whose pieces cannot chain
    got = {}
    for size in (None, 97):
        loaded = job.load(spark, job.Options(str(tmp_path), str(tmp_path / "out"), split_bytes=size))
        got[size] = (sorted(tuple(r) for r in loaded.records.collect()),
                     sorted(tuple(r) for r in loaded.errors.collect()),
                     sorted(tuple(r) for r in loaded.gaps.collect()), loaded.files, loaded.rereads)
    assert got[None][0] and got[None][1]
    assert got[97] == got[None]
