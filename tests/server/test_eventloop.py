"""The one place that chooses the server's event loop (tenure/server/eventloop.py): uvloop's when installed, asyncio's
when asked (--event-loop / ServerThread(event_loop=...) / TENURE_EVENT_LOOP) or when uvloop is not there; the
server names its loop in the start-up log."""
from __future__ import annotations

import asyncio
import logging

import pytest

from tenure.server import ServerThread, eventloop


def test_auto_is_uvloop_when_installed_and_the_environment_can_force_asyncio(monkeypatch):
    monkeypatch.delenv(eventloop.ENV, raising=False)
    assert eventloop.resolve("auto") == "uvloop"
    monkeypatch.setenv(eventloop.ENV, "asyncio")
    assert eventloop.resolve("auto") == "asyncio"
    assert eventloop.resolve("uvloop") == "uvloop"          # an explicit choice wins over the environment
    monkeypatch.setenv(eventloop.ENV, "bogus")
    with pytest.raises(ValueError, match="unknown event loop 'bogus'"):
        eventloop.resolve("auto")


def test_without_uvloop_auto_falls_back_to_asyncio_and_asking_for_uvloop_is_an_error(monkeypatch):
    monkeypatch.delenv(eventloop.ENV, raising=False)
    monkeypatch.setattr(eventloop, "_uvloop", lambda: None)
    assert eventloop.resolve("auto") == "asyncio"
    assert eventloop.loop_factory("auto") is asyncio.new_event_loop
    with pytest.raises(ValueError, match="uvloop is not installed"):
        eventloop.resolve("uvloop")


@pytest.mark.parametrize("choice,kind", [("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_run_and_new_event_loop_make_the_chosen_loop(choice, kind):
    async def which() -> str:
        return eventloop.describe(asyncio.get_running_loop())
    assert eventloop.run(which(), choice).startswith(kind)
    loop = eventloop.new_event_loop(choice)
    try:
        assert eventloop.describe(loop).startswith(kind)
    finally:
        loop.close()


@pytest.mark.parametrize("choice,kind", [("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_a_server_thread_runs_on_the_chosen_loop_and_logs_it(choice, kind, caplog, monkeypatch):
    monkeypatch.delenv(eventloop.ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="tenure.server"):
        with ServerThread(port=0, event_loop=choice) as st:
            assert eventloop.describe(st.loop).startswith(kind)
            from tests.support.wire import WireClient, metadata_request
            with WireClient.to(st.bootstrap) as w:             # it serves
                assert w.call(metadata_request(), 12).brokers
    assert any(r.getMessage().startswith(f"event loop: {kind}") for r in caplog.records)
