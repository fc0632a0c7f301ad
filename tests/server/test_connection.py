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
    """The correlation ids of the answers written, in order (answers to pipelined requests may share a write)."""
    data, out = b"".join(writer.frames), []
    while data:
        size, cid = struct.unpack_from(">ii", data)
        out.append(cid)
        data = data[4 + size:]
    return out


def connection(reader, dispatch, *, budget: RequestBudget | None = None, metrics: Metrics | None = None,
               conn_id: int = 1, idle_ms: int = 0) -> tuple[Connection, ListWriter]:
    writer = ListWriter()
    conn = Connection(Peer(conn_id, ("127.0.0.1", 5000 + conn_id), "/127.0.0.1"), reader, writer, dispatch,
                      max_frame_bytes=1 << 20, limits=DecodeLimits(), budget=budget or RequestBudget(1 << 20),
                      idle_ms=idle_ms, metrics=metrics or Metrics(),
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


class PacedReader:
    """read() hands out each chunk after its pause (seconds), then waits for ever (a client gone quiet)."""

    def __init__(self, *paced: tuple[float, bytes]) -> None:
        self.paced = list(paced)
        self.reads = 0

    async def read(self, n: int) -> bytes:
        self.reads += 1
        if not self.paced:
            await asyncio.Event().wait()
        pause, chunk = self.paced.pop(0)
        await asyncio.sleep(pause)
        return chunk


def test_a_connection_that_sends_nothing_for_idle_ms_is_closed_as_idle():
    metrics = Metrics()
    conn, writer = connection(PacedReader(), EchoDispatch(), metrics=metrics, idle_ms=50)

    async def run():
        t0 = asyncio.get_running_loop().time()
        await asyncio.wait_for(conn.run(), 5)
        return asyncio.get_running_loop().time() - t0
    took = asyncio.run(run())
    assert 0.05 <= took < 2 and writer.frames == []
    assert metrics.closed_connections["idle"] == 1
    assert conn._idle_timer is None                   # nothing left armed after the connection's end


def test_requests_closer_together_than_idle_ms_keep_the_connection_open_for_longer_than_it():
    """The idle time counts from the start of each read: eight requests 30 ms apart (240 ms in all) on an idle
    time of 80 ms are all answered; the quiet after the last one closes the connection."""
    metrics = Metrics()
    reader = PacedReader(*[(0.03, api_versions(i)) for i in range(1, 9)])
    conn, writer = connection(reader, EchoDispatch(), metrics=metrics, idle_ms=80)
    asyncio.run(asyncio.wait_for(conn.run(), 5))
    assert answered(writer) == list(range(1, 9))
    assert metrics.closed_connections["idle"] == 1 and reader.reads == 9


def test_a_request_served_for_longer_than_idle_ms_is_answered_and_idleness_counts_after_it():
    metrics = Metrics()
    dispatch = EchoDispatch(slow={1: 0.2})             # served for 200 ms on an idle time of 50 ms
    conn, writer = connection(PacedReader((0, api_versions(1)), (0.03, api_versions(2))), dispatch,
                              metrics=metrics, idle_ms=50)
    asyncio.run(asyncio.wait_for(conn.run(), 5))
    assert answered(writer) == [1, 2]
    assert metrics.closed_connections["idle"] == 1


def test_a_connection_cancelled_while_reading_is_cancelled_not_taken_for_idle():
    metrics = Metrics()
    conn, _ = connection(PacedReader(), EchoDispatch(), metrics=metrics, idle_ms=10_000)

    async def run():
        task = asyncio.ensure_future(conn.run())
        await asyncio.sleep(0.02)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "returned"
    assert asyncio.run(run()) == "cancelled"
    assert metrics.closed_connections["idle"] == 0 and conn._idle_timer is None


def test_pipelined_requests_take_turns_with_another_connection():
    """One request per loop turn: ten requests in one read are served interleaved with another connection's,
    not all ten first."""
    order: list[tuple[str, int]] = []

    class Recording(EchoDispatch):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        async def __call__(self, req, peer, send) -> bool:
            order.append((self.name, req.correlation_id))
            await send(struct.pack(">ii", 4, req.correlation_id))
            return True

    class AtOnce(ListWriter):
        async def drain(self) -> None:                 # as a socket's writer with room: no loop turn
            pass

    many, _ = connection(ChunkReader(b"".join(api_versions(i) for i in range(1, 11))), Recording("many"), conn_id=1)
    other, _ = connection(ChunkReader(*[api_versions(i) for i in range(1, 4)]), Recording("other"), conn_id=2)
    many.writer = other.writer = AtOnce()

    async def both():
        await asyncio.gather(many.run(), other.run())
    asyncio.run(both())
    firsts = [i for i, (name, _) in enumerate(order) if name == "other"]
    assert len(order) == 13 and firsts[-1] < 9, order


def test_a_peers_context_names_the_connection_and_follows_a_new_principal():
    import dataclasses
    peer = Peer(4, ("127.0.0.1", 5004), "/127.0.0.1", broker_id=2, listener="SASL_PLAINTEXT",
                protocol="SASL_PLAINTEXT")
    ctx = peer.context.for_request(18, 3, "c", 10, None)
    assert (ctx.connection_id, ctx.peer, ctx.client_host, ctx.broker_id, ctx.listener, ctx.principal) == \
        (4, "127.0.0.1:5004", "/127.0.0.1", 2, "SASL_PLAINTEXT", "User:ANONYMOUS")
    authenticated = dataclasses.replace(peer, principal="User:alice")       # as SASL replaces the peer
    assert authenticated.context.principal == "User:alice" and peer.context.principal == "User:ANONYMOUS"
    assert Peer(5, "unix-socket", "/x").where == "unix-socket"
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


def heartbeat(correlation_id: int) -> bytes:
    from kafka.protocol.consumer.group import HeartbeatRequest
    return request_bytes(HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id="i"), 4,
                         correlation_id)


def offset_commit(correlation_id: int) -> bytes:
    from kafka.protocol.consumer import OffsetCommitRequest
    return request_bytes(OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=1, member_id="m",
                                             group_instance_id="i", topics=[]), 8, correlation_id)


def test_answers_to_pipelined_requests_answered_without_waiting_go_out_in_one_write():
    """Ten heartbeats in one read (a client of ten members at a heartbeat tick): ten answers, in order, in one
    write; each request still takes its own loop turn."""
    conn, writer = connection(ChunkReader(b"".join(heartbeat(i) for i in range(1, 11))), EchoDispatch())
    asyncio.run(conn.run())
    assert answered(writer) == list(range(1, 11)) and len(writer.frames) == 1


def test_an_answer_is_not_held_behind_a_request_that_may_wait():
    """A heartbeat's answer is written before an OffsetCommit after it in the same read is served (the commit
    waits for its write): only answers followed by a request answered without waiting are held."""
    written_when_commit_came: list[list[int]] = []

    class Recording(EchoDispatch):
        async def __call__(self, req, peer, send) -> bool:
            if req.api_key == 8:
                written_when_commit_came.append(answered(writer))
            return await super().__call__(req, peer, send)

    conn, writer = connection(ChunkReader(heartbeat(1) + heartbeat(2) + offset_commit(3) + heartbeat(4)),
                              Recording(slow={3: 0.05}))
    asyncio.run(conn.run())
    assert written_when_commit_came == [[1, 2]]
    assert answered(writer) == [1, 2, 3, 4] and len(writer.frames) == 2      # [1, 2], then [3, 4]


def test_held_answers_go_out_within_the_hold_bound_when_a_quick_request_waits_after_all():
    """A heartbeat held up (an injected delay, a hook) does not hold back the answers before it for longer than
    HOLD_S: they are written by then, the delayed one after its delay."""
    from tenure.server.connection import HOLD_S
    seen_at: dict[int, float] = {}

    class Timed(ListWriter):
        def write(self, data: bytes) -> None:
            super().write(data)
            now = asyncio.get_running_loop().time()
            for cid in answered(self):
                seen_at.setdefault(cid, now)

    conn, _ = connection(ChunkReader(heartbeat(1) + heartbeat(2) + heartbeat(3)), EchoDispatch(slow={3: 0.5}))
    conn.writer = Timed()

    async def run() -> float:
        t0 = asyncio.get_running_loop().time()
        await conn.run()
        return t0
    t0 = asyncio.run(run())
    assert sorted(seen_at) == [1, 2, 3]
    assert seen_at[1] - t0 < HOLD_S + 0.2 and seen_at[2] - t0 < HOLD_S + 0.2 and seen_at[3] - t0 >= 0.5


def test_held_answers_past_the_byte_bound_are_written_and_waited_on():
    """Answers held pass HOLD_BYTES: they are written at once and the connection waits for the client to read
    them (drain), as for any answer."""
    from tenure.server.connection import HOLD_BYTES

    class Big(EchoDispatch):
        async def __call__(self, req, peer, send) -> bool:
            await send(struct.pack(">ii", 4 + 40_000, req.correlation_id) + bytes(40_000))
            return True

    drains: list[int] = []

    class Counting(ListWriter):
        async def drain(self) -> None:
            drains.append(len(self.frames))
            await super().drain()

    conn, _ = connection(ChunkReader(b"".join(heartbeat(i) for i in range(1, 5))), Big())
    conn.writer = writer = Counting()
    asyncio.run(conn.run())
    assert answered(writer) == [1, 2, 3, 4]
    assert 40_000 * 2 > HOLD_BYTES and len(writer.frames) == 2 and drains == [1, 2]     # [1, 2] then [3, 4]
