"""The connection's send as the dispatcher calls it (connection.py `_send_now`): `SENT` - an awaitable that is done
already, which the dispatcher does not await - when the writer says it needs no drain (stream.py `must_drain`), the
writer's drain otherwise (and for a writer without `must_drain`, every answer, as before); the dispatcher answers the
same either way, counting an answer once it is written, and a send of the old contract (a coroutine function) still
works."""
from __future__ import annotations

import asyncio
import logging
import struct

from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse

from tenure.control.faults import Faults
from tenure.counters import Metrics
from tenure.protocol.apis import BROKER, GROUP, TRANSACTION
from tenure.protocol.codec import decode_request
from tenure.protocol.limits import DecodeLimits
from tenure.server.connection import SENT, Connection, Peer, RequestBudget
from tenure.server.dispatch import Dispatcher
from tenure.server.ratelog import RateLimitedLog
from tests.support.wire import request_bytes

PEER = Peer(1, ("127.0.0.1", 5001), "/127.0.0.1")


def heartbeat(correlation_id: int = 7):
    frame = request_bytes(HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id="i"),
                          4, correlation_id)
    return decode_request(frame[4:])


async def answer(req, ctx):
    return HeartbeatResponse(version=req.api_version, error_code=0)


def dispatcher() -> tuple[Dispatcher, Metrics]:
    metrics = Metrics()
    return Dispatcher(faults=Faults(), metrics=metrics, routes={BROKER: answer, GROUP: answer, TRANSACTION: answer},
                      clock_ms=lambda: 0), metrics


class Sends:
    """The connection's send as the dispatcher sees it: keeps the frames; SENT, or a drain to await."""

    def __init__(self, drain: bool = False) -> None:
        self.frames: list[bytes] = []
        self.drain, self.drained = drain, 0

    def __call__(self, frame: bytes):
        self.frames.append(frame)
        return self._drain() if self.drain else SENT

    async def _drain(self) -> None:
        await asyncio.sleep(0)
        self.drained += 1


def correlation_ids(frames: list[bytes]) -> list[int]:
    return [struct.unpack_from(">i", f, 4)[0] for f in frames]


def test_an_answer_sent_is_not_awaited_one_that_must_drain_is_and_the_old_contract_still_holds():
    async def go():
        d, metrics = dispatcher()
        send = Sends()
        assert await d(heartbeat(3), PEER, send) is True
        assert correlation_ids(send.frames) == [3]
        assert metrics.requests[("Heartbeat", "NONE")] == 1

        send = Sends(drain=True)
        task = asyncio.ensure_future(d(heartbeat(4), PEER, send))
        while not send.frames:
            await asyncio.sleep(0)
        assert metrics.requests[("Heartbeat", "NONE")] == 1             # counted once the drain is over
        assert await task is True and send.drained == 1
        assert metrics.requests[("Heartbeat", "NONE")] == 2

        frames: list[bytes] = []

        async def plain_send(frame: bytes) -> None:                     # a send of the old contract
            frames.append(frame)
        assert await d(heartbeat(5), PEER, plain_send) is True
        assert correlation_ids(frames) == [5]
    asyncio.run(go())


class Writer:
    def __init__(self, must: bool | None) -> None:
        self.data: list[bytes] = []
        self.drains = 0
        if must is not None:
            self.must_drain = lambda: must

    def write(self, data: bytes) -> None:
        self.data.append(data)

    async def drain(self) -> None:
        self.drains += 1


def test_the_connection_s_send_is_sent_when_its_writer_needs_no_drain_and_drained_otherwise():
    async def go():
        for must, expect_sent in ((False, True), (True, False), (None, False)):
            writer = Writer(must)
            conn = Connection(PEER, None, writer, dispatcher()[0],  # type: ignore[arg-type]
                              max_frame_bytes=1 << 20, limits=DecodeLimits(), budget=RequestBudget(1 << 20),
                              idle_ms=0, metrics=Metrics(), ratelog=RateLimitedLog(logging.getLogger("test")))
            got = conn._send_now(b"\x00\x00\x00\x04abcd")
            assert (got is SENT) is expect_sent, must
            await got                                                   # SENT is awaitable, as any send's
            assert writer.data == [b"\x00\x00\x00\x04abcd"]
            assert writer.drains == (0 if expect_sent else 1)
    asyncio.run(go())
