"""Connections already waiting on a listening socket are accepted at once, without the loop turn uvloop's
sock_accept takes per connection (a burst of connections would otherwise wait for the loop to serve everyone
else once per connection); the next one is waited for through the loop."""
from __future__ import annotations

import asyncio
import socket

from tenure.server import eventloop
from tenure.server.listener import accept, listen


def test_waiting_connections_are_taken_without_the_loop_and_the_next_is_waited_for():
    async def run() -> tuple[int, int, bool]:
        loop = asyncio.get_running_loop()
        calls = 0
        real = loop.sock_accept

        async def counting(sock):
            nonlocal calls
            calls += 1
            return await real(sock)
        loop.sock_accept = counting                  # type: ignore[method-assign]
        (server,) = listen("127.0.0.1", 0)
        port = server.getsockname()[1]
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        taken = [await accept(loop, server) for _ in range(3)]
        before = calls
        later = asyncio.ensure_future(accept(loop, server))
        await asyncio.sleep(0.05)
        assert not later.done()                      # none waiting: it waits through the loop
        clients.append(socket.create_connection(("127.0.0.1", port)))
        conn, _ = await asyncio.wait_for(later, 5)
        taken.append((conn, None))
        blocking = any(c.getblocking() for c, _ in taken)
        for c, _ in taken:
            c.close()
        for c in clients:
            c.close()
        server.close()
        return before, calls, blocking
    for kind in ("uvloop", "asyncio"):
        before, calls, blocking = eventloop.run(run(), kind)
        assert (before, calls, blocking) == (0, 1, False), kind


def test_listen_resolves_an_ascii_host_as_its_bytes_and_another_through_idna(monkeypatch):
    """An address or an ASCII name is handed to getaddrinfo as its bytes (what the IDNA codec would make of it, the
    codec not imported for it); a name with other characters as the text it is (getaddrinfo applies IDNA)."""
    asked: list = []
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        asked.append(host)
        return real("127.0.0.1", *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for host in ("127.0.0.1", "localhost", "bücher.example", ""):
        for s in listen(host, 0):
            assert s.getsockname()[0] == "127.0.0.1" and s.getsockname()[1] > 0
            s.close()
    assert asked == [b"127.0.0.1", b"localhost", "bücher.example", None]
