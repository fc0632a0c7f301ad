"""Rate-limited log lines: what a client can trigger at will (bad input, refused connections, accept
failures) must not flood the log.

`RateLimitedLog.log(kind, level, msg, *args)` logs the first `burst` lines of a kind in a window of
`window_s` seconds; later lines of that kind in the same window are counted, not logged, and when the
window ends one line says how many were suppressed. Call on the server's event loop (the summary is a
loop timer); `close()` logs any pending summary at once.
"""
from __future__ import annotations

import asyncio
import logging
import time


class _Window:
    """One kind's current window: when it started, the lines logged and suppressed in it, the highest level
    suppressed, the timer of its summary. A plain class: a dataclass's generated methods were never used and its
    build cost ~0.4 ms of every server's start-up."""

    __slots__ = ("started", "logged", "suppressed", "level", "timer")

    def __init__(self, started: float) -> None:
        self.started = started
        self.logged = 0
        self.suppressed = 0
        self.level = logging.NOTSET
        self.timer: asyncio.TimerHandle | None = None


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, window_s: float = 10.0, burst: int = 5) -> None:
        if window_s <= 0 or burst < 1:
            raise ValueError("a log window must be positive and let at least one line through")
        self.logger = logger
        self.window_s = window_s
        self.burst = burst
        self._windows: dict[str, _Window] = {}

    def log(self, kind: str, level: int, msg: str, *args, burst: int | None = None) -> bool:
        """Log `msg % args` unless this kind's window is used up (`burst` lines, default the instance's);
        True if it was logged."""
        now = time.monotonic()
        w = self._windows.get(kind)
        if w is None or now - w.started >= self.window_s:
            if w is not None:
                self._summarise(kind)
            w = self._windows[kind] = _Window(now)
        if w.logged < (self.burst if burst is None else burst):
            w.logged += 1
            self.logger.log(level, msg, *args)
            return True
        w.suppressed += 1
        w.level = max(w.level, level)
        if w.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None                     # no loop: the summary comes with the next line or close()
            if loop is not None:
                w.timer = loop.call_later(max(0.0, w.started + self.window_s - now), self._summarise, kind)
        return False

    def _summarise(self, kind: str) -> None:
        w = self._windows.pop(kind, None)
        if w is None:
            return
        if w.timer is not None:
            w.timer.cancel()
        if w.suppressed:
            self.logger.log(w.level, "%s: %d more line(s) like the above suppressed in %.1fs", kind, w.suppressed,
                            self.window_s)

    def close(self) -> None:
        for kind in list(self._windows):
            self._summarise(kind)
