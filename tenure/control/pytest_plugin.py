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
  topics created before the test starts ({name: partitions}); `groups={"g": 4}`: the test starts 4 members of
  group g - the group's first rebalance ends as soon as they have joined, with no initial delay
  (`tenure_server.expect_group("g", 4)` says the same from inside a test); `acls=["allow User:* read topic:t",
  ...]`: the server checks ACLs with these created at start (docs/security.md#acls).
- `--tenure-data-dir` / ini `tenure_data_dir = true`: every `tenure_server` gets a temporary data dir.
- `@pytest.mark.tenure(listeners=["PLAINTEXT", "SASL_SSL"], users={"alice": "secret"})`: listeners (a bare
  name: 127.0.0.1 on a free port; or NAME://HOST:PORT) and SASL users ({name: password}); with
  `tenure_server.client_settings("SASL_SSL", "alice")` a test gets settings ready for each client
  (`.confluent()`, `.kafka_python()`, `.aiokafka()`, `.java()`; docs/security.md).
- `tenure_clients`: `tenure_clients("SASL_SSL", "alice")` is `tenure_server.client_settings(...)`.
- `tenure_bootstrap`: just the "host:port" string.
- at the end of each test its request hooks (`on_request`) are removed and its network faults healed; an
  exception a hook raised that the test did not see fails the test.
- `tenure_server_async`: the same server for async tests (aiokafka): a `tenure.server.AsyncServerThread`
  whose waits (`await wait_for_group(...)`, `await restart()`) let the test's event loop run.
"""
from __future__ import annotations

import dataclasses
import difflib
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
                            "topics created before the test; listeners=[...], users={name: password})")


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
        hints = [f"{key!r}: did you mean {' or '.join(map(repr, close))}?" for key in unknown
                 if (close := difflib.get_close_matches(key, sorted(fields | {"topics"}), n=2, cutoff=0.6))]
        raise pytest.UsageError(f"@pytest.mark.tenure: unknown ServerConfig field(s) {unknown}"
                                + (f" ({'; '.join(hints)})" if hints else "")
                                + f"; known: {sorted(fields | {'topics'})}")
    kw = {"port": 0, **overrides}
    if isinstance(kw.get("users"), dict):               # users={"alice": "secret"}
        kw["users"] = tuple(f"{name}:{password}" for name, password in kw["users"].items())
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
        groups = overrides.pop("groups", {})
        if not isinstance(groups, dict) or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                                   for n in groups.values()):
            raise pytest.UsageError("@pytest.mark.tenure(groups=...) takes {group id: members it starts with}")
        if "data_dir" not in overrides and _want_data_dir(request.config):
            overrides["data_dir"] = True
        with ServerThread(_server_config(overrides, tmp_path_factory)) as server:
            server.create_topics(topics)
            for group_id, members in groups.items():
                server.expect_group(group_id, members)
            yield server
            _end_of_test(server)
        return
    server = request.getfixturevalue("_tenure_shared")
    if _scope("tenure_server", request.config) == "session" and request.config.getini("tenure_isolation") != "none":
        server.reset()
    yield server
    _end_of_test(server)


def _end_of_test(server) -> None:
    """A test's request hooks are removed and its network faults healed when it ends; an exception a hook
    raised and the test did not see (at the end of its `with` block) fails the test here."""
    server.network.heal()
    left = server.hooks.clear()
    if left:
        hook, first = left[0]
        pytest.fail(f"{len(left)} exception(s) raised by request hook(s) during the test; first, by "
                    f"{hook.describe()}: {type(first).__name__}: {first}", pytrace=False)


@pytest.fixture
def tenure_bootstrap(tenure_server) -> str:
    return tenure_server.bootstrap


@pytest.fixture
def tenure_clients(tenure_server):
    """`tenure_clients(listener, user=None, mechanism=..., cert=...)`: client settings for a listener of
    tenure_server (tenure.security.clients.ClientSettings)."""
    return tenure_server.client_settings


@pytest.fixture
def tenure_server_async(tenure_server):
    """`tenure_server` for async tests: a tenure.server.AsyncServerThread (awaitable waits)."""
    from tenure.server import AsyncServerThread
    return AsyncServerThread(tenure_server)
