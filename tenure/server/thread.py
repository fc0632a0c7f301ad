"""An in-process server on its own event-loop thread, for tests: `ServerThread` (synchronous clients)
and `AsyncServerThread` (async tests: its waits are coroutines)."""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeGuard

from tenure.config import ServerConfig
from tenure.control.capture import Capture, Exchange
from tenure.control.faults import Faults
from tenure.control.hooks import Hook, Hooks
from tenure.control.network import Network
from tenure.control.registry import add_thread_methods
from tenure.counters import Metrics
from tenure.server import eventloop
from tenure.server.lifecycle import Server, reopen

if TYPE_CHECKING:           # (the group views: imported by the controls that make them, tenure/control/registry.py)
    from tenure.control.views import GroupView
    from tenure.storage.compaction import CleanStats

log = logging.getLogger("tenure.server")
eventloop.preload()          # uvloop imported with this module, not in the first ServerThread's start


@add_thread_methods
class ServerThread:
    """An in-process server on its own event loop thread: for tests driving synchronous clients.

    Besides `bootstrap`, it offers the inspection and fault-injection surface of docs/testing.md, each
    call run on the server's loop: `group(id)`, `groups()`, `rebalances(id)`, `no_rebalance(id)`,
    `faults` (fail/close/delay rules), `on_request` (request hooks), `requests` (the request capture),
    `network` (partition/loss/delay/bandwidth/reset, heal), `expire_session`, `advance_clock`,
    `force_rebalance`, `restart`, `metrics` and `metrics_text()`."""

    def __init__(self, config: ServerConfig | None = None, **settings) -> None:
        """`config`, or a ServerConfig on a free port made of `settings` (`ServerThread(brokers=3)`)."""
        if config is not None and settings:
            raise TypeError("give a ServerConfig or its fields as keywords, not both")
        self.config = config or ServerConfig(**{"port": 0, **settings})
        self.loop = eventloop.new_event_loop(self.config.event_loop)     # uvloop's when installed
        self.server: Server | None = None
        self.faults = Faults()
        self.metrics = Metrics()
        self.hooks = Hooks()                     # on_request (tenure/control/hooks.py)
        self.network = Network()                 # network faults (tenure/control/network.py)
        self.capture = Capture(self.config.capture_requests)     # requests() (tenure/control/capture.py)
        self._thread = threading.Thread(target=self._run, name="tenure-server", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._watcher: asyncio.Task | None = None
        self._restart_lock = asyncio.Lock()

    @property
    def live(self) -> Server:
        """The running server (after `start()`; a restart replaces it)."""
        if self.server is None:
            raise RuntimeError("the server is not started")
        return self.server

    if TYPE_CHECKING:           # made by add_thread_methods from tenure/control/registry.py
        def group(self, group_id: str) -> GroupView | None: ...
        def expect_group(self, group_id: str, members: int | None) -> None: ...

    # ------------------------------------------------------------------ request capture (docs/testing.md)
    def requests(self, api: str | int | None = None, group: str | None = None, client_id: str | None = None,
                 topic: str | None = None, broker: int | None = None, connection: int | None = None,
                 error: str | int | None = None, since: int | None = None) -> list[Exchange]:
        """The requests the server served, oldest first, with their answers (tenure/control/capture.py
        Exchange), of `api`, naming `group` / `topic`, from `client_id`, ... (the filters given); the
        capture keeps the latest `capture_requests` of them (the admin endpoint's GET /requests)."""
        return self.capture.query(api=api, group=group, client_id=client_id, topic=topic, broker=broker,
                                  connection=connection, error=error, since=since)

    # ------------------------------------------------------------------ request hooks (docs/testing.md)
    def on_request(self, api: str | int, fn: Callable, *, group: str | None = None, topic: str | None = None,
                   client_id: str | None = None, broker: int | None = None) -> Hook:
        """Call `fn(call)` with each request of `api` ("*": every API) naming `group` / `topic`, from
        `client_id`, on `broker` (those given): it lets it through (None), answers it (a response object,
        `call.error(code)`), closes the connection (`call.drop()`), delays it (`call.delay(ms)`) or changes
        the answer (`call.on_response(fn)`). The handle is a context manager (removed at the block's end,
        re-raising what the function raised) - see tenure/control/hooks.py."""
        return self.hooks.add(api, fn, group=group, topic=topic, client_id=client_id, broker=broker)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.server = Server(self.config, faults=self.faults, metrics=self.metrics, hooks=self.hooks,
                                 network=self.network, capture=self.capture)
            self.loop.run_until_complete(self.server.start())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            if self.server is not None:    # e.g. the port is taken after recovery: release the data dir
                try:
                    self.loop.run_until_complete(self.server.close())
                except Exception:
                    log.exception("closing a server that failed to start")
            self._ready.set()
            return
        self._watcher = self.loop.create_task(self._watch_restarts())
        self._ready.set()
        self.loop.run_forever()
        self._watcher.cancel()
        self.loop.run_until_complete(asyncio.wait([self._watcher]))
        self.loop.run_until_complete(self.live.close())
        self.loop.close()

    async def _watch_restarts(self) -> None:
        """POST /restart on the admin endpoint asks the server for a restart; this performs it. A storage
        failure (fail-stop, Server._fatal) closes the server: its clients see their connections closed,
        nothing more is acknowledged, as when `tenure serve` exits with code 3."""
        while True:
            server = self.live
            waits = [asyncio.ensure_future(server.restart_requested.wait()),
                     asyncio.ensure_future(server.stop_requested.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if server.stop_requested.is_set():
                log.critical("stopping after a storage failure: %s", server.fatal_error)
                await server.close()
                return
            await self._restart()

    async def _restart(self, wipe: bool = False) -> None:
        async with self._restart_lock:
            if wipe:
                self.metrics = Metrics()
            self.server = await reopen(self.live, wipe=wipe, metrics=self.metrics)

    def start(self, timeout_s: float = 600.0) -> ServerThread:
        """Start the server and return once it serves (its data dir loaded), or raise: the start-up's own error,
        or TimeoutError after `timeout_s` (a large data dir takes a while to load; it is never handed out
        half-loaded - unless `load_in_background` asks for that: then its groups are answered
        COORDINATOR_LOAD_IN_PROGRESS until they are loaded)."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(min(1.0, max(0.0, deadline - time.monotonic()))):
            if not self._thread.is_alive():
                raise RuntimeError("the tenure server thread ended before it was ready")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"tenure was not ready within {timeout_s:g} s (still loading its data dir?)")
        if self._error is not None:
            raise self._error
        return self

    @property
    def bootstrap(self) -> str:
        assert self.server is not None
        return self.server.bootstrap

    @property
    def listeners(self) -> dict[str, str]:
        """{listener name: "H:P1,H:P2,..."}: each listener's bootstrap string."""
        assert self.server is not None
        return self.server.listener_bootstrap()

    @property
    def ca_file(self) -> str | None:
        """The CA certificate (PEM) clients of the TLS listeners trust (None: no TLS listener)."""
        assert self.server is not None
        return self.server.ca_file

    def issue_client_cert(self, common_name: str, directory: str | None = None):
        """A client certificate for `common_name` signed by the generated CA (security/tls.py ClientCert)."""
        assert self.server is not None
        return self.server.issue_client_cert(common_name, directory)

    def client_settings(self, listener: str = "PLAINTEXT", user: str | None = None, *, mechanism: str | None = None,
                        password: str | None = None, cert: str | None = None):
        """Settings for a client of `listener` (security/clients.py ClientSettings: .confluent(), .kafka_python(),
        .aiokafka(), .java()): its bootstrap, the CA to trust, and as `user` (SASL: `mechanism`, default
        SCRAM-SHA-512; the password given with --user/the marker unless `password`); `cert`: a client certificate
        for that common name from the generated CA."""
        from tenure.security.clients import ClientSettings
        from tenure.security.users import parse_user
        assert self.server is not None
        spec = next((s for s in self.server.listener_specs if s.name == listener.upper()), None)
        if spec is None:
            raise KeyError(f"no listener {listener!r}; this server has {[s.name for s in self.server.listener_specs]}")
        settings = ClientSettings(self.listeners[spec.name], spec.protocol, self.ca_file if spec.tls else None)
        if user is not None and spec.sasl:
            known = dict(parse_user(u) for u in self.config.users or ())
            settings = settings.as_user(user, password if password is not None else known.get(user),
                                        mechanism or "SCRAM-SHA-512")
        if cert is not None:
            issued = self.issue_client_cert(cert)
            settings = ClientSettings(settings.bootstrap, settings.protocol, settings.ca_file, settings.mechanism,
                                      settings.username, settings.password, issued.cert_file, issued.key_file,
                                      issued.keystore_file)
        return settings

    @property
    def port(self) -> int:
        assert self.server is not None and self.server.port is not None
        return self.server.port

    @property
    def admin_port(self) -> int | None:
        assert self.server is not None
        return self.server.admin_port

    def call(self, fn, *args, timeout: float = 120):
        """Run fn(*args) on the server's loop and return its result (awaited if it is awaitable: a control
        that completes later, e.g. a broker stop waiting for its coordinators to load elsewhere)."""
        async def run():
            result = fn(*args)
            return await result if inspect.isawaitable(result) else result
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    # ------------------------------------------------------------------ inspection
    # group(id), groups(), expire_session(group, member), advance_clock(ms), force_rebalance(group): one
    # method per control of tenure/control/registry.py (add_thread_methods), each run on the server's loop
    def rebalances(self, group_id: str) -> int:
        """Rebalances the group started since this server (thread) started, restarts included."""
        return self.call(self.metrics.rebalance_count, group_id)

    @contextlib.contextmanager
    def no_rebalance(self, *group_ids: str):
        """`with server.no_rebalance("g"): ...` fails (AssertionError) if any of the groups started a
        rebalance or changed generation inside the block; the message names the causes of the
        rebalances started inside the block."""
        def now(g):
            return (self.rebalances(g), getattr(self.group(g), "generation", None),
                    self.call(self.metrics.rebalance_causes, g))
        before = {g: now(g) for g in group_ids}
        yield
        after = {g: now(g) for g in group_ids}
        changed = {g: (before[g], after[g]) for g in group_ids if before[g][:2] != after[g][:2]}

        def causes(b: dict, a: dict) -> dict:
            return {c: n - b.get(c, 0) for c, n in a.items() if n > b.get(c, 0)}
        if changed:
            raise AssertionError("rebalance(s) happened: " + ", ".join(
                f"{g}: rebalances {b[0]} -> {a[0]}, generation {b[1]} -> {a[1]} (causes in the block: "
                f"{causes(b[2], a[2])})" for g, (b, a) in changed.items()))

    def wait_for_group(self, group_id: str, state: str | None = "Stable", members: int | None = None,
                       timeout: float = 30.0) -> GroupView:
        """Wait until the group exists, is in `state` (None: any) and has `members` members (None: any);
        returns its view. Raises TimeoutError after `timeout` seconds, naming what it saw last."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.group(group_id)
            if group_is(view, state, members):
                return view
            if time.monotonic() >= deadline:
                raise TimeoutError(waited_too_long(group_id, state, members, timeout, view))
            time.sleep(0.02)

    def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics now ({name: partitions}); an existing name is an error (tenure.broker's)."""
        def create():
            for name, partitions in topics.items():
                self.live.topics.create(name, partitions)
        self.call(create)

    def metrics_text(self) -> str:
        """The Prometheus exposition the admin endpoint serves at /metrics."""
        from tenure.control.metrics import render
        return self.call(lambda: render(self.server)).decode()

    # ------------------------------------------------------------------ the cluster (docs/cluster.md)
    # brokers(), stop_broker(id), start_broker(id), set_broker_slow(id, delay_ms),
    # set_broker_unreachable(id, bool), coordinator_of(group_id), leader_of(topic, partition): registry
    # controls; these two name their target `to_broker`
    def move_coordinator(self, group_id: str, to_broker: int) -> int:
        """Move a group's coordinator (its offsets partition's leadership) to `to_broker`; returns once it
        is loaded and serving there, with the offsets partition moved."""
        return self.call(lambda: self.live.move_coordinator(group_id, to_broker))

    def move_leader(self, topic: str, partition: int, to_broker: int) -> None:
        """Move a partition's leadership to `to_broker` (its leader epoch bumps; an offsets partition's
        coordinator moves with it and is loaded when this returns)."""
        self.call(lambda: self.live.move_leader(topic, partition, to_broker))

    # ------------------------------------------------------------------ controls the thread hosts itself
    def restart(self) -> ServerThread:
        """Close the server and start it again on the same port and data dir (see reopen())."""
        asyncio.run_coroutine_threadsafe(self._restart(), self.loop).result(120)
        return self

    def reset(self) -> ServerThread:
        """As new, at the same address: fault rules and metrics cleared, the data dir (if any) emptied,
        the server restarted - no groups, topics, offsets or clock offset left."""
        self.faults.clear()
        self.network.heal()
        self.hooks.clear()
        self.capture.clear()
        asyncio.run_coroutine_threadsafe(self._restart(wipe=True), self.loop).result(120)
        return self

    def compact_now(self) -> CleanStats:
        """Server.compact_now on the server's loop (log cleaner; for tests)."""
        assert self.server is not None
        return asyncio.run_coroutine_threadsafe(self.server.compact_now(), self.loop).result(120)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def group_is(view: GroupView | None, state: str | None, members: int | None) -> TypeGuard[GroupView]:
    """Whether a group view (None: the group is unknown) is what `wait_for_group` waits for."""
    return (view is not None and (state is None or view.state == state)
            and (members is None or len(view.members) == members))


def waited_too_long(group_id: str, state: str | None, members: int | None, timeout: float,
                    view: GroupView | None) -> str:
    want = ", ".join(f"{k} {v}" for k, v in (("state", state), ("members", members)) if v is not None)
    seen = "unknown to the server" if view is None else \
        f"state {view.state}, {len(view.members)} member(s), generation {view.generation}"
    return f"group {group_id!r} not {want or 'known'} after {timeout} s: last seen {seen}"


class AsyncServerThread:
    """A `ServerThread` for async tests (aiokafka): the waits are coroutines, so the test's own event
    loop - and the clients' heartbeats on it - keeps running while a test waits. Everything else is the
    ServerThread's own attribute (`bootstrap`, `group`, `no_rebalance`, `faults`, ...): those calls
    return at once. The pytest plugin's `tenure_server_async` fixture is one of these."""

    def __init__(self, server: ServerThread) -> None:
        self.sync = server

    def __getattr__(self, name: str):
        return getattr(self.sync, name)

    async def wait_for_group(self, group_id: str, state: str | None = "Stable", members: int | None = None,
                             timeout: float = 30.0) -> GroupView:
        """ServerThread.wait_for_group, awaiting between looks."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.sync.group(group_id)
            if group_is(view, state, members):
                return view
            if time.monotonic() >= deadline:
                raise TimeoutError(waited_too_long(group_id, state, members, timeout, view))
            await asyncio.sleep(0.02)

    async def restart(self) -> AsyncServerThread:
        """ServerThread.restart, awaited (the server restarts on its own thread)."""
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.sync._restart(), self.sync.loop))
        return self
