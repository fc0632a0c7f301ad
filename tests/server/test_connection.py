"""tenure.server.connection.Connection driven without a socket: a reader that hands out chosen chunks,
a writer that keeps what is written, and a dispatcher that answers each request with its correlation id."""
from __future__ import annotations

import asyncio
import logging
import struct

from kafka.protocol.metadata import ApiVersionsRequest

from tenure.counters import Metrics
from tenure.protocol.limits import DecodeLimits
from tenure.server.connection import Connection, Peer, RequestBudget
from tenure.server.ratelog import RateLimitedLog
from tests.support.wire import request_bytes


def api_versions(correlation_id: int) -> bytes:
    return request_bytes(ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1"),
                         3, correlation_id)


class ChunkReader:
    """read() hands out the chunks given, one per call, then b"" (the peer closed)."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)

    async def read(self, n: int) -> bytes:
        await asyncio.sleep(0)
        return self.chunks.pop(0) if self.chunks else b""


class ListWriter:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.frames.append(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)


class EchoDispatch:
    """Answers each request with a frame holding its correlation id; `slow` ids take a while."""

    def __init__(self, slow: dict[int, float] | None = None) -> None:
        self.slow = slow or {}
        self.seen: list[int] = []
        self.active = 0
        self.most_active = 0

    async def __call__(self, req, peer, send) -> bool:
        self.seen.append(req.correlation_id)
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            await asyncio.sleep(self.slow.get(req.correlation_id, 0))
            await send(struct.pack(">ii", 4, req.correlation_id))
        finally:
            self.active -= 1
        return True


def answered(writer: ListWriter) -> list[int]:
    return [struct.unpack(">ii", f)[1] for f in writer.frames]


def connection(reader, dispatch, *, budget: RequestBudget | None = None, metrics: Metrics | None = None,
               conn_id: int = 1) -> tuple[Connection, ListWriter]:
    writer = ListWriter()
    conn = Connection(Peer(conn_id, ("127.0.0.1", 5000 + conn_id), "/127.0.0.1"), reader, writer, dispatch,
                      max_frame_bytes=1 << 20, limits=DecodeLimits(), budget=budget or RequestBudget(1 << 20),
                      idle_ms=0, metrics=metrics or Metrics(),
                      ratelog=RateLimitedLog(logging.getLogger("test"), 10, 5))
    return conn, writer


def test_a_request_split_over_reads_is_served_once_whole():
    frame = api_versions(7)
    cuts = (frame[:2], frame[2:9], frame[9:])          # inside the size prefix, then inside the payload
    dispatch = EchoDispatch()
    conn, writer = connection(ChunkReader(*cuts), dispatch)
    asyncio.run(conn.run())
    assert dispatch.seen == [7] and answered(writer) == [7]


def test_two_requests_in_one_read_are_answered_in_order_one_at_a_time():
    dispatch = EchoDispatch(slow={1: 0.05})           # the first is slower: its answer still goes first
    conn, writer = connection(ChunkReader(api_versions(1) + api_versions(2) + api_versions(3)[:5]), dispatch)
    asyncio.run(conn.run())
    assert answered(writer) == [1, 2] and dispatch.most_active == 1


def test_a_malformed_frame_closes_that_connection_only():
    budget, metrics = RequestBudget(1 << 20), Metrics()
    bad_dispatch, good_dispatch = EchoDispatch(), EchoDispatch()
    bad, bad_writer = connection(ChunkReader(api_versions(1), struct.pack(">i", -5), api_versions(2)),
                                 bad_dispatch, budget=budget, metrics=metrics, conn_id=1)
    good, good_writer = connection(ChunkReader(api_versions(1), api_versions(2), api_versions(3)), good_dispatch,
                                   budget=budget, metrics=metrics, conn_id=2)

    async def both():
        await asyncio.gather(bad.run(), good.run())
    asyncio.run(both())
    assert answered(bad_writer) == [1]                # the request before the bad frame was answered
    assert bad_dispatch.seen == [1]                   # nothing after it was read
    assert answered(good_writer) == [1, 2, 3]
    assert metrics.closed_connections["malformed_request"] == 1
    assert budget.used == 0                           # the closed connection gave back what it held


def test_a_request_over_the_shared_budget_closes_the_connection():
    budget, metrics = RequestBudget(limit=10), Metrics()
    dispatch = EchoDispatch()
    conn, writer = connection(ChunkReader(api_versions(1)), dispatch, budget=budget, metrics=metrics)
    asyncio.run(conn.run())
    assert writer.frames == [] and dispatch.seen == []
    assert metrics.closed_connections["request_buffer_budget"] == 1 and budget.used == 0


def test_a_draining_connection_answers_its_request_then_ends():
    dispatch = EchoDispatch(slow={1: 0.05})

    async def run():
        conn, writer = connection(ChunkReader(api_versions(1) + api_versions(2), api_versions(3)), dispatch)
        task = asyncio.ensure_future(conn.run())
        while not conn.serving:
            await asyncio.sleep(0)
        conn.draining = True
        await asyncio.wait_for(task, 5)
        return writer
    writer = asyncio.run(run())
    assert answered(writer) == [1] and dispatch.seen == [1]


def test_a_heavy_request_decoded_off_the_loop_is_serving_and_a_drain_meanwhile_still_answers_it(monkeypatch):
    """A request of 16 KiB or more is decoded on the worker thread (tenure/server/offload.py): the connection is
    serving meanwhile, so a drain begun then lets it be answered, as one begun during any request."""
    from kafka.protocol.metadata import MetadataRequest
    import tenure.server.connection as connection_module
    from tenure.protocol.codec import HEAVY_REQUEST_BYTES
    topics = [f"topic-{i:05d}" for i in range(HEAVY_REQUEST_BYTES // 8)]
    heavy = request_bytes(MetadataRequest(topics=topics, allow_auto_topic_creation=False), 4, 1)
    assert len(heavy) > HEAVY_REQUEST_BYTES
    dispatch = EchoDispatch()
    real = connection_module.off_loop

    async def run():
        decoding, release = asyncio.Event(), asyncio.Event()

        async def held(fn, *args):
            decoding.set()
            await release.wait()
            return await real(fn, *args)
        monkeypatch.setattr(connection_module, "off_loop", held)
        conn, writer = connection(ChunkReader(heavy, api_versions(2)), dispatch)
        task = asyncio.ensure_future(conn.run())
        await asyncio.wait_for(decoding.wait(), 5)
        serving = conn.serving
        conn.draining = True                   # while it is decoded
        release.set()
        await asyncio.wait_for(task, 10)
        return writer, serving
    writer, serving = asyncio.run(run())
    assert serving
    assert answered(writer) == [1] and dispatch.seen == [1]
