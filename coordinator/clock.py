"""The coordinators' one clock and one timer wheel, shared by every coordinator runtime of a server (the group
coordinator's, the transaction coordinator's).

The clock is the wall clock plus what `advance_clock` added, and never passes CLOCK_MAX_MS. The wheel holds every
runtime's armed timers and fires them in (deadline, arming) order with one event-loop callback for the earliest
deadline; a fired timer goes to the runtime that registered its key type (`register`), so timers due together
fire in one order whatever runtime armed them, and one `advance_clock` moves every coordinator.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from time import time as _time

from .timers import Timer, TimerWheel

# The coordinator's clock never passes 9999-12-31T23:59:59.999Z: every timestamp tenure writes (commit and
# expiry times, record timestamps, timer deadlines: now + an int32 timeout) stays a valid date for any
# reader and far inside Kafka's int64 milliseconds, so no advance_clock can leave the coordinator unable
# to write its records.
CLOCK_MAX_MS = 253_402_300_799_999

_MAX_FIRED = 100_000                    # timers fired in one go: bounded, whatever re-arms itself in the past


class CoordinatorClock:
    """`now_ms()` is the coordinators' time; `set_timers` arms and cancels; `register(types, fire)` names the
    runtime that fires timers of those key types (`fire(key)`, called with the timer already disarmed)."""

    def __init__(self, wall_ms: Callable[[], int] | None = None) -> None:
        self._wall_ms = wall_ms             # None: the wall clock (read in `now_ms` itself: every request reads it)
        self.offset_ms = 0                  # advance_clock: the coordinators' time runs ahead of the wall
        self.timers = TimerWheel()
        self._owners: dict[type, Callable[[Timer], None]] = {}
        self._wakeup: asyncio.TimerHandle | None = None
        self._wakeup_at: int | None = None  # the deadline (coordinator ms) the loop callback waits for

    def now_ms(self) -> int:
        wall = self._wall_ms
        return (int(_time() * 1000) if wall is None else wall()) + self.offset_ms

    def register(self, key_types: Iterable[type], fire: Callable[[Timer], None]) -> None:
        for kind in key_types:
            if kind in self._owners:
                raise ValueError(f"timers of {kind.__name__} already have a runtime")
            self._owners[kind] = fire

    def set_timers(self, ops) -> None:
        """Apply a Result's timer changes (TimerOps) and keep the loop callback at or before the earliest
        deadline. A timer re-armed later or cancelled leaves the callback where it is (it may then wake early:
        `_wake` fires what is due and waits again for the earliest deadline), so a heartbeat moving its member's
        session deadline on neither walks the wheel nor touches the loop's timers; one armed before the callback
        (or with none waiting) moves it."""
        if not ops:
            return
        wheel, wakeup_at = self.timers, self._wakeup_at
        earlier = wakeup_at is None
        for op in ops:
            deadline = op.deadline_ms
            if deadline is None:
                wheel.cancel(op.key)
                continue
            wheel.arm(op.key, deadline)
            if not earlier and deadline < wakeup_at:
                earlier = True
        if earlier:
            self._schedule()

    def cancel_all(self, key_types: Iterable[type]) -> None:
        """Disarm every timer of these key types (a runtime that closes)."""
        kinds = set(key_types)
        for key in [k for k in self.timers if type(k) in kinds]:
            self.timers.cancel(key)

    def close(self) -> None:
        """No timer fires any more (the server stops)."""
        if self._wakeup is not None:
            self._wakeup.cancel()
        self._wakeup, self._wakeup_at = None, None
        self.timers.clear()

    # ------------------------------------------------------------------ firing
    def _schedule(self) -> None:
        """Keep the one loop callback waiting for the wheel's earliest deadline."""
        deadline = self.timers.next_deadline()
        if deadline == self._wakeup_at:
            return
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None
        self._wakeup_at = deadline
        if deadline is not None:
            loop = asyncio.get_running_loop()
            self._wakeup = loop.call_at(loop.time() + max(deadline - self.now_ms(), 0) / 1000.0, self._wake)

    def _wake(self) -> None:
        """The earliest deadline has come: fire every timer due by then, in the wheel's order."""
        due_by = max(self.now_ms(), self._wakeup_at or 0)
        self._wakeup, self._wakeup_at = None, None
        try:
            for _ in range(_MAX_FIRED):
                item = self.timers.pop_due(due_by)
                if item is None:
                    break
                self._fire(item[0])
        finally:
            self._schedule()                    # the timers after a failing one still fire

    def _fire(self, key: Timer) -> None:
        self._owners[type(key)](key)

    # ------------------------------------------------------------------ test controls (on the loop)
    def advance_clock(self, ms: int) -> list[str]:
        """Move the clock `ms` ahead: every timer due by then fires, in the wheel's order (deadline, then
        arming), each with the clock at its deadline (as if the time had passed; timers they arm that are due
        fire too), then the clock is `ms` ahead and the rest wait for their remaining time. Returns the names
        of the timers fired (`heartbeat/<group>/<member>`, ...)."""
        if isinstance(ms, bool) or not isinstance(ms, int):
            raise ValueError(f"ms must be a whole number of milliseconds, not {ms!r}")
        if ms < 0:
            raise ValueError("the clock only moves forward")
        room = CLOCK_MAX_MS - self.now_ms()
        if ms > room:
            raise ValueError(f"the coordinator's clock stops at 9999-12-31T23:59:59.999Z ({CLOCK_MAX_MS} ms): "
                             f"at most {max(room, 0)} ms more")
        start, base = self.now_ms(), self.offset_ms
        fired = []
        try:
            for _ in range(_MAX_FIRED):
                item = self.timers.pop_due(start + ms)
                if item is None:
                    break
                key, deadline = item
                self.offset_ms = max(self.offset_ms, base + deadline - start)
                fired.append(key.name)
                self._fire(key)
        finally:
            self.offset_ms = base + ms
            self._wakeup_at = -1                # the clock moved: re-arm the loop callback whatever it waits for
            self._schedule()
        return fired
