"""What `tenure serve` needs of the HTTP admin endpoint before it is ready: the endpoint's listening socket (bound
at start-up, so connections wait in its backlog) and whether its host is this machine's. The endpoint itself
(http_server.py: its routes, the table of controls they come from, aiohttp's web server) is imported on a thread of
its own, `import_in_thread`, after the Kafka listeners are up: the loop serves Kafka clients meanwhile, and the
endpoint answers once those imports are done."""
from __future__ import annotations

import asyncio
import errno
import importlib
import ipaddress
import socket
import sys
import threading
import time
from types import ModuleType

IMPORT_THREAD = "tenure-admin-import"


def is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_admin(host: str, port: int, *, fallback: bool = False) -> tuple[socket.socket, bool]:
    """The admin endpoint's listening socket, and whether it fell back: with `fallback` a `port` in use
    is replaced by a free one (tenure serve's default port). An ASCII host is resolved as its bytes (what the IDNA
    codec makes of it, without importing that codec), another name through IDNA."""
    name = (host.encode("ascii") if host.isascii() else host) if host else None

    def listen(p: int) -> socket.socket:
        family, *_, address = socket.getaddrinfo(name, p, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.create_server(address, family=family, backlog=128)
        sock.setblocking(False)
        return sock
    try:
        return listen(port), False
    except OSError as exc:
        if not (fallback and port and exc.errno == errno.EADDRINUSE):
            raise
    return listen(0), True


_importing: set[threading.Thread] = set()       # import threads still running (see imports_done)


async def imports_done(bound: float) -> None:
    """Wait (up to `bound` seconds, polling the loop) for the import threads still running. A server's stop waits
    for them: a process that exits while a thread is importing C extension modules (aiohttp's) may crash in the
    interpreter's finalization - `tenure serve` stopped ~60 ms after ready exited on SIGSEGV 4 times in 40."""
    deadline = time.monotonic() + bound
    while any(t.is_alive() for t in list(_importing)) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def import_in_thread(name: str) -> asyncio.Future[ModuleType]:
    """The module `name`, imported on a daemon thread (IMPORT_THREAD): the loop keeps serving Kafka clients
    meanwhile; a server's stop waits for it (`imports_done`), within its shutdown bound. Already imported: the module
    at once."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[ModuleType] = loop.create_future()
    if name in sys.modules:
        fut.set_result(sys.modules[name])
        return fut

    def settle(module, error) -> None:
        if fut.done():                        # cancelled: the server closed first
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(module)

    def run() -> None:
        try:
            module, error = importlib.import_module(name), None
        except BaseException as exc:          # handed to the loop, which logs it
            module, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, module, error)
        except RuntimeError:                  # the loop closed meanwhile: nobody waits any more
            pass
        finally:
            _importing.discard(threading.current_thread())
    thread = threading.Thread(target=run, name=IMPORT_THREAD, daemon=True)
    _importing.add(thread)
    thread.start()
    return fut
