"""Python's automatic garbage collection held off while a heavy request is served, and a started server's
long-lived objects kept out of the later collections (`freeze_started`). A leaf module every layer may import.

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

`tenure serve`, once its server has started (its modules imported, the server built, its logs recovered and its
coordinator partitions loaded), moves every object alive then to the permanent generation (`gc.freeze()`, Python's
documented way to keep long-lived start-up objects out of every later collection; `freeze_started`): ~100,000
objects that each full (generation 2) collection walked for nothing - a full collection in the middle of 10,000
heartbeats/s held the loop ~25 ms. A frozen object is still freed by reference counting as any other; only cyclic
garbage alive at that moment is kept. The objects a later pause made go to the permanent generation too (rather
than the oldest, which would unfreeze the start-up's). A `ServerThread` does not freeze: the process is its test's.
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0                 # heavy steps in progress
_was_enabled = False       # whether collection was on when the first of them began
_frozen = False            # freeze_started() froze this process's objects (the permanent generation is ours)


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
    kept from collection - cyclic garbage among them is collected by the next full collection. After
    `freeze_started` the permanent generation is ours: what the pause made joins it (unfreezing would put the
    start-up's objects back in the walks). Not done when something else has frozen objects (its freeze is left
    alone)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
    elif _frozen:
        gc.freeze()


def freeze_started() -> None:
    """The server's process has started (see the module's docs): every object alive now is moved to the permanent
    generation, out of every later collection. For the process that runs a server, once it is ready (`tenure
    serve`; again after a restart through the admin endpoint); a freeze of someone else's is not followed."""
    global _frozen
    with _lock:
        if gc.get_freeze_count() and not _frozen:
            return
        gc.freeze()
        _frozen = True


def paused() -> bool:
    """Whether a heavy step holds collection off now."""
    return _depth > 0
