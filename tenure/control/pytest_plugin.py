"""pytest fixtures for testing Kafka clients against tenure (installed with the package, entry point
`pytest11`; nothing to import or configure).

    def test_restart_keeps_partitions(tenure_server):
        consumer = make_consumer(tenure_server.bootstrap, instance_id="c-1")
        ...
        with tenure_server.no_rebalance("orders"):
            restart(consumer)
        assert tenure_server.group("orders").member("c-1").assignment == {"orders": [0, 1, 2]}

Fixtures:
- `tenure_server`: a `tenure.server.ServerThread` on 127.0.0.1:0 (`.bootstrap`, inspection, faults,
  `restart()`). By default a fresh one per test. With `--tenure-scope=session` (or the ini option
  `tenure_scope = session`) one server serves the whole session, reset before each test (groups,
  topics, fault rules and the clock offset gone; same bootstrap address) - `tenure_isolation = none`
  keeps the state between tests instead.
- `@pytest.mark.tenure(**config)`: a dedicated server for that test with these `ServerConfig` fields
  (`data_dir=True`: a fresh temporary data dir, kept across `restart()`; e.g.
  `@pytest.mark.tenure(data_dir=True, static_registration_timeout_ms=60000)`), and `topics={"t": 12}`:
  topics created before the test starts ({name: partitions}); `acls=["allow User:* read topic:t", ...]`: the
  server checks ACLs with these created at start (docs/security.md#acls).
- `--tenure-data-dir` / ini `tenure_data_dir = true`: every `tenure_server` gets a temporary data dir.
- `tenure_bootstrap`: just the "host:port" string.
- `tenure_server_async`: the same server for async tests (aiokafka): a `tenure.server.AsyncServerThread`
  whose waits (`await wait_for_group(...)`, `await restart()`) let the test's event loop run.
"""
from __future__ import annotations

import dataclasses
from typing import Literal

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("tenure", "tenure Kafka test server")
    group.addoption("--tenure-scope", choices=("function", "session"), default=None,
                    help="scope of the tenure_server fixture (default: ini tenure_scope, else function)")
    group.addoption("--tenure-data-dir", action="store_true", default=None,
                    help="start tenure_server with a temporary data dir (on-disk logs, restart keeps state)")
    parser.addini("tenure_scope", "function (a fresh server per test) or session (one, reset per test)",
                  default="function")
    parser.addini("tenure_isolation", "with session scope: reset (default) clears the server before each test, "
                  "none keeps state between tests", default="reset")
    parser.addini("tenure_data_dir", "give tenure_server a temporary data dir", type="bool", default=False)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "tenure(**config): run this test's tenure_server with these ServerConfig "
                            "fields (data_dir=True: a fresh temporary data dir; topics={name: partitions}: "
                            "topics created before the test)")


def _scope(fixture_name: str, config) -> Literal["function", "session"]:
    scope = config.getoption("--tenure-scope") or config.getini("tenure_scope")
    if scope not in ("function", "session"):
        raise pytest.UsageError(f"tenure_scope must be function or session, not {scope!r}")
    return scope


def _want_data_dir(config) -> bool:
    opt = config.getoption("--tenure-data-dir")
    return bool(opt) if opt is not None else bool(config.getini("tenure_data_dir"))


def _server_config(overrides: dict, tmp_factory):
    from tenure.config import ServerConfig
    fields = {f.name for f in dataclasses.fields(ServerConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.tenure: unknown ServerConfig field(s) {unknown}; "
                                f"known: {sorted(fields)}")
    kw = {"port": 0, **overrides}
    if kw.get("data_dir") is True:
        kw["data_dir"] = str(tmp_factory.mktemp("tenure-data"))
    elif kw.get("data_dir") is False:
        kw["data_dir"] = None
    return ServerConfig(**kw)


@pytest.fixture(scope=_scope)
def _tenure_shared(request, tmp_path_factory):
    """The server the tenure_server fixture hands out when no marker asks for a dedicated one."""
    from tenure.server import ServerThread
    overrides = {"data_dir": True} if _want_data_dir(request.config) else {}
    with ServerThread(_server_config(overrides, tmp_path_factory)) as server:
        yield server


@pytest.fixture
def tenure_server(request, tmp_path_factory):
    """A tenure server on 127.0.0.1:0 (a tenure.server.ServerThread); see the module's docs."""
    marker = request.node.get_closest_marker("tenure")
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("@pytest.mark.tenure takes keyword arguments (ServerConfig fields) only")
        from tenure.server import ServerThread
        overrides = dict(marker.kwargs)
        topics = overrides.pop("topics", {})
        if not isinstance(topics, dict):
            raise pytest.UsageError("@pytest.mark.tenure(topics=...) takes {topic name: partitions}")
        if "data_dir" not in overrides and _want_data_dir(request.config):
            overrides["data_dir"] = True
        with ServerThread(_server_config(overrides, tmp_path_factory)) as server:
            server.create_topics(topics)
            yield server
        return
    server = request.getfixturevalue("_tenure_shared")
    if _scope("tenure_server", request.config) == "session" and request.config.getini("tenure_isolation") != "none":
        server.reset()
    yield server


@pytest.fixture
def tenure_bootstrap(tenure_server) -> str:
    return tenure_server.bootstrap


@pytest.fixture
def tenure_server_async(tenure_server):
    """`tenure_server` for async tests: a tenure.server.AsyncServerThread (awaitable waits)."""
    from tenure.server import AsyncServerThread
    return AsyncServerThread(tenure_server)
