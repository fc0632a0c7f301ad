"""The server shell: the listener, its connections, and the server's lifecycle (start, recover, drain, stop).

`Server` runs on an asyncio loop; `ServerThread` / `AsyncServerThread` run one in a thread for tests."""
from typing import TYPE_CHECKING, Any

from tenure.gcpause import gc_paused

# The server's modules are imported with automatic garbage collection held off: the import makes ~43,000 long-lived
# objects the collector tracks (classes, functions, tables) and next to no garbage, and the ~75 collections of the
# young generations it set off walked them for nothing (6-10 ms of CPU, about a fifteenth of the import); what it
# made is moved to the oldest generation at the end, as after a heavy request (tenure/gcpause.py).
with gc_paused():
    from tenure.server.lifecycle import Server, StartupError, reopen
    from tenure.server.listener import raise_fd_limit

if TYPE_CHECKING:
    from tenure.server.thread import AsyncServerThread, ServerThread

# `ServerThread` and `AsyncServerThread` (thread.py, with the table of controls their methods are made from,
# tenure/control/registry.py: ~4 ms) are imported, as quietly, the first time either name is asked of this package
# (`from tenure.server import ServerThread`); `tenure serve` runs a `Server` and imports neither.
_THREADS = ("AsyncServerThread", "ServerThread")


def __getattr__(name: str) -> Any:
    if name not in _THREADS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with gc_paused():
        from tenure.server import thread
    for each in _THREADS:
        globals()[each] = getattr(thread, each)         # from now on, plain attribute lookup
    return globals()[name]


__all__ = ["AsyncServerThread", "Server", "ServerThread", "StartupError", "raise_fd_limit", "reopen"]
