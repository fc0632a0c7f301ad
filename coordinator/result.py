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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tenure.protocol.context import RequestContext  # noqa: F401 - what every handler takes

from .timers import Timer

if TYPE_CHECKING:
    from .kinds import Group


@dataclass(frozen=True)
class GroupSnapshot:
    """Install `group` (a full value) as the state of `group_id`; None removes the group."""
    group_id: str
    group: Group | None


@dataclass(frozen=True)
class TimerOp:
    key: Timer             # a typed key (coordinator.timers)
    deadline_ms: int | None   # None cancels


@dataclass
class Result:
    """What one input produced: responses (by request token, possibly for other parked requests),
    durable records to append before any response leaves, and timer changes. `events` is what the shard
    replays once the handler has returned: the records and the group snapshots, in the order made."""
    responses: list[tuple[int, object]] = field(default_factory=list)
    records: list = field(default_factory=list)
    events: list = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    # (group id, cause) of each rebalance this input started: for metrics and inspection, not state
    rebalances: list[tuple[str, str]] = field(default_factory=list)
    # (group id, text) the runtime logs: what a test would want to know happened, not state
    notes: list[tuple[str, str]] = field(default_factory=list)

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
