"""Work too heavy for one turn of the event loop, run on a worker thread while the loop serves everyone else.

One event loop serves every client, so a request whose decoding or whose answer's encoding takes a second
(a ConsumerGroupDescribe of 100,000 ids: a 6 MiB answer) would hold every other client for that second.
The connection decodes a heavy request (`heavy_request`, protocol/codec.py) and the dispatcher encodes a heavy
answer (`heavy_answer`) here instead: on one worker thread, one job at a time, the loop awaiting the result.
Both are pure functions of bytes and of an answer nothing changes any more, so the bytes are those the loop
would have made. The worker holds the GIL while it runs Python code; the interpreter hands it to the loop at
least every switch interval (5 ms), so the others wait a few switch intervals rather than the whole job.
"""
from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tenure.gcpause import gc_paused
from tenure.protocol.codec import heavy_answer, heavy_request

__all__ = ["heavy_answer", "heavy_request", "off_loop"]

T = TypeVar("T")

_executor: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _worker() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tenure-offload")
        return _executor


SWITCH_INTERVAL_S = 0.001     # the GIL's switch interval while a job runs (Python's default: 0.005)


def _paused(fn: Callable[..., T], *args) -> T:
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, SWITCH_INTERVAL_S))   # the loop waits at most this for the GIL meanwhile
    try:
        with gc_paused():              # no full collection from this thread's allocations (tenure/gcpause.py)
            return fn(*args)
    finally:
        sys.setswitchinterval(before)


async def off_loop(fn: Callable[..., T], *args) -> T:
    """`fn(*args)` on the worker thread, with automatic garbage collection held off; its result, or its
    exception raised here."""
    return await asyncio.get_running_loop().run_in_executor(_worker(), _paused, fn, *args)
