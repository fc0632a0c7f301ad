"""The one place that chooses the server's event loop: uvloop's when it is installed (a libuv loop: its sockets,
transports and timers are C, which takes a third off the CPU a small request costs over a socket - see
docs/benchmarks.md), asyncio's own otherwise or when asked (`--event-loop asyncio`, `ServerThread(event_loop=
"asyncio")`, or TENURE_EVENT_LOOP=asyncio in the environment, which `--event-loop auto` follows).

`tenure serve` runs its server with `run(coro, choice)`; `ServerThread` makes its loop with `new_event_loop(choice)`.
A server started on a loop someone else made (a pytest-asyncio test's) runs on that loop; the server names the
loop it runs on in its start-up log (`describe`)."""
from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

ENV = "TENURE_EVENT_LOOP"            # auto (default), uvloop or asyncio: what --event-loop auto follows
CHOICES = ("auto", "uvloop", "asyncio")
T = TypeVar("T")


def resolve(choice: str = "auto") -> str:
    """The loop `choice` means here: "uvloop" or "asyncio". auto: the environment's TENURE_EVENT_LOOP if set, else
    uvloop when importable. uvloop asked for and not installed is an error (ValueError), as is an unknown name."""
    if choice == "auto":
        choice = os.environ.get(ENV, "").strip().lower() or "auto"
        if choice == "auto":
            return "uvloop" if _uvloop() is not None else "asyncio"
    if choice not in CHOICES:
        raise ValueError(f"unknown event loop {choice!r} (auto, uvloop or asyncio; {ENV})")
    if choice == "uvloop" and _uvloop() is None:
        raise ValueError("the uvloop event loop is asked for but uvloop is not installed (pip install uvloop)")
    return choice


def loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a new loop of `choice` (resolved as `resolve` does)."""
    if resolve(choice) == "uvloop":
        uvloop = _uvloop()
        assert uvloop is not None
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def new_event_loop(choice: str = "auto") -> asyncio.AbstractEventLoop:
    return loop_factory(choice)()


def run(coro: Coroutine[Any, Any, T], choice: str = "auto") -> T:
    """asyncio.run(coro) on a new loop of `choice`."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(coro)


def describe(loop: asyncio.AbstractEventLoop) -> str:
    """The loop's kind as the start-up log names it: "uvloop 0.23.0" or "asyncio (SelectorEventLoop)"."""
    module = type(loop).__module__
    if module.startswith("uvloop"):
        uvloop = _uvloop()
        return f"uvloop {getattr(uvloop, '__version__', '?')}"
    return f"asyncio ({type(loop).__name__})"


def _uvloop():
    """The uvloop module, imported on first use (not at `import tenure.server`), or None if it is not installed."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def preload() -> None:
    """Import uvloop now if the environment's choice may take it (ServerThread's module does this when it is
    imported: once per process, rather than inside the first server's start, which a test fixture waits for)."""
    if os.environ.get(ENV, "").strip().lower() in ("", "auto", "uvloop"):
        _uvloop()
