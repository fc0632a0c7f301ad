"""Recovery's checks of segment files: what `SegmentLog` verifies at open, and `tenure log verify`
decides with (read-only) what a server would do at open.

Every batch is verified (length, magic, CRC-32C, and a base offset continuing the previous batch exactly,
except where the cleaner left gaps: see `scan_segment`, `gaps_below`). Damage at the end of the newest
segment - a torn write or a corrupt last batch with nothing valid after it - is a `Damage` the log cuts
off; damage anywhere else is never skipped: opening raises `CorruptLogError` naming the file, byte position
and offset. `segment_gap` checks that each segment follows the one before it.
"""
from __future__ import annotations

import logging
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from .batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, BatchHeader
from .checkpoints import read_checkpoint
from .files import partition_of_dir
from .reader import BadBatch, SegmentReader, check_batch

log = logging.getLogger("tenure.storage")

_BASE_AND_LEN = struct.Struct(">qi")


class CorruptLogError(Exception):
    """Damage that recovery must not cut: a bad batch with valid data after it, or in an older segment."""

    def __init__(self, path: Path, position: int, offset: int | None, reason: str) -> None:
        where = f"{path} at byte {position}" + (f" (offset {offset})" if offset is not None else "")
        super().__init__(f"corrupt log: {where}: {reason}")
        self.path = path
        self.position = position
        self.offset = offset
        self.reason = reason



@dataclass
class Damage:
    """A batch that failed verification: where, why, and whether valid batches follow it."""
    path: Path
    position: int
    offset: int | None
    reason: str
    valid_after: bool


def gaps_below(directory: Path, newest_base: int) -> int:
    """The offset below which a partition log's batches may skip offsets (see `scan_segment`).

    Only the log cleaner leaves such gaps: it drops batches whose records were all superseded, keeping
    every other batch's base and last offset, and before a cleaned segment is swapped in it raises this
    partition's entry in the cleaner checkpoint (`<data dir>/cleaner-offset-checkpoint`) past every offset
    it cleaned. So: that entry; 0 if there is none (never cleaned: every batch continues the one before it
    exactly); if the checkpoint cannot be read, the newest segment's base offset (the cleaner never
    touches the newest segment)."""
    try:
        entries = read_checkpoint(directory.parent)
    except (OSError, ValueError) as exc:
        log.warning("%s: %s; below offset %d batches are only checked for moving forward", directory.name,
                    exc, newest_base)
        return newest_base
    return entries.get(partition_of_dir(directory.name), 0)


def scan_segment(path: Path, base_offset: int, on_batch=None, gaps_below: int = 0,
                 start: int = 0) -> tuple[list[BatchHeader], Damage | None]:
    """Every sound batch of a segment file up to the first damage (if any), read by the segment reader.

    A sound batch starts exactly where the one before it (or, first in the file, the segment's base
    offset) ends - the base offset is not covered by the CRC, so this is what catches a damaged one -
    except where the expected offset is below `gaps_below`: there the cleaner may have dropped whole
    batches, and a base offset only has to move forward.

    With `on_batch`, each sound header is handed to it as it is found and the returned list stays empty
    (a large segment's headers are then never all held at once). With `start`, the scan begins at that byte
    (a batch boundary whose base offset is `base_offset`: the last index entry of a segment trusted after a
    clean stop, storage/cleanshut.py)."""
    headers: list[BatchHeader] = []
    keep = headers.append if on_batch is None else on_batch
    expect = base_offset
    skipped: tuple[BatchHeader, int] | None = None   # the previous batch and its expected offset, if it
    with SegmentReader(path, start, expect_offset=base_offset, exact_from=gaps_below, rereads=1) as reader:
        for item in reader:                          # jumped over a gap
            if isinstance(item, BadBatch):
                return headers, _damage(Path(path), item, reader.size, expect, skipped)
            h = item.header
            keep(h)
            skipped = (h, expect) if h.base_offset > expect else None
            expect = h.base_offset + h.last_offset_delta + 1
    return headers, None


def _damage(path: Path, bad: BadBatch, size: int, expect: int,
            skipped: tuple[BatchHeader, int] | None) -> Damage:
    """What `scan_segment` reports for the bad batch it met (`expect`: the offset it should have had)."""
    h, reason = bad.header, bad.reason
    offsets_only = reason.startswith("base offset")  # check_batch checks offsets last: all else is sound
    if skipped is not None and h is not None and h.base_offset < expect and offsets_only:
        # a sound batch going back into the batch before it, which skipped offsets: either base offset
        # may be the damaged one; the earlier is named, so nothing sound is cut
        prev, prev_expect = skipped
        return Damage(path, prev.position, prev_expect,
                      f"base offset {prev.base_offset} skips offsets {prev_expect}..{prev.base_offset - 1} and "
                      f"the next batch's base offset {h.base_offset} goes back into this batch: one of the two "
                      f"is damaged", True)
    offset = expect if h is None or offsets_only else h.base_offset
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        valid_after = _valid_after(buf, bad.position, min(size, len(buf)), h, expect)
    return Damage(path, bad.position, offset, reason, valid_after)


def segment_gap(base: int, expect: int, gaps_below: int) -> str | None:
    """Why a segment with base offset `base` cannot follow one whose next offset is `expect`, if it cannot:
    it overlaps it, or offsets are missing between them that no cleaning explains (see `gaps_below`)."""
    if base < expect:
        return f"segment base offset {base} overlaps the previous segment, whose next offset is {expect}"
    if base > expect >= gaps_below:
        return (f"offsets {expect}..{base - 1} are missing: the previous segment ends at offset {expect - 1} "
                f"and the cleaner never removed records there")
    return None


def _valid_after(buf, pos: int, size: int, h: BatchHeader | None, expect: int) -> bool:
    """Is there a sound batch anywhere after a damaged one (so the damage is not a tail)?

    First where the damaged batch's own length points; then, since that length may itself be the
    damaged field, every position whose magic byte reads 2 and whose header is plausible (length
    within the file, base offset not below the damaged batch's or the expected one), confirmed by its CRC-32C. A rare,
    recovery-only search: cheap checks first, the CRC only for plausible candidates."""
    if h is not None and pos + h.size < size:
        if check_batch(buf, pos + h.size, size, 0)[1] is None:
            return True
    floor = min(_BASE_AND_LEN.unpack_from(buf, pos)[0], expect) if size - pos >= LOG_OVERHEAD else expect
    q = buf.find(b"\x02", pos + 1 + MAGIC_OFFSET)
    while q != -1:
        p = q - MAGIC_OFFSET
        if p + HEADER_SIZE <= size:
            base, length = _BASE_AND_LEN.unpack_from(buf, p)
            if (length >= HEADER_SIZE - LOG_OVERHEAD and p + LOG_OVERHEAD + length <= size
                    and floor <= base < floor + (1 << 40)
                    and check_batch(buf, p, size, 0)[1] is None):
                return True
        q = buf.find(b"\x02", q + 1)
    return False
