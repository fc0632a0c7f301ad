"""ServerThread.start() hands out a server only once it serves: it waits for the data dir's load however long
that takes (up to its timeout, then a clear error), never returning a half-loaded server."""
import threading

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tenure.server import thread as thread_module


def test_start_waits_past_30_s_for_a_slow_load_and_times_out_with_a_clear_error(monkeypatch):
    release = threading.Event()
    real_start = thread_module.Server.start

    async def slow_start(self):
        # the load is slow: hold the start-up until the test lets it go
        import asyncio
        while not release.is_set():
            await asyncio.sleep(0.05)
        await real_start(self)

    monkeypatch.setattr(thread_module.Server, "start", slow_start)
    st = ServerThread(ServerConfig(port=0))
    with pytest.raises(TimeoutError, match="not ready within 1 s"):
        st.start(timeout_s=1)
    release.set()
    st._ready.wait(30)
    assert st._error is None
    st.stop()


def test_start_returns_once_the_server_serves():
    with ServerThread(ServerConfig(port=0)) as st:
        assert st.server is not None and st.port > 0
