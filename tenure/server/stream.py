"""One accepted connection's reader and writer over its transport: an asyncio Protocol with the `read(n)`, `write`
and `drain` a `Connection` uses (its Reader and Writer protocols), in place of asyncio's StreamReader and
StreamWriter.

What it does as they do: a read gives up to `n` of the bytes received, waiting for some when there are none; b""
at the client's end (a half-closed connection stays open for the answers, as asyncio's streams keep it), and the
connection's error once it is lost; reading is paused while more than 2 x READ_LIMIT bytes wait to be read and
resumed when a read leaves READ_LIMIT or fewer (asyncio's stream limit); a drain waits while the transport has
paused writing (its buffer above the high-water mark), and raises ConnectionResetError once the connection is
lost. What it does not: copy what it received into a buffer and out again (a read hands over the bytes objects
received, joined only when several wait), or make a coroutine per answer - `must_drain()` tells the connection
whether a drain would wait or raise at all (see Connection._send_now)."""
from __future__ import annotations

import asyncio
from typing import Any

READ_LIMIT = 64 * 1024       # asyncio's StreamReader limit: reading paused past twice this many bytes unread


class Stream(asyncio.Protocol):
    """Reader and writer of one connection (`transport` set once the connection is made)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._chunks: list[bytes] = []          # received, not yet read
        self._size = 0
        self._eof = False
        self._exc: BaseException | None = None  # the connection's error (connection_lost)
        self._waiter: asyncio.Future | None = None       # a read waiting for bytes
        self._read_paused = False
        self._write_paused = False
        self._lost = False
        self._drainers: list[asyncio.Future] = []        # drains waiting for the transport to resume writing
        self._closed: asyncio.Future | None = None

    # the Protocol's side

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if not self._read_paused and self._size > 2 * READ_LIMIT and self.transport is not None:
            self._read_paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        # keep a plain connection open for the answers (the client only closed its side), as asyncio's streams do;
        # TLS cannot half-close
        return self.transport is None or self.transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: BaseException | None) -> None:
        self._lost = True
        if exc is not None:
            self._exc = exc
        self._eof = True
        self._wake()
        for fut in self._drainers:
            if not fut.done():
                fut.set_exception(ConnectionResetError("Connection lost") if exc is None else exc)
        self._drainers.clear()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for fut in self._drainers:
            if not fut.done():
                fut.set_result(None)
        self._drainers.clear()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # the reader's side

    async def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes received (all of them with n < 0), waiting for some; b"" at the end."""
        if self._exc is not None:
            raise self._exc
        if not self._chunks:
            if self._eof:
                return b""
            if self._waiter is not None:
                raise RuntimeError("read() called while another read is waiting for data")
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
            if not self._chunks:
                if self._exc is not None:
                    raise self._exc
                return b""
        chunks = self._chunks
        if len(chunks) == 1 and (n < 0 or len(chunks[0]) <= n):
            data = chunks.pop()
        else:
            data = b"".join(chunks)
            chunks.clear()
            if 0 <= n < len(data):
                chunks.append(data[n:])
                data = data[:n]
        self._size -= len(data)
        if self._read_paused and self._size <= READ_LIMIT and self.transport is not None:
            self._read_paused = False
            self.transport.resume_reading()
        return data

    # the writer's side

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def must_drain(self) -> bool:
        """Whether `drain()` would wait or raise (the transport paused writing, is closing or was lost); when it
        would not, the connection does not call it."""
        transport = self.transport
        return self._write_paused or self._lost or transport is None or transport.is_closing()

    async def drain(self) -> None:
        """Wait until the transport takes more (its buffer below the low-water mark); ConnectionResetError once
        the connection is lost (after a loop turn if it is closing, for its loss to be seen, as asyncio's)."""
        transport = self.transport
        if transport is not None and transport.is_closing() and not self._lost:
            await asyncio.sleep(0)
        if self._lost:
            raise ConnectionResetError("Connection lost") if self._exc is None else self._exc
        if not self._write_paused:
            return
        fut = asyncio.get_running_loop().create_future()
        self._drainers.append(fut)
        await fut

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default if self.transport is None else self.transport.get_extra_info(name, default)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    async def wait_closed(self) -> None:
        """Until the connection is lost (its close done)."""
        if self._lost:
            return
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        await self._closed
