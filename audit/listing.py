"""The driver's side of the audit's read stage, cheap (names and `stat`): listing a topic's segment files
as units of work (`list_partitions`, `Listing.units`, pieces of a big file by `split`), and the checks of
one partition's read once its tasks are done (`merge_pieces`: a file's pieces read one chain of batches;
`unstable_reason`: the read was one consistent state of the log; `partition_gaps`: offset gaps between
its files above the cleaner checkpoint). The executors' side is read.py (docs/audit.md)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from tenure.broker.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from tenure.protocol.internal_topics import SHARE_STATE_TOPIC
from tenure.storage.checkpoints import read_checkpoint
from tenure.storage.files import MERGING, SUFFIX, SWAP

_PART_DIRS = {topic: re.compile(rf"^{topic}-(\d+)$") for topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC,
                                                                     SHARE_STATE_TOPIC)}
_SWAP_MARKERS = (SUFFIX + SWAP, SUFFIX + MERGING)    # a swap past its first step and not finished

# "I" row status
OK, CHANGED, OPEN_FAILED = "ok", "changed", "open_failed"


def file_id(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def same_file(listed: tuple, now: tuple, newest: bool) -> bool:
    """Is `now` (a file_id) still the listed file? The newest segment may only have grown; any other
    segment is immutable (a cleaned one is a new file: a new inode and mtime)."""
    if newest:
        return listed[:2] == now[:2] and now[2] >= listed[2]
    return listed == now


@dataclass(frozen=True)
class Unit:
    """One unit of work: one segment file as listed, or one byte range of it (a piece: see `split`)."""
    partition: int
    path: str
    base_offset: int
    newest: bool          # the partition's newest (active) segment: a torn tail there is not damage
    ident: tuple | None = None    # file_id at listing; None: read whatever is there (no consistency check)
    clean_to: int | None = 0      # the cleaner checkpoint: offsets below may be cleaned (None: unknown)
    start: int = 0                # the piece's byte range [start, end): it reads the batches starting in it
    end: int | None = None        # None: to the end of the file
    piece: int = 0                # this piece's index among the file's `pieces`
    pieces: int = 1
    topic: str = OFFSETS_TOPIC    # __consumer_offsets, __transaction_state or __share_group_state (decoded as such)


def split(unit: Unit, split_bytes: int | None) -> list[Unit]:
    """One segment file as pieces of about `split_bytes` each, so that several tasks read one big file (one
    piece, the file itself, if it is smaller or `split_bytes` is None). Input splits as Hadoop makes them
    of a file with no sync markers: each piece reads the batches that *start* in its byte range (the
    segment reader's byte-range read: its first batch found by walking the batch lengths from the
    file's start) up to the first batch starting at or past the range end, read whole even if it runs
    past it. `merge_pieces` then checks on the driver that each piece began exactly where the one before
    it stopped, so the pieces read the file's one chain of batches, as a single read would (where damage
    stops a read, a later piece may have read on: that file is read again in one piece)."""
    size = unit.ident[2] if unit.ident is not None else None
    if split_bytes is None or size is None or size <= split_bytes:
        return [unit]
    n = -(-size // split_bytes)
    step = -(-size // n)
    return [replace(unit, start=i * step, end=None if i == n - 1 else (i + 1) * step, piece=i, pieces=n)
            for i in range(n)]


@dataclass
class Listing:
    """One partition directory as listed: its segment files (base offset, path, file_id) in offset order,
    what showed a swap under way, and the cleaner checkpoint read after the files were listed."""
    partition: int
    dir: str
    files: list[tuple[int, str, tuple]] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    clean_to: int | None = 0
    topic: str = OFFSETS_TOPIC

    def units(self, split_bytes: int | None = None) -> list[Unit]:
        """One unit per segment file, or per piece of it with `split_bytes` (see `split`)."""
        n = len(self.files)
        return [piece for i, (base, path, ident) in enumerate(self.files)
                for piece in split(Unit(self.partition, path, base, i == n - 1, ident, self.clean_to,
                                        topic=self.topic), split_bytes)]


def list_partitions(data_dir: str, partitions: set[int] | None = None,
                    topic: str = OFFSETS_TOPIC) -> tuple[dict[int, Listing], str | None]:
    """Every `<topic>-<n>/` directory's segment files (`__consumer_offsets` unless said) with their
    identities (driver side, cheap: names and stat), then the cleaner checkpoint. Returns (listings, a note
    if the checkpoint is unreadable: then no partition's gaps can be told from compaction and none are
    reported)."""
    out: dict[int, Listing] = {}
    root = Path(data_dir)
    for d in sorted(root.iterdir()):
        m = _PART_DIRS[topic].match(d.name)
        if m is None or not d.is_dir():
            continue
        part = int(m.group(1))
        if partitions is not None and part not in partitions:
            continue
        lst = out[part] = Listing(part, str(d), topic=topic)
        try:
            names = sorted(os.listdir(d))
        except FileNotFoundError:
            lst.busy.append(f"{d} vanished while listed")
            continue
        for name in names:
            if name.endswith(_SWAP_MARKERS):
                lst.busy.append(name)
                continue
            stem, suffix = os.path.splitext(name)
            if suffix != SUFFIX or not stem.isdigit():
                continue
            path = os.path.join(d, name)
            try:
                lst.files.append((int(stem), path, file_id(os.stat(path))))
            except FileNotFoundError:
                lst.busy.append(f"{name} (vanished while listed)")
        lst.files.sort()
    note = None
    try:                                  # after the files: it covers every swap they show
        checkpoint = read_checkpoint(data_dir)
    except (OSError, ValueError) as exc:
        checkpoint, note = None, f"{exc}: offset gaps are not checked"
    for part, lst in out.items():
        lst.clean_to = None if checkpoint is None else checkpoint.get((topic, part), 0)
    return out, note


def list_units(data_dir: str, partitions: set[int] | None = None) -> list[Unit]:
    """The segment files of every `__consumer_offsets-<n>/` directory, as units."""
    listings, _ = list_partitions(data_dir, partitions)
    return [u for part in sorted(listings) for u in listings[part].units()]


def unstable_reason(first: Listing, infos: list[tuple], second: Listing | None) -> str | None:
    """Why the read of one partition may not be one consistent state of its log (None: it is): a swap
    under way at either listing, a file that changed between the listing and its read ("I" rows with
    status `changed`), or a listed file changed, removed or joined by an older one by the second listing.
    Segments rolled after the first listing (above its newest) do not matter: they were not read."""
    if first.busy:
        return (f"a compaction swap was under way when the files were listed ({', '.join(first.busy)}; left "
                f"by an interrupted one, a server's next open finishes or undoes it)")
    changed = sorted(i[1] for i in infos if i[2] == CHANGED)
    if changed:
        return f"{some_files(changed)} changed between listing and reading (a compaction swap)"
    if second is None:
        return f"{first.dir} vanished during the read"
    if second.busy:
        return f"a compaction swap was under way after the read ({', '.join(second.busy)})"
    now = {path: ident for _, path, ident in second.files}
    newest = first.files[-1][0] if first.files else None
    for i, (_base, path, ident) in enumerate(first.files):
        if path not in now:
            return f"{path} was removed during the read (a compaction swap)"
        if not same_file(ident, now[path], i == len(first.files) - 1):
            return f"{path} was replaced during the read (a compaction swap)"
    listed = {path for _, path, _ in first.files}
    extra = sorted(p for b, p, _ in second.files if p not in listed and newest is not None and b < newest)
    if extra:
        return f"{some_files(extra)} appeared during the read below the newest segment"
    return None


def merge_pieces(infos: list[tuple], clean_to: int | None) -> tuple[list[tuple], list[tuple], list[str]]:
    """The "I" rows of one partition's units, pieces of one file merged: (one info per file - partition,
    path, status, batches, first offset, next offset -, the "G" gaps at the joins between pieces, the files
    whose pieces did not read one chain of batches). A file's pieces read what a single read of it reads
    when each piece began at the very batch where the one before stopped (an empty piece: its whole range
    lay inside that batch) and the offsets moved forward across the join; else (damage at a join, a
    position inside a batch that looked like a sound batch) the file is to be read again in one piece."""
    by_path: dict[str, list[tuple]] = {}
    for i in infos:
        by_path.setdefault(i[1], []).append(i)
    merged, gaps, broken = [], [], []
    for path, rows in by_path.items():
        rows.sort(key=lambda i: i[6])
        if len(rows) == 1 and rows[0][7] == 1:
            merged.append(rows[0][:6])
            continue
        part = rows[0][0]
        status = next((i[2] for i in rows if i[2] != OK), OK)
        whole = len(rows) == rows[0][7] and [i[6] for i in rows] == list(range(len(rows)))
        pos = expect = prev_next = None
        first, end, ended = None, None, False
        for i in rows if whole and status == OK else ():
            _, _, _, batches, first_i, end_i, piece, _, start, stop, expect_i, prev_next_i, ended_i = i[:13]
            if piece == 0:
                first = first_i
            elif start is None:            # no batch starts in this piece's range: the batch before covers it
                if not ended and (pos is None or pos < stop):
                    whole = False
                    break
                continue
            elif ended or start != pos or (first_i is not None and expect is not None and first_i < expect):
                whole = False
                break
            elif first_i is not None and prev_next is not None and first_i > prev_next and clean_to is not None \
                    and first_i > clean_to:
                gaps.append((part, path, start, max(prev_next, clean_to), first_i))
            pos, expect, prev_next, ended = stop, expect_i, prev_next_i, ended_i
            if batches:
                end = end_i
        if status == OK and not whole:
            broken.append(path)
            continue
        merged.append((part, path, status, sum(i[3] for i in rows), first, end))
    return merged, gaps, broken


def some_files(paths: list[str], n: int = 3) -> str:
    names = ", ".join(os.path.basename(p) for p in paths[:n])
    return (f"{len(paths)} segment files ({names}, ...)" if len(paths) > n
            else names if len(paths) > 1 else paths[0])


def partition_gaps(lst: Listing, infos: list[tuple]) -> list[tuple]:
    """Offset gaps between the segment files of one consistently read partition, above its cleaner
    checkpoint (offsets below it may have been removed by compaction): (partition, first missing offset,
    the offset after the last missing one, where). The log starts at offset 0; a segment's first batch
    follows the previous segment's last batch; an empty segment's base offset is where the log had
    reached. Offsets unknown after unreadable damage are not guessed (the damage is reported)."""
    if lst.clean_to is None:
        return []
    by_path = {i[1]: i for i in infos}
    out = []
    expected: int | None = 0                  # where the next segment's first batch should start (None: unknown)
    prev: str | None = None
    for base, path, _ in lst.files:
        info = by_path.get(path)
        if info is None or info[2] != OK:
            expected, prev = None, path
            continue
        _, _, _, batches, first, end = info
        start = first if batches else base
        if start is None:
            expected = None
        else:
            if expected is not None and start > expected and start > lst.clean_to:
                where = f"before the first batch of {path}" + (f", after {prev}" if prev else "")
                out.append((lst.partition, max(expected, lst.clean_to), start, where))
            if batches:
                expected = end
            else:
                expected = base if expected is None else max(expected, base)
        prev = path
    return out
