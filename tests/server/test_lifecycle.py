"""The server's lifecycle: recovery runs off the event loop; a stop drains the connections within a bound
(a request in flight is answered, a parked group request answered NOT_COORDINATOR, a request slower than
the bound has its connection closed) before the runtime and the logs close."""
from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from kafka.protocol.metadata import MetadataRequest

from tenure.config import ServerConfig
from tenure.coordinator.runtime import CoordinatorRuntime
from tenure.protocol.errors import ErrorCode
from tenure.server import Server, ServerThread
from tests.support.groupwire import join_request
from tests.support.wire import WireClient

METADATA_KEY = 3


def test_recovery_runs_off_the_event_loop(monkeypatch):
    """While __consumer_offsets loads, the loop keeps running: here the load cannot finish until a loop
    timer has fired (it would wait out its 10 s and fail if the load ran on the loop)."""
    fired = threading.Event()
    real_load = CoordinatorRuntime.load

    def slow_load(self):
        assert fired.wait(10), "the event loop did not run while the load was going on"
        return real_load(self)
    monkeypatch.setattr(CoordinatorRuntime, "load", slow_load)

    async def main():
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, fired.set)
        server = Server(ServerConfig(port=0))
        try:
            await server.start()
            assert server.port and server.load_report is not None
        finally:
            await server.close()
    asyncio.run(main())


def metadata_request():
    return MetadataRequest(version=12, topics=[], allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False), 12


def slow_metadata(s: ServerThread, seconds: float, started: threading.Event):
    real = s.server.handlers[METADATA_KEY]

    async def slow(req, ctx):
        started.set()
        await asyncio.sleep(seconds)
        return await real(req, ctx)
    s.call(s.server.handlers.__setitem__, METADATA_KEY, slow)


def test_a_request_in_flight_at_stop_is_answered_then_its_connection_closed():
    s = ServerThread(ServerConfig(port=0, shutdown_timeout_s=10)).start()
    started = threading.Event()
    slow_metadata(s, 0.3, started)
    with WireClient.to(s.bootstrap) as c, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(c.call, *metadata_request())
        assert started.wait(10)
        s.stop()
        assert answer.result(10).header.correlation_id == 1
        assert c.is_closed_by_peer(5)


def test_a_request_slower_than_the_bound_has_its_connection_closed():
    s = ServerThread(ServerConfig(port=0, shutdown_timeout_s=0.2)).start()
    started = threading.Event()
    slow_metadata(s, 60, started)
    with WireClient.to(s.bootstrap) as c:
        pool = ThreadPoolExecutor(1)
        answer = pool.submit(c.call, *metadata_request())
        assert started.wait(10)
        t0 = time.monotonic()
        s.stop()
        assert time.monotonic() - t0 < 20                 # the 60 s handler was not waited for
        exc = answer.exception(10)
        assert isinstance(exc, ConnectionError), exc
        pool.shutdown()


def test_a_parked_join_is_answered_not_coordinator_at_stop():
    s = ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=60000)).start()
    with WireClient.to(s.bootstrap) as c, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(c.call, *join_request("g", "", "i-1", "t", session_ms=10000))
        s.wait_for_group("g", state="PreparingRebalance", members=1, timeout=10)
        s.stop()
        assert answer.result(10).error_code == ErrorCode.NOT_COORDINATOR


def test_a_long_polling_fetch_at_stop_answers_at_once():
    from tests.support.wire import fetch_request
    s = ServerThread(ServerConfig(port=0, shutdown_timeout_s=20)).start()
    s.create_topics({"lp": 1})
    with WireClient.to(s.bootstrap) as c, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(c.call, fetch_request("lp", 0, 0, max_wait_ms=60000, min_bytes=1), 12)
        deadline = time.monotonic() + 10
        while not s.call(lambda: bool(s.server.broker.replicas.waiting())):     # until the fetch waits for records
            assert time.monotonic() < deadline
            time.sleep(0.01)
        s.stop()
        assert answer.result(30).header.correlation_id == 1    # answered (empty), not cut off by the bound


def test_a_server_thread_that_cannot_listen_releases_its_data_dir(tmp_path):
    import socket

    import pytest
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        with pytest.raises(OSError):
            ServerThread(ServerConfig(port=taken.getsockname()[1], data_dir=str(tmp_path))).start()
    finally:
        taken.close()
    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path))) as s:     # the data dir's lock is free
        assert s.port
