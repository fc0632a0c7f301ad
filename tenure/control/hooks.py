"""Request hooks: a test's own Python function, called with each request of one API the server takes.

    def second_join_rebalances(call):                  # call: a Call
        joins.append(call.ctx.client_id)
        if len(joins) == 2:
            return call.error("REBALANCE_IN_PROGRESS")  # the API's own whole-request error answer
        return None                                     # let it through

    with server.on_request("JoinGroup", second_join_rebalances, group="orders") as hook:
        ...
    assert hook.calls == 2

A hook sees the decoded request (`call.request`, a kafka-python object), its header (`call.header`: API key,
version, correlation id, client id) and its `RequestContext` (`call.ctx`: connection, peer, broker, clock).
What it returns decides the answer: None lets the request through to its owner; a response object of the
API (built by the hook, or `call.error(code)`) is sent instead (the request is not handled: no state
changes); `call.drop()` closes the connection instead of answering. Before returning, `call.delay(ms)` adds
latency and `call.on_response(fn)` changes the answer the server would send (`fn(response)` returns a
response, or None to keep the one it may have changed in place). An async function is awaited on the
server's loop (it may wait for something; the connection answers in order, so its later requests wait).

Filters: `group` (the request names it: group id, FindCoordinator key, DescribeGroups list, ...), `topic`,
`client_id`, `broker` (the node id whose listener took the request); all given must match. Hooks are
checked in the order they were added; the first whose function returns an answer or a drop decides, the
delays of all add up. They run after the fault rules (tenure/control/faults.py): one mechanism (a `Decision`
per request, applied by the dispatcher) with two front ends - rules as data and hooks as code.

A hook whose function raises is reported, never crashes the server: the request goes on as if the hook
had returned None, the exception is logged, kept on the handle (`hook.errors`) and on the server
(`server.hooks.errors`), and re-raised (HookError) when the `with` block ends or by `hook.remove()`;
the pytest plugin fails the test at its end if any is left. Hooks are removed at the end of their block,
by `remove()`, or at the end of the test (the plugin clears them).
"""
from __future__ import annotations

import inspect
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenure.control.capture import summarize
from tenure.control.faults import NO_FAULT, Decision, api_key, error_code
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.error_responses import can_fail, error_response

log = logging.getLogger("tenure.server")
FILTERS = ("group", "topic", "client_id", "broker")
MAX_HOOKS = 1000
MAX_ERRORS_KEPT = 100                  # exceptions kept per hook (the rest are counted in `failures`)


class HookError(AssertionError):
    """A hook's function raised (the first such exception is its __cause__)."""


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


DROP = _Drop()                     # what `call.drop()` returns: close the connection instead of answering


@dataclass(eq=False)
class Call:
    """One request as a hook sees it, and what the hook asks for."""
    header: Any                        # tenure.protocol.codec.Request: api_key, api_version, correlation_id, ...
    ctx: Any                           # tenure.protocol.context.RequestContext
    delay_ms: int = 0
    rewrites: list[Callable] = field(default_factory=list)

    @property
    def request(self):
        """The decoded request body (kafka-python's object for this API and version)."""
        return self.header.body

    @property
    def api(self) -> str:
        return self.header.name

    @property
    def version(self) -> int:
        return self.header.api_version

    def summary(self) -> dict[str, Any]:
        """What the request names (group, groups, topics, member id, instance id, ...; see capture.py)."""
        return summarize(self.header.api_key, self.header.body)

    def error(self, error: str | int):
        """The API's own whole-request answer with Kafka error `error` (a name or a code): what the
        server's handlers answer such an error with (tenure/protocol/error_responses.py)."""
        if not can_fail(self.header.api_key):
            raise ValueError(f"{self.api} has no whole-request error answer; drop or delay it instead")
        return error_response(self.header, error_code(error))

    def delay(self, ms: int) -> None:
        """Wait `ms` more before the request goes on (or before the hook's answer is sent)."""
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise ValueError(f"ms: want a whole number of milliseconds >= 0, not {ms!r}")
        self.delay_ms += ms

    def drop(self) -> _Drop:
        """Return this from the hook: the connection is closed instead of answering."""
        return DROP

    def on_response(self, fn: Callable[[Any], Any]) -> None:
        """Call `fn(response)` with the answer the server would send; what it returns (if not None) is sent."""
        self.rewrites.append(fn)


class Hook:
    """A registered hook: a context manager (removed at the end of the block) with `calls` (requests it
    was called with), `answered` (requests it answered or dropped) and `errors`."""

    def __init__(self, owner: Hooks, id: int, api: int | None, fn: Callable, filters: dict) -> None:
        self.owner, self.id, self.api, self.fn, self.filters = owner, id, api, fn, filters
        self.calls = 0
        self.answered = 0
        self.errors: list[BaseException] = []
        self.failures = 0                  # times the function raised (errors keeps the first MAX_ERRORS_KEPT)
        self._reported = 0

    def matches(self, req, ctx, summary: dict | None) -> bool:
        if self.api is not None and self.api != req.api_key:
            return False
        f = self.filters
        if "client_id" in f and ctx.client_id != f["client_id"]:
            return False
        if "broker" in f and ctx.broker_id != f["broker"]:
            return False
        if "group" in f and (summary is None or (summary.get("group") != f["group"]
                                                 and f["group"] not in summary.get("groups", ()))):
            return False
        if "topic" in f and (summary is None or f["topic"] not in summary.get("topics", ())):
            return False
        return True

    def remove(self) -> None:
        """Unregister; raises HookError if the function raised since the last report."""
        self.owner.remove(self)
        self.check()

    def check(self) -> None:
        """Raise HookError for the first exception of the function not reported yet."""
        if self.failures > self._reported:
            first = self.errors[min(self._reported, len(self.errors) - 1)]
            self._reported = self.failures
            self.owner.reported(self)
            raise HookError(f"hook {self.describe()} raised {self.failures} time(s); first: "
                            f"{type(first).__name__}: {first}") from first

    def describe(self) -> str:
        api = "*" if self.api is None else SUPPORTED[self.api].name
        name = getattr(self.fn, "__name__", repr(self.fn))
        extra = "".join(f", {k}={v!r}" for k, v in self.filters.items())
        return f"{name} on {api}{extra}"

    def __enter__(self) -> Hook:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.owner.remove(self)
        if exc_type is None:
            self.check()

    def __repr__(self) -> str:
        return f"<Hook {self.id}: {self.describe()}, {self.calls} call(s)>"


class Hooks:
    """The hooks of one server (kept across restarts, like the fault rules). `add` from any thread;
    `intercept` on the server's loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: tuple[Hook, ...] = ()
        self._ids = itertools.count(1)
        self.errors: list[tuple[Hook, BaseException]] = []      # every exception of every hook, not yet reported
        self.active = False

    def add(self, api: str | int, fn: Callable, **filters) -> Hook:
        """Call `fn(call)` for each request of `api` (name, key or "*") matching `filters` (group, topic,
        client_id, broker)."""
        if not callable(fn):
            raise ValueError(f"fn: want a callable taking a Call, not {fn!r}")
        unknown = sorted(set(filters) - set(FILTERS))
        if unknown:
            raise ValueError(f"unknown filter(s) {', '.join(unknown)}; a hook filters on {', '.join(FILTERS)}")
        given = {k: v for k, v in filters.items() if v is not None}
        if "broker" in given and (isinstance(given["broker"], bool) or not isinstance(given["broker"], int)):
            raise ValueError(f"broker: want a broker (node) id, not {given['broker']!r}")
        for k in ("group", "topic", "client_id"):
            if k in given and not isinstance(given[k], str):
                raise ValueError(f"{k}: want a string, not {given[k]!r}")
        hook = Hook(self, next(self._ids), api_key(api), fn, given)
        with self._lock:
            if len(self._hooks) >= MAX_HOOKS:
                raise ValueError(f"{MAX_HOOKS} hooks are set already; remove some first")
            self._hooks = (*self._hooks, hook)
            self.active = True
        return hook

    def remove(self, hook: Hook) -> None:
        with self._lock:
            self._hooks = tuple(h for h in self._hooks if h is not hook)
            self.active = bool(self._hooks)

    def clear(self) -> list[tuple[Hook, BaseException]]:
        """Remove every hook; returns the exceptions not reported yet (and forgets them)."""
        with self._lock:
            self._hooks = ()
            self.active = False
            left, self.errors = self.errors, []
        return left

    def reported(self, hook: Hook) -> None:
        with self._lock:
            self.errors = [(h, e) for h, e in self.errors if h is not hook]

    def hooks(self) -> tuple[Hook, ...]:
        return self._hooks

    def _failed(self, hook: Hook, exc: BaseException, what: str) -> None:
        hook.failures += 1
        if len(hook.errors) < MAX_ERRORS_KEPT:        # a hook raising on every request keeps only its first ones
            hook.errors.append(exc)
            with self._lock:
                self.errors.append((hook, exc))
        if hook.failures == 1:          # the first in full; the next ones in one line each, at debug level
            log.warning("hook %s raised %s (%s); the request goes on without it", hook.describe(),
                        type(exc).__name__, what, exc_info=exc)
        else:
            log.debug("hook %s raised %s again (%s): %s", hook.describe(), type(exc).__name__, what, exc)

    async def intercept(self, req, ctx) -> Decision:
        """What the hooks make of one request: a Decision (delay, answer, close, answer rewrites)."""
        hooks = self._hooks
        summary: dict | None = None
        call: Call | None = None
        answer: Any = None
        rewrites: list[tuple[Hook, Callable]] = []
        for hook in hooks:
            if summary is None and ("group" in hook.filters or "topic" in hook.filters):
                summary = summarize(req.api_key, req.body)
            if not hook.matches(req, ctx, summary):
                continue
            call = call or Call(req, ctx)
            before = (call.delay_ms, len(call.rewrites))
            hook.calls += 1
            try:
                result = hook.fn(call)
                if inspect.isawaitable(result):
                    result = await result
                want = SUPPORTED[req.api_key].response
                if result is not None and result is not DROP and not isinstance(result, want):
                    raise TypeError(f"a hook of {req.name} returns None, a {want.__name__} or call.drop(), "
                                    f"not {result!r}")
            except Exception as exc:
                call.delay_ms, call.rewrites[:] = before[0], call.rewrites[:before[1]]
                self._failed(hook, exc, f"{req.name} v{req.api_version}")
                continue
            rewrites.extend((hook, fn) for fn in call.rewrites[before[1]:])
            if result is not None:
                hook.answered += 1
                answer = result
                break
        if call is None:
            return NO_FAULT
        if answer is None and not call.delay_ms and not rewrites:
            return NO_FAULT
        return Decision(delay_ms=call.delay_ms, close=answer is DROP,
                        response=None if answer is DROP else answer, rewrites=tuple(rewrites), hooked=True)

    def rewrite(self, decision: Decision, req, body):
        """The answer after the hooks' `on_response` functions (one that raises is reported and skipped)."""
        for hook, fn in decision.rewrites:
            try:
                changed = fn(body)
                want = SUPPORTED[req.api_key].response
                if changed is not None and not isinstance(changed, want):
                    raise TypeError(f"on_response of {req.name} returns None or a {want.__name__}, not {changed!r}")
            except Exception as exc:
                self._failed(hook, exc, f"on_response of {req.name} v{req.api_version}")
                continue
            if changed is not None:
                body = changed
        return body

