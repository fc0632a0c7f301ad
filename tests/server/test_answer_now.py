"""The dispatcher's path without a coroutine (dispatch.py `answer_now`): a route whose owner answers at once
(routes.py GroupRoute over a runtime's `handle_now`) is answered and sent before `answer_now` returns; an answer
still to come (a Future), a runtime without that entry, an API outside its `direct_apis`, and a send that must
drain all go the awaited way with the same answer; `await dispatcher(...)` (the old contract) gives the same. And
the connection's send: `SENT` when its writer needs no drain, the drain otherwise."""
from __future__ import annotations

import asyncio
import logging
import struct

from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse, OffsetFetchRequest

from tenure.broker.topics import TopicRegistry
from tenure.control.faults import Faults
from tenure.counters import Metrics
from tenure.coordinator.routing import ONE_GROUP_APIS
from tenure.protocol.apis import GROUP
from tenure.protocol.codec import decode_request
from tenure.protocol.limits import DecodeLimits
from tenure.server.connection import SENT, Connection, Peer, RequestBudget
from tenure.server.dispatch import Dispatcher
from tenure.server.ratelog import RateLimitedLog
from tenure.server.routes import NOT_NOW, GroupRoute
from tests.support.wire import request_bytes

PEER = Peer(1, ("127.0.0.1", 5001), "/127.0.0.1")


def heartbeat(correlation_id: int = 7):
    frame = request_bytes(HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id="i"),
                          4, correlation_id)
    return decode_request(frame[4:])


def offset_fetch():
    frame = request_bytes(OffsetFetchRequest(group_id="g", topics=None), 7, 9)
    return decode_request(frame[4:])


class Runtime:
    """A group runtime's two entries, recorded: `handle_now` answers with `now` (an answer, or a Future)."""
    direct_apis = ONE_GROUP_APIS

    def __init__(self, now=None) -> None:
        self.now, self.calls = now, []

    def handle_now(self, req, ctx):
        self.calls.append(("handle_now", req.api_key))
        return self.now if self.now is not None else HeartbeatResponse(version=req.api_version, error_code=0)

    async def handle(self, req, ctx):
        self.calls.append(("handle", req.api_key))
        await asyncio.sleep(0)
        return HeartbeatResponse(version=req.api_version, error_code=0) if req.api_key == 12 else \
            req.spec.response(version=req.api_version, error_code=0, groups=[])


class NoNowRuntime(Runtime):
    handle_now = None       # type: ignore[assignment]  # a runtime without the synchronous entry


def dispatcher(runtime) -> tuple[Dispatcher, Metrics]:
    metrics = Metrics()
    route = GroupRoute(runtime, TopicRegistry(1), lambda: None)  # type: ignore[arg-type,return-value]
    return Dispatcher(faults=Faults(), metrics=metrics, routes={GROUP: route}, clock_ms=lambda: 0), metrics


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


def test_a_heartbeat_its_owner_answers_at_once_is_sent_before_answer_now_returns():
    async def go():
        runtime = Runtime()
        d, metrics = dispatcher(runtime)
        send = Sends()
        assert d.answer_now(heartbeat(7), PEER, send) is True
        assert correlation_ids(send.frames) == [7]
        assert runtime.calls == [("handle_now", 12)]
        assert metrics.requests[("Heartbeat", "NONE")] == 1
    asyncio.run(go())


def test_an_answer_still_to_come_is_awaited_and_sent_the_same():
    async def go():
        fut = asyncio.get_running_loop().create_future()
        runtime = Runtime(now=fut)
        d, _ = dispatcher(runtime)
        send = Sends()
        waiting = d.answer_now(heartbeat(8), PEER, send)
        assert waiting is not True and waiting is not False
        task = asyncio.ensure_future(waiting)
        await asyncio.sleep(0)
        assert send.frames == [] and not task.done()
        fut.set_result(HeartbeatResponse(version=4, error_code=27))        # REBALANCE_IN_PROGRESS
        assert await task is True
        assert correlation_ids(send.frames) == [8]
        assert struct.unpack_from(">h", send.frames[0], 4 + 4 + 1 + 4)[0] == 27
    asyncio.run(go())


def test_a_runtime_without_handle_now_and_an_api_outside_direct_apis_are_awaited_through_the_route():
    async def go():
        for runtime, req in ((NoNowRuntime(), heartbeat(3)), (Runtime(), offset_fetch())):
            d, _ = dispatcher(runtime)
            route = d.routes[GROUP]
            assert route.answer_now(req, PEER.context) is NOT_NOW  # type: ignore[attr-defined]
            send = Sends()
            waiting = d.answer_now(req, PEER, send)
            assert waiting is not True and waiting is not False
            assert await waiting is True
            assert correlation_ids(send.frames) == [req.correlation_id]
            assert runtime.calls == [("handle", req.api_key)]
    asyncio.run(go())


def test_a_send_that_must_drain_is_awaited_and_the_old_contract_still_holds():
    async def go():
        d, metrics = dispatcher(Runtime())
        send = Sends(drain=True)
        waiting = d.answer_now(heartbeat(4), PEER, send)
        assert waiting is not True and waiting is not False
        assert metrics.requests[("Heartbeat", "NONE")] == 0             # counted once the answer is written
        assert await waiting is True and send.drained == 1
        assert metrics.requests[("Heartbeat", "NONE")] == 1

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
            conn = Connection(PEER, None, writer, dispatcher(Runtime())[0],  # type: ignore[arg-type]
                              max_frame_bytes=1 << 20, limits=DecodeLimits(), budget=RequestBudget(1 << 20),
                              idle_ms=0, metrics=Metrics(), ratelog=RateLimitedLog(logging.getLogger("test")))
            got = conn._send_now(b"\x00\x00\x00\x04abcd")
            assert (got is SENT) is expect_sent, must
            await got                                                   # SENT is awaitable, as any send's
            assert writer.data == [b"\x00\x00\x00\x04abcd"]
            assert writer.drains == (0 if expect_sent else 1)
    asyncio.run(go())
