"""Share partitions (KIP-932): what a share group has done with one topic-partition's records, and the share
sessions its members fetch through. The handlers are share_apis.py's; the records come from the one read path
(replica_manager.py), so a share consumer reads what a consumer would, up to the high watermark or, for a
group whose `share.isolation.level` is read_committed, the last stable offset without aborted transactions.

A share partition has a start offset (Kafka's SPSO: every record below it is done), an end (one past the last
record ever acquired, Kafka's SPEO + 1) and, between them, the in-flight records, each AVAILABLE, ACQUIRED (by
one member, until its acquisition lock's deadline), ACKNOWLEDGED or ARCHIVED, with its delivery count. A fetch
acquires available records first (redeliveries, in offset order), then new ones from the end, never more than
`MAX_IN_FLIGHT` past the start; an acknowledgement accepts (ACKNOWLEDGED), releases (AVAILABLE again - ARCHIVED
once the delivery count has reached the limit), rejects (ARCHIVED), marks a gap (ARCHIVED: no record there) or
renews the lock; the start moves over records that are done. Locks are read against the coordinators' clock
(`now_ms`): a lock whose deadline has passed is released as if the member had released the record, the next time
the partition is looked at, so advancing the clock expires locks without any wait.

The state is persisted through the share coordinator (`ShareStateSide`): after each request, the records whose
state or delivery count changed are written as Kafka's SharePartition writes them (`pending_write`), and a share
partition used first after a start reads its state back (`restore`; see docs/share-groups.md).
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tenure.protocol.errors import ErrorCode
from tenure.protocol.share_group import ACCEPT, GAP, REJECT, RELEASE, RENEW
from tenure.storage.batch import BatchHeader, InvalidBatch, parse_batches

# Kafka's RecordState ids
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
STATE_NAMES = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}

# Kafka's broker defaults (a group's own: its share.delivery.count.limit, share.partition.max.record.locks)
DELIVERY_COUNT_LIMIT = 5            # group.share.delivery.count.limit
MAX_IN_FLIGHT = 2000                # group.share.partition.max.record.locks
INVALID_RECORD_STATE = 121


class AckError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class InFlight:
    state: int
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True)
class InFlightView:
    """One in-flight record as the test controls show it."""
    offset: int
    state: str
    delivery_count: int
    member_id: str | None
    lock_deadline_ms: int | None


@dataclass
class SharePartition:
    group_id: str
    topic: str
    index: int
    start: int
    end: int
    records: dict[int, InFlight] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None   # the topic's id when made (a topic deleted and made again is another)
    persisted: bool = False             # written to (or read from) the share coordinator at least once
    # records whose state or delivery count changed since the last write: offset -> (state, count) as written
    changed: dict[int, tuple[int, int]] = field(default_factory=dict)
    written_start: int = -1             # the start offset the next write carries (-1: the start now)

    # ------------------------------------------------------------------ persisted state
    def restore(self, start: int, batches: Iterable[tuple[int, int, int, int]]) -> None:
        """The state read back from the share coordinator: the start offset and each batch's records with their
        delivery state and count (a record that was acquired when it was written comes back available); an
        offset between the start and the last batch that no batch names is available, never delivered (as
        Kafka's share partition fetches the gaps of the state it read)."""
        self.start = self.end = start
        for first, last, state, count in batches:
            for off in range(max(first, start), last + 1):
                self.records[off] = InFlight(state if state in (ACKNOWLEDGED, ARCHIVED) else AVAILABLE, count)
                self.end = max(self.end, off + 1)
        for off in range(start, self.end):       # a gap in the state (Kafka's gap window): never delivered yet
            self.records.setdefault(off, InFlight(AVAILABLE, 0))
        self._advance()
        self.persisted, self.written_start = True, self.start
        self.changed.clear()

    def pending_write(self) -> tuple[int, tuple[tuple[int, int, int, int], ...]] | None:
        """The write to the share coordinator that the changes since the last one make, as Kafka's
        SharePartition writes (writeShareGroupState): the start offset as it stood before these changes (the
        start moves once a write is done, so the next write carries where it moved) and a state batch for each
        run of consecutive records changed with one state and delivery count - ACKNOWLEDGED, ARCHIVED (a reject,
        a gap, a release or lock expiry at the delivery limit) or AVAILABLE (a release, a lock expiry) with the
        count. An acquisition is written too, the record available with its new count (after a crash it is
        delivered again, that delivery counted). None: nothing to write (a share partition never written writes
        its start, Kafka's initialization)."""
        if self.persisted and not self.changed:
            return None
        start = self.start if self.written_start < 0 else self.written_start
        out: list[tuple[int, int, int, int]] = []
        for off in sorted(self.changed):
            state, count = self.changed[off]
            if out and out[-1][1] == off - 1 and out[-1][2:] == (state, count):
                out[-1] = (out[-1][0], off, state, count)
            else:
                out.append((off, off, state, count))
        return start, tuple(out)

    def written(self) -> None:
        """The pending write is on its way: later changes make the next one, which carries the start now."""
        self.persisted, self.written_start = True, self.start
        self.changed.clear()

    def _note(self, off: int, r: InFlight) -> None:
        self.changed[off] = (AVAILABLE if r.state == ACQUIRED else r.state, r.delivery_count)

    # ------------------------------------------------------------------ the lock clock
    def expire(self, now_ms: int, limit: int) -> bool:
        """Release every record whose lock has passed (archived at the delivery limit); True if any did."""
        freed = False
        for off, r in self.records.items():
            if r.state == ACQUIRED and r.deadline_ms <= now_ms:
                self._release(r, limit)
                self._note(off, r)
                freed = True
        if freed:
            self._advance()
        return freed

    def cut(self, log_start: int) -> None:
        """Records below the log's start are gone (retention, DeleteRecords): the start follows."""
        if self.start < log_start:
            for off in [o for o in self.records if o < log_start]:
                del self.records[off]
            self.start = log_start
            self.end = max(self.end, log_start)
            if self.written_start >= 0:        # Kafka's start moves with the log's at once: the next write says so
                self.written_start = max(self.written_start, log_start)

    # ------------------------------------------------------------------ acquiring
    def first_available(self) -> int:
        """Where a fetch reads from: the first available in-flight record, else the end."""
        return min((o for o, r in self.records.items() if r.state == AVAILABLE), default=self.end)

    def acquire(self, member_id: str, data: bytes, aborted: list[tuple[int, int]] | None, max_records: int,
                strict: bool, now_ms: int, lock_ms: int,
                max_in_flight: int = MAX_IN_FLIGHT) -> tuple[list[tuple[int, int, int]], bytes]:
        """Acquire records of the batches `data` (whole batches from the read path) for `member_id`: up to
        `max_records` (a whole batch may go past it unless `strict`), never past `max_in_flight` from the start.
        Control batches and, read_committed (`aborted` not None), aborted transactions' batches are archived,
        never delivered. Returns the acquired ranges (first, last, delivery count) and the batches holding
        them."""
        try:
            headers = parse_batches(data, verify_crc=False)
        except InvalidBatch:
            return [], b""
        pending = sorted(aborted or [], key=lambda a: a[1])
        aborting: set[int] = set()
        acquired: list[tuple[int, int]] = []
        chunks: list[bytes] = []
        view = memoryview(data)
        for h in headers:
            if h.last_offset < self.start:
                continue
            if len(acquired) >= max_records:
                break
            if h.base_offset >= self.end:
                if self.end - self.start >= max_in_flight:
                    break                          # no room for more records in flight
                self.end = h.base_offset           # offsets the log does not hold (compacted away) are skipped
            while pending and pending[0][1] <= h.base_offset:
                aborting.add(pending.pop(0)[0])
            if h.is_control or (aborted is not None and h.is_transactional and h.producer_id in aborting):
                if h.is_control:
                    aborting.discard(h.producer_id)
                self._skip(h, max_in_flight)
                continue
            if self._acquire_batch(h, member_id, acquired, max_records, strict, now_ms, lock_ms, max_in_flight):
                chunks.append(bytes(view[h.position:h.position + h.size]))
        self._advance()
        return _ranges(acquired), b"".join(chunks)

    def _acquire_batch(self, h: BatchHeader, member_id: str, acquired: list[tuple[int, int]], max_records: int,
                       strict: bool, now_ms: int, lock_ms: int, max_in_flight: int) -> bool:
        took = False
        for off in range(max(h.base_offset, self.start), h.last_offset + 1):
            if strict and len(acquired) >= max_records:
                break
            r = self.records.get(off)
            if off >= self.end:
                if off - self.start >= max_in_flight:
                    break
                r = self.records[off] = InFlight(AVAILABLE)
                self.end = off + 1
            elif r is None or r.state != AVAILABLE:
                continue
            r.state, r.delivery_count, r.member_id, r.deadline_ms = ACQUIRED, r.delivery_count + 1, member_id, \
                now_ms + lock_ms
            self._note(off, r)
            acquired.append((off, r.delivery_count))
            took = True
        return took

    def _skip(self, h: BatchHeader, max_in_flight: int) -> None:
        """A batch no consumer gets (a transaction marker, an aborted transaction's records): done."""
        for off in range(max(h.base_offset, self.start), h.last_offset + 1):
            if off >= self.end:
                if off - self.start >= max_in_flight:
                    return
                self._note(off, self.records.setdefault(off, InFlight(ARCHIVED)))
                self.end = off + 1
            else:
                r = self.records.get(off)
                if r is not None and r.state == AVAILABLE:
                    r.state = ARCHIVED
                    self._note(off, r)

    # ------------------------------------------------------------------ acknowledging
    def acknowledge(self, member_id: str, batches: list[tuple[int, int, list[int]]], now_ms: int, lock_ms: int,
                    limit: int) -> bool:
        """Apply one partition's acknowledgement batches, all or nothing: each offset must be in flight and
        acquired by `member_id` (INVALID_RECORD_STATE otherwise; the batches' shape is checked by the caller).
        Returns True if records became available (fetchers to wake)."""
        changes: list[tuple[int, InFlight, int]] = []
        for first, last, types in batches:
            for off in range(first, last + 1):
                r = self.records.get(off)
                kind = types[0] if len(types) == 1 else types[off - first]
                if r is None or r.state != ACQUIRED or r.member_id != member_id:
                    if kind == GAP and r is None and self.start <= off < self.end:
                        continue
                    held = "not in flight" if r is None else (
                        f"{STATE_NAMES[r.state]}" if r.state != ACQUIRED else "acquired by another member")
                    raise AckError(INVALID_RECORD_STATE, f"The record at offset {off} is {held}.")
                changes.append((off, r, kind))
        freed = False
        for off, r, kind in changes:
            if kind == ACCEPT:
                r.state, r.member_id = ACKNOWLEDGED, None
            elif kind in (REJECT, GAP):
                r.state, r.member_id = ARCHIVED, None
            elif kind == RELEASE:
                self._release(r, limit)
                freed |= r.state == AVAILABLE
            elif kind == RENEW:
                r.deadline_ms = now_ms + lock_ms
                continue
            self._note(off, r)
        self._advance()
        return freed

    def release_member(self, member_id: str, limit: int) -> bool:
        """A member's share session closed: every record it holds is released."""
        freed = False
        for off, r in self.records.items():
            if r.state == ACQUIRED and r.member_id == member_id:
                self._release(r, limit)
                self._note(off, r)
                freed = True
        self._advance()
        return freed

    @staticmethod
    def _release(r: InFlight, limit: int) -> None:
        r.state = ARCHIVED if r.delivery_count >= limit else AVAILABLE
        r.member_id, r.deadline_ms = None, 0

    def _advance(self) -> None:
        while self.start < self.end:
            r = self.records.get(self.start)
            if r is not None and r.state not in (ACKNOWLEDGED, ARCHIVED):
                return
            self.records.pop(self.start, None)
            self.start += 1

    def view(self) -> list[InFlightView]:
        return [InFlightView(o, STATE_NAMES[r.state], r.delivery_count, r.member_id,
                             r.deadline_ms if r.state == ACQUIRED else None)
                for o, r in sorted(self.records.items())]


def _ranges(acquired: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Consecutive offsets with one delivery count as (first, last, delivery count)."""
    out: list[tuple[int, int, int]] = []
    for off, count in acquired:
        if out and out[-1][1] == off - 1 and out[-1][2] == count:
            out[-1] = (out[-1][0], off, count)
        else:
            out.append((off, off, count))
    return out


def check_batches(batches: Iterable, renew_allowed: bool) -> list[tuple[int, int, list[int]]]:
    """The acknowledgement batches of one partition as (first, last, types), checked as Kafka checks them:
    first <= last, ascending and not overlapping, one type for the whole range or one per offset, each type
    one of Kafka's (renew only from v2). AckError(INVALID_REQUEST) otherwise."""
    out: list[tuple[int, int, list[int]]] = []
    top = max(ACCEPT, GAP, REJECT, RELEASE, RENEW if renew_allowed else REJECT)
    prev = -1
    for b in batches:
        first, last, types = b.first_offset, b.last_offset, list(b.acknowledge_types or [])
        if first < 0 or last < first:
            raise AckError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledgement range {first}-{last}.")
        if first <= prev:
            raise AckError(ErrorCode.INVALID_REQUEST, "Acknowledgement batches overlap or are out of order.")
        if not types or (len(types) != 1 and len(types) != last - first + 1):
            raise AckError(ErrorCode.INVALID_REQUEST,
                           f"{len(types)} acknowledge types for the {last - first + 1} offsets {first}-{last}.")
        if any(t < 0 or t > top for t in types):
            raise AckError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type in {types[:8]}.")
        prev = last
        out.append((first, last, types))
    return out


@dataclass
class ShareSession:
    """A member's share session with one broker: its next epoch and the partitions it fetches."""
    epoch: int = 1
    partitions: dict[tuple[uuid.UUID, int], tuple[str, int]] = field(default_factory=dict)  # (topic id, p) -> (name, p)

    def bump(self) -> None:
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1


class ShareStateSide(Protocol):
    """Where share partitions' state is persisted (the share coordinator over __share_group_state, wired in by
    tenure/server/build.py): `read` a share partition's (start offset, batches) or None, `write` a start offset
    and the batches that changed (combined over the state there) and wait until durable (False: the writer
    failed), `delete` them. A batch is (first, last, state - 0 available, 2 acknowledged,
    4 archived -, delivery count)."""

    async def ready(self) -> None: ...            # returns once no shard of the share coordinator is loading

    def partition_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int: ...   # its state's partition

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, tuple] | None: ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int,
                    batches: tuple) -> bool: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool: ...

    def partitions_of(self, group_id: str) -> list[tuple[uuid.UUID, int]]: ...

    # the share coordinator's APIs, asked by brokers (InitializeShareGroupState ... ReadShareGroupStateSummary)
    def refusal(self, group_id: str, topic_id: uuid.UUID, partition: int, broker_id: int | None) -> int: ...

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> int: ...

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         leader_epoch: int) -> tuple[int, Any]: ...

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int, batches: tuple) -> int: ...

    def summary(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> tuple[int, Any]: ...


class ShareState:
    """Every share partition and share session of the server (the broker's `shares`)."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions: dict[tuple[int, str, str], ShareSession] = {}      # (broker, group, member) -> session
        self.writing: set = set()        # writes of share state no answer waits for (tasks kept until done)

    def partition(self, group_id: str, topic: str, index: int) -> SharePartition | None:
        return self.partitions.get((group_id, topic, index))

    def open(self, group_id: str, topic: str, index: int, start: int,
             topic_id: uuid.UUID | None = None) -> SharePartition:
        key = (group_id, topic, index)
        sp = self.partitions.get(key)
        if sp is None:
            sp = self.partitions[key] = SharePartition(group_id, topic, index, start, start, topic_id=topic_id)
        return sp

    def of_group(self, group_id: str) -> list[SharePartition]:
        return [sp for (g, _, _), sp in sorted(self.partitions.items()) if g == group_id]

    def drop(self, group_id: str, topic: str, index: int) -> None:
        self.partitions.pop((group_id, topic, index), None)

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[1] == topic]:
            del self.partitions[key]
