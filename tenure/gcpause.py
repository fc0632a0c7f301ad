"""Python's automatic garbage collection held off while a heavy request is served. A leaf module every layer may
import.

A full (generation 2) collection walks every live container object and cannot be interrupted: while a request
of 100,000 ids is answered, its 200,000 answer objects make each such pass take 50-350 ms of the one event loop
(measured on a loaded 2-core machine, bench/amplification.py --stalls), and the growing answer triggers several.
Those objects are freed by reference counting when the answer has left (they hold no cycles), so nothing is
lost by not collecting while they are built: `gc_paused()` turns automatic collection off for as long as any
heavy request is in a step that builds objects (its decoding, its chunks: tenure/server/offload.py,
coordinator/runtime.py) or a coordinator partition is loaded (coordinator/loader.py: about one object per
record read, most of them freed as a later record of their key replaces them), and back on (if it was on) when
the last one ends, what was made meanwhile moved to the
oldest generation without a walk (`_promote`). Cyclic garbage made meanwhile is collected by the next full
collection.
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0                 # heavy steps in progress
_was_enabled = False       # whether collection was on when the first of them began


@contextmanager
def gc_paused() -> Iterator[None]:
    """Automatic collection off inside (nestable, from any thread); as it was before once every pause ended."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _promote()
                if _was_enabled:
                    gc.enable()


def _promote() -> None:
    """Move what the pause made (all of it young: a collection of the young generation would walk every object
    of the answer at once, 40-90 ms of the loop) to the oldest generation without walking it: `gc.freeze()`
    splices every generation into the permanent one, `gc.unfreeze()` splices that into the oldest. Nothing is
    kept from collection - cyclic garbage among them is collected by the next full collection. Not done when
    something else has frozen objects (its freeze is left alone)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def paused() -> bool:
    """Whether a heavy step holds collection off now."""
    return _depth > 0
