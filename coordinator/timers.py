"""The coordinator's timers: typed keys and the one timer wheel.

A timer key is a frozen dataclass naming what the timer is for (a member's session, a group's join phase,
...). Its fields are never parsed back out of text, so a group or member id holding any character ("/",
"\\x00", ...) routes to its own group and member. Outside the coordinator (the admin API, logs, the list
`advance_clock` returns) a key is shown by its `name`: its kind and ids joined by "/", e.g.
"heartbeat/<group>/<member>" (display only: "a/b" + "c" and "a" + "b/c" render alike, route apart).

`TimerWheel` holds armed timers ordered by (deadline, arming sequence): of timers due at the same moment
the one armed first fires first, wherever the wheel is used (the runtime, `advance_clock`, the test
harness). Re-arming a key replaces its deadline and takes a new place in the order.

Re-arming a key later (a member's heartbeat moving its session deadline on) is a dict update: the heap keeps the
key's earlier entry, which stands for it until it reaches the top, and only then is the key queued again at its
deadline of that moment (as Kafka's timer replaces a heartbeat's task, in O(1), rather than re-sorting it).
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import ClassVar


class Timer:
    """Base of every key the one timer wheel holds: the group coordinator's (`TimerKey`) and the transaction
    coordinator's (transactions.py's `TxnTimeoutKey`). Hashable and ordered; shown by its `name`."""
    kind: ClassVar[str] = ""

    @property
    def parts(self) -> tuple[str, ...]:
        raise NotImplementedError

    @property
    def name(self) -> str:
        """The key as shown outside the coordinator: kind and ids joined by "/"."""
        return "/".join((self.kind, *self.parts))

    def __lt__(self, other: Timer) -> bool:         # a stable order, for listings and sorted output
        return (self.kind, self.parts) < (other.kind, other.parts)


@dataclass(frozen=True)
class TimerKey(Timer):
    """Base of every group timer key: the group it belongs to. A kind of key is a plain subclass of
    `TimerKey` or `_MemberTimer` naming its `kind` and adding no field: the base's dataclass methods (init,
    repr, eq - which compares the classes too -, hash, frozen fields) serve it, and building them again for each
    kind was ~0.3 ms of the server's start-up apiece."""
    group_id: str

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))

    def __hash__(self) -> int:
        """The hash of the key's ids, computed once per key (the timer wheel's and the shard's dicts hash a
        member's session key three times per heartbeat)."""
        try:
            return self._hash               # type: ignore[attr-defined]
        except AttributeError:
            h = hash((self.group_id,))
            object.__setattr__(self, "_hash", h)
            return h

    def __getstate__(self) -> dict:
        """A pickled key leaves its hash behind (a string's hash differs between processes)."""
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state


@dataclass(frozen=True)
class _MemberTimer(TimerKey):
    """A timer of one member of a group (the member timers' common key)."""

    member_id: str

    def __hash__(self) -> int:
        try:
            return self._hash               # type: ignore[attr-defined]
        except AttributeError:
            h = hash((self.group_id, self.member_id))
            object.__setattr__(self, "_hash", h)
            return h


class HeartbeatKey(_MemberTimer):
    """A member's session (T1, T2); for a new member, the new-member join timeout."""
    kind: ClassVar[str] = "heartbeat"


class PendingKey(_MemberTimer):
    """A member id handed out by the KIP-394 handshake, not yet joined with (J6)."""
    kind: ClassVar[str] = "pending"


class JoinKey(TimerKey):
    """The join phase: the initial delay (J12) or the rebalance timeout (J13)."""
    kind: ClassVar[str] = "join"


class SyncKey(TimerKey):
    """The sync phase: members that do not send SyncGroup in time are removed (J16)."""
    kind: ClassVar[str] = "sync"


class ExpansionKey(TimerKey):
    """The KIP-345 draft's expansion window (static_expansion_timeout_ms)."""
    kind: ClassVar[str] = "expansion"


class RegistrationKey(TimerKey):
    """The KIP-345 draft's registration timeout of offline static members."""
    kind: ClassVar[str] = "registration"


class ConsumerSessionKey(_MemberTimer):
    """A consumer group (KIP-848) member's session: no heartbeat before it fires fences the member."""
    kind: ClassVar[str] = "consumer-session"


class ConsumerRebalanceKey(_MemberTimer):
    """A consumer group member that must revoke partitions: not done before it fires, it is fenced."""
    kind: ClassVar[str] = "consumer-rebalance"


class ShareSessionKey(_MemberTimer):
    """A share group (KIP-932) member's session: no heartbeat before it fires removes the member."""
    kind: ClassVar[str] = "share-session"


class ConsumerJoinKey(_MemberTimer):
    """A classic member of a consumer group told to rejoin (REBALANCE_IN_PROGRESS): no JoinGroup within its
    rebalance timeout, it is fenced (coordinator/consumer/classic_members.py)."""
    kind: ClassVar[str] = "consumer-join"


class ConsumerSyncKey(_MemberTimer):
    """A classic member of a consumer group answered its JoinGroup: no SyncGroup within its rebalance timeout,
    it is fenced."""
    kind: ClassVar[str] = "consumer-sync"


class ConsumerHoldKey(TimerKey):
    """A new consumer group waiting for the members a test said it starts (`expect_group`): when it fires, the
    target assignment is computed for the members there (coordinator/consumer/expectation.py)."""
    kind: ClassVar[str] = "consumer-hold"


KEY_TYPES: dict[str, type[TimerKey]] = {
    cls.kind: cls for cls in (HeartbeatKey, PendingKey, JoinKey, SyncKey, ExpansionKey, RegistrationKey,
                              ConsumerSessionKey, ConsumerRebalanceKey, ShareSessionKey, ConsumerJoinKey,
                              ConsumerSyncKey, ConsumerHoldKey)}


class TimerWheel:
    """Armed timers by key, ordered by (deadline, arming sequence). Not thread-safe; no clock of its own:
    callers say what time it is.

    Every armed key has one entry in the heap that stands for it (`_queued`): its own (deadline, sequence) or an
    earlier one (the key was re-armed later since). The head is exact once its entry is the key's armed one: an
    earlier stand-in at the top is queued again at the key's deadline, a cancelled key's entry is dropped. So the
    order fired is exactly (deadline, arming sequence), while re-arming a key later costs no heap operation."""

    def __init__(self) -> None:
        self._armed: dict[Timer, tuple[int, int]] = {}      # key -> (deadline, sequence)
        self._queued: dict[Timer, tuple[int, int]] = {}     # key -> the heap entry standing for it
        self._heap: list[tuple[int, int, Timer]] = []       # may hold superseded entries (lazy deletion)
        self._seq = itertools.count()

    def arm(self, key: Timer, deadline_ms: int) -> None:
        entry = (deadline_ms, next(self._seq))
        self._armed[key] = entry
        queued = self._queued.get(key)
        if queued is not None and queued <= entry:          # its entry in the heap comes first: it stands for it
            return
        self._queued[key] = entry
        heapq.heappush(self._heap, (*entry, key))
        if len(self._heap) > 2 * len(self._armed) + 64:     # keys re-armed earlier leave stale entries: bound them
            self._rebuild()

    def _rebuild(self) -> None:
        self._heap = [(d, s, k) for k, (d, s) in self._armed.items()]
        heapq.heapify(self._heap)
        self._queued = dict(self._armed)

    def cancel(self, key: Timer) -> bool:
        """Disarm `key`; False if it was not armed."""
        return self._armed.pop(key, None) is not None

    def apply(self, op) -> None:
        """Apply one `TimerOp` (deadline None cancels)."""
        if op.deadline_ms is None:
            self.cancel(op.key)
        else:
            self.arm(op.key, op.deadline_ms)

    def deadline(self, key: Timer) -> int | None:
        entry = self._armed.get(key)
        return None if entry is None else entry[0]

    def _head(self) -> tuple[int, int, Timer] | None:
        heap, armed, queued = self._heap, self._armed, self._queued
        while heap:
            d, s, k = top = heap[0]
            if queued.get(k) != (d, s):                      # superseded by an earlier entry of its key
                heapq.heappop(heap)
                continue
            entry = armed.get(k)
            if entry == (d, s):
                return top
            if entry is None:                                # cancelled
                heapq.heappop(heap)
                del queued[k]
            else:                                            # re-armed later: queued again at its deadline
                queued[k] = entry
                heapq.heapreplace(heap, (*entry, k))
        return None

    def next_deadline(self) -> int | None:
        head = self._head()
        return None if head is None else head[0]

    def pop_due(self, now_ms: int) -> tuple[Timer, int] | None:
        """Disarm and return (key, deadline) of the first timer due by `now_ms`, or None."""
        head = self._head()
        if head is None or head[0] > now_ms:
            return None
        d, _, k = heapq.heappop(self._heap)
        del self._armed[k]
        del self._queued[k]
        return k, d

    def due(self, now_ms: int) -> list[Timer]:
        """The keys due by `now_ms`, in firing order (nothing is disarmed)."""
        return [k for _, _, k in sorted((d, s, k) for k, (d, s) in self._armed.items() if d <= now_ms)]

    def items(self) -> Iterator[tuple[Timer, int]]:
        """(key, deadline) of every armed timer (in no particular order)."""
        return ((k, d) for k, (d, _) in self._armed.items())

    def clear(self) -> None:
        self._armed.clear()
        self._queued.clear()
        self._heap.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._armed

    def __len__(self) -> int:
        return len(self._armed)

    def __iter__(self) -> Iterator[Timer]:
        return iter(self._armed)
