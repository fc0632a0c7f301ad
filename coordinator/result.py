"""What the coordinator shard takes in and gives back: the context of a request (protocol/context.py), the Result of an input
(responses, records, timer changes), and the events the shard replays - the only way its state changes.

Every change to coordinator state is an event applied by `GroupShard.replay`, after the handler
that produced it has returned (a handler that raises changes nothing). Two kinds:
- records (`tenure.protocol.records`): Kafka's __consumer_offsets records, persisted and replayed on
  load; replaying them alone gives the state Kafka itself would load (a group with members is Stable);
- `GroupSnapshot`: the full in-memory value of one group after a handler's change (state, members with
  all their protocols, pending members...). It is a full-value upsert, never a delta, so replaying the
  whole event stream reproduces the live coordinator exactly. Snapshots are not persisted: what Kafka
  keeps only in memory (a PreparingRebalance group, its joined members, its parked requests) stays in
  memory here too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from tenure.protocol.context import RequestContext  # noqa: F401 - what every handler takes

from .timers import Timer

if TYPE_CHECKING:
    from .kinds import Group


@dataclass(frozen=True)
class GroupSnapshot:
    """Install `group` (a full value) as the state of `group_id`; None removes the group."""
    group_id: str
    group: Group | None


class TimerOp:
    """One timer change of a Result: arm `key` at `deadline_ms`, or cancel it (`deadline_ms` None). Never changed
    once made (a plain class with slots: a heartbeat makes one, and a frozen dataclass's constructor cost twice
    as much); equal by value, as a tuple of its fields."""
    __slots__ = ("key", "deadline_ms")

    def __init__(self, key: Timer, deadline_ms: int | None) -> None:
        self.key = key                    # a typed key (coordinator.timers)
        self.deadline_ms = deadline_ms    # None cancels

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TimerOp):
            return NotImplemented
        return self.key == other.key and self.deadline_ms == other.deadline_ms

    def __hash__(self) -> int:
        return hash((self.key, self.deadline_ms))

    def __repr__(self) -> str:
        return f"TimerOp(key={self.key!r}, deadline_ms={self.deadline_ms!r})"


class Result:
    """What one input produced: responses (by request token, possibly for other parked requests),
    durable records to append before any response leaves, and timer changes. `events` is what the shard
    replays once the handler has returned: the records and the group snapshots, in the order made.
    `rebalances`: (group id, cause) of each rebalance this input started, for metrics and inspection, not state;
    `notes`: (group id, text) the runtime logs, what a test would want to know happened, not state.

    A plain class with slots (every request makes one: a dataclass's default factories cost a third more);
    equal by its fields."""
    __slots__ = ("responses", "records", "events", "timers", "rebalances", "notes")
    _FIELDS: ClassVar[tuple[str, ...]] = __slots__

    def __init__(self, responses: list[tuple[int, object]] | None = None, records: list | None = None,
                 events: list | None = None, timers: list[TimerOp] | None = None,
                 rebalances: list[tuple[str, str]] | None = None, notes: list[tuple[str, str]] | None = None) -> None:
        self.responses: list[tuple[int, object]] = [] if responses is None else responses
        self.records: list = [] if records is None else records
        self.events: list = [] if events is None else events
        self.timers: list[TimerOp] = [] if timers is None else timers
        self.rebalances: list[tuple[str, str]] = [] if rebalances is None else rebalances
        self.notes: list[tuple[str, str]] = [] if notes is None else notes

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._FIELDS)

    __hash__ = None  # type: ignore[assignment]   # mutable, as the dataclass it was

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS) + ")"

    def respond(self, token: int, body: object) -> None:
        self.responses.append((token, body))

    def emit(self, record) -> None:
        """A durable record: appended to the log, then replayed."""
        self.records.append(record)
        self.events.append(record)

    def emit_all(self, records: list) -> None:
        """`emit` each of `records`, in order."""
        self.records.extend(records)
        self.events.extend(records)

    def install(self, group_id: str, group: Group | None) -> None:
        """A group's new full value (None: gone), replayed as a `GroupSnapshot`, never persisted."""
        self.events.append(GroupSnapshot(group_id, group))

    def set_timer(self, key: Timer, deadline_ms: int) -> None:
        self.timers.append(TimerOp(key, deadline_ms))

    def cancel_timer(self, key: Timer) -> None:
        self.timers.append(TimerOp(key, None))

    def merge(self, other: Result) -> None:
        self.responses += other.responses
        self.records += other.records
        self.events += other.events
        self.timers += other.timers
        self.rebalances += other.rebalances
        self.notes += other.notes
