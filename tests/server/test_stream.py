"""tenure.server.stream.Stream, a connection's reader and writer over its transport, on a real socket pair with
both event loops the server runs on (uvloop's and asyncio's): what a Connection relies on asyncio's streams for -
reads, the client's end (half-closed: answers still go out), a lost connection, flow control both ways - and the
SENT fast path of an answer that needs no drain."""
from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from tenure.server.eventloop import run
from tenure.server.stream import READ_LIMIT, Stream

LOOPS = ["asyncio", "uvloop"]


async def pair() -> tuple[Stream, socket.socket]:
    """A Stream over one end of a connected socket pair (as the listener makes it) and the client's end."""
    server, client = socket.socketpair()
    server.setblocking(False)
    stream = Stream()
    await asyncio.get_running_loop().connect_accepted_socket(lambda: stream, sock=server)
    return stream, client


async def tcp_pair() -> tuple[Stream, socket.socket]:
    """As `pair`, over TCP on the loopback (a reset is a reset there)."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        client = socket.create_connection(listening.getsockname())
        server, _ = listening.accept()
    server.setblocking(False)
    stream = Stream()
    await asyncio.get_running_loop().connect_accepted_socket(lambda: stream, sock=server)
    return stream, client


async def recv_all(client: socket.socket, n: int) -> bytes:
    loop = asyncio.get_running_loop()
    client.setblocking(False)
    out = b""
    while len(out) < n:
        out += await loop.sock_recv(client, n - len(out))
    return out


@pytest.mark.parametrize("loop", LOOPS)
def test_reads_give_the_bytes_sent_in_order_at_most_n_at_a_time(loop):
    async def go():
        stream, client = await pair()
        client.sendall(b"abcdef")
        assert await stream.read(4) == b"abcd"
        assert await stream.read(100) == b"ef"
        waiting = asyncio.ensure_future(stream.read(100))   # nothing left: it waits for the next bytes
        await asyncio.sleep(0.01)
        assert not waiting.done()
        client.sendall(b"gh")
        client.sendall(b"ij")
        assert await waiting in (b"gh", b"ghij")
        client.close()
        rest = b""
        while chunk := await stream.read(100):
            rest += chunk
        assert rest in (b"ij", b"")
        assert await stream.read(100) == b""                 # the end, again
        stream.close()
    run(go(), loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_client_that_closes_its_side_still_gets_the_answer(loop):
    async def go():
        stream, client = await pair()
        client.sendall(b"request")
        client.shutdown(socket.SHUT_WR)
        assert await stream.read(100) == b"request"
        assert await stream.read(100) == b""
        stream.write(b"answer")
        assert not stream.must_drain()
        await stream.drain()
        assert await recv_all(client, 6) == b"answer"
        stream.close()
        await asyncio.wait_for(stream.wait_closed(), 5)
        assert stream.must_drain()                            # closed: a drain raises, so it is asked for
        with pytest.raises(ConnectionResetError):
            await stream.drain()
        client.close()
    run(go(), loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_reset_connection_raises_on_read_and_on_drain(loop):
    async def go():
        stream, client = await tcp_pair()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        waiting = asyncio.ensure_future(stream.read(100))
        await asyncio.sleep(0.01)
        client.close()                                        # RST
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(waiting, 5)
        await asyncio.wait_for(stream.wait_closed(), 5)
        with pytest.raises(ConnectionResetError):             # the connection's error, again
            await stream.read(100)
        assert stream.must_drain()
        with pytest.raises(ConnectionError):
            await stream.drain()
    run(go(), loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_reading_pauses_past_twice_the_limit_unread_and_resumes_once_read(loop):
    async def go():
        stream, client = await pair()
        client.setblocking(False)
        sent = 0
        chunk = b"x" * 65536
        while not stream._read_paused and sent < 64 * READ_LIMIT:
            try:
                sent += client.send(chunk)
            except BlockingIOError:
                pass
            await asyncio.sleep(0.001)
        assert stream._read_paused and stream._size > 2 * READ_LIMIT
        got = 0
        while got < sent:
            got += len(await stream.read(READ_LIMIT))
            if stream._size <= READ_LIMIT:
                assert not stream._read_paused
        assert got == sent
        stream.close()
        client.close()
    run(go(), loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_drain_waits_while_the_client_reads_nothing_and_ends_once_it_reads(loop):
    async def go():
        stream, client = await pair()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        payload = b"y" * (8 << 20)
        stream.write(payload)
        assert stream.must_drain()
        drained = asyncio.ensure_future(stream.drain())
        await asyncio.sleep(0.05)
        assert not drained.done()                             # the transport paused writing: the drain waits
        assert await recv_all(client, len(payload)) == payload
        await asyncio.wait_for(drained, 5)
        assert not stream.must_drain()
        stream.close()
        client.close()
    run(go(), loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_the_transport_s_details_are_the_stream_s(loop):
    async def go():
        stream, client = await pair()
        assert stream.get_extra_info("socket") is not None
        assert stream.get_extra_info("no such thing", "default") == "default"
        assert stream.get_extra_info("sslcontext") is None
        stream.abort()
        await asyncio.wait_for(stream.wait_closed(), 5)
        client.close()
    run(go(), loop)
