"""Request-level fault injection: the rules a test (or `tenure fault ...`) sets on a running server.

    server.faults.fail("JoinGroup", "COORDINATOR_NOT_AVAILABLE", count=2)   # next 2 JoinGroups get error 15
    server.faults.close("Heartbeat")                                         # next Heartbeat: connection closed
    server.faults.delay("OffsetCommit", 500, count=None)                     # every OffsetCommit waits 500 ms
    server.faults.clear()

A rule matches one API (by name or key) or every API (`"*"`). For each request the server takes, in
order: every matching `delay` rule adds its latency (the connection keeps answering in request order,
so later requests on it wait too, as with a slow broker); then the first matching `fail` or `close`
rule decides the answer - a whole-request error built by `tenure.protocol.error_responses` (the
request is not handled, so no state changes) or a closed connection (the request is not handled
either). `count` is how many requests a rule applies to (None: until cleared). Rules are plain data,
safe to set from any thread; `rules()` lists what is left of them. Every value is checked when a rule is
set (a ValueError names the field and what it accepts), and at most MAX_RULES rules are kept.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import asdict, dataclass
from typing import Any

from tenure.protocol.apis import SUPPORTED
from tenure.protocol.error_responses import can_fail
from tenure.protocol.errors import ErrorCode

ACTIONS = ("fail", "close", "delay")
ANY = "*"
MAX_RULES = 1000                       # rules kept at once: each request checks them all
MAX_COUNT = 2**31 - 1                  # a rule's count, as Kafka's int32 counts
MAX_DELAY_MS = 2**31 - 1               # a delay, as Kafka's int32 timeouts (~24.8 days)
SPEC_FIELDS = {"action", "api", "error", "ms", "count"}


class TooManyRules(ValueError):
    """MAX_RULES rules are set already."""


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def api_key(api: str | int) -> int | None:
    """An API key from a key or a name ("JoinGroup", "join_group", "joingroup"); None for "*"."""
    if api == ANY or api is None:
        return None
    if not isinstance(api, (int, str)) or isinstance(api, bool):
        raise ValueError(f"api: want an API name or key, or '*', not {api!r}")
    if isinstance(api, int) or (isinstance(api, str) and api.lstrip("-").isdigit()):
        key = int(api)
        if key not in SUPPORTED:
            raise ValueError(f"API key {key} is not served by tenure")
        return key
    want = str(api).replace("_", "").replace("-", "").lower()
    for key, spec in SUPPORTED.items():
        if spec.name.lower() == want:
            return key
    raise ValueError(f"unknown API {api!r}; served: {', '.join(sorted(s.name for s in SUPPORTED.values()))}")


def error_code(error: str | int) -> int:
    """A Kafka error code from a number or a name ("NOT_COORDINATOR", "not_coordinator")."""
    if not isinstance(error, (int, str)) or isinstance(error, bool):
        raise ValueError(f"error: want a Kafka error name or code, not {error!r}")
    if isinstance(error, int) or (isinstance(error, str) and error.lstrip("-").isdigit()):
        code = int(error)
        if not -1 <= code <= 32767:
            raise ValueError(f"error code {code} is not an int16 Kafka error code")
        return code
    try:
        return int(ErrorCode[str(error).upper()])
    except KeyError:
        pass
    import kafka.errors as ke  # every Kafka error kafka-python knows, by its wire name
    known: list[Any] = [cls for cls in vars(ke).values() if isinstance(cls, type)      # untyped: errno, message
                        and issubclass(cls, ke.BrokerResponseError) and cls is not ke.BrokerResponseError]
    for cls in known:
        if (getattr(cls, "message", None) or "").upper() == str(error).upper():
            return cls.errno
    raise ValueError(f"unknown Kafka error {error!r}")


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        import kafka.errors as ke
        cls = ke.kafka_errors.get(code)
        return getattr(cls, "message", None) or str(code)


@dataclass
class Rule:
    """One fault rule: which API it matches, what it does (fail, close, delay) and how many requests it has left."""
    id: int
    action: str                        # fail | close | delay
    api: int | None                    # None: every API
    error: int | None = None           # fail: the Kafka error code
    delay_ms: int = 0                  # delay: added latency
    remaining: int | None = 1          # requests left; None: until cleared
    applied: int = 0

    def matches(self, key: int) -> bool:
        return (self.api is None or self.api == key) and (self.remaining is None or self.remaining > 0)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["api"] = ANY if self.api is None else SUPPORTED[self.api].name
        d["error_name"] = None if self.error is None else error_name(self.error)
        return d


class Decision:
    """What to do with one request: wait `delay_ms`, then answer normally, with `error`, or close. A rule
    decides with these; a request hook (tenure/control/hooks.py) also with `response` (its own answer) and
    `rewrites` ((hook, fn) pairs changing the answer the server would send); `hooked` says which decided. (A
    plain class: the dispatcher reads its fields and knows no decision by `is NO_FAULT`, nothing compares or
    prints one, and a dataclass's build cost ~0.5 ms of every server's start-up.)"""

    __slots__ = ("delay_ms", "error", "close", "rules", "response", "rewrites", "hooked")

    def __init__(self, delay_ms: int = 0, error: int | None = None, close: bool = False, rules: tuple[int, ...] = (),
                 response: Any = None, rewrites: tuple = (), hooked: bool = False) -> None:
        self.delay_ms = delay_ms
        self.error = error
        self.close = close
        self.rules = rules
        self.response = response
        self.rewrites = rewrites
        self.hooked = hooked


NO_FAULT = Decision()


class Faults:
    def __init__(self) -> None:
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.active = False            # a fast check for the server's hot path

    def _add(self, rule: Rule) -> Rule:
        count = rule.remaining
        if count is not None and not (_whole(count) and 1 <= count <= MAX_COUNT):
            raise ValueError(f"count: want a whole number of requests from 1 to {MAX_COUNT}, not {count!r} "
                             "(a rule that stays until cleared has no count)")
        with self._lock:
            if len(self._rules) >= MAX_RULES:
                raise TooManyRules(f"{MAX_RULES} fault rules are set already; clear some first "
                                   "(Faults.clear, DELETE /faults, tenure fault clear)")
            self._rules.append(rule)
            self.active = True
        return rule

    def fail(self, api: str | int, error: str | int, count: int | None = 1) -> Rule:
        """Answer the next `count` requests of `api` with Kafka error `error` (unhandled)."""
        key, code = api_key(api), error_code(error)
        if key is not None and not can_fail(key):
            raise ValueError(f"{SUPPORTED[key].name} has no whole-request error answer; use close or delay")
        return self._add(Rule(next(self._ids), "fail", key, error=code, remaining=count))

    def close(self, api: str | int, count: int | None = 1) -> Rule:
        """Close the connection instead of answering the next `count` requests of `api`."""
        return self._add(Rule(next(self._ids), "close", api_key(api), remaining=count))

    def delay(self, api: str | int, ms: int, count: int | None = None) -> Rule:
        """Add `ms` of latency to the next `count` requests of `api` (None: until cleared)."""
        if not (_whole(ms) and 0 <= ms <= MAX_DELAY_MS):
            raise ValueError(f"ms: want a whole number of milliseconds from 0 to {MAX_DELAY_MS}, not {ms!r}")
        return self._add(Rule(next(self._ids), "delay", api_key(api), delay_ms=ms, remaining=count))

    def add(self, spec: dict) -> Rule:
        """A rule from plain data (the admin endpoint's JSON): {"action", "api", "error"?, "ms"?, "count"?};
        `count` null (or left out, for delay) keeps the rule until cleared. Anything else is a ValueError
        naming the field."""
        unknown = sorted(set(spec) - SPEC_FIELDS)
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(map(repr, unknown))}; a rule has "
                             f"{', '.join(sorted(SPEC_FIELDS))}")
        action = spec.get("action")
        if action not in ACTIONS:
            raise ValueError(f"action: want one of {', '.join(ACTIONS)}, not {action!r}")
        wants = {"fail": {"error"}, "close": set(), "delay": {"ms"}}[action]
        for field in wants - set(spec):
            raise ValueError(f"{field}: required for a {action} rule")
        for field in {"error", "ms"} - wants:
            if field in spec:
                raise ValueError(f"{field}: only for a {'fail' if field == 'error' else 'delay'} rule, "
                                 f"not {action}")
        api = spec.get("api", ANY)
        count = spec.get("count", None if action == "delay" else 1)
        if action == "fail":
            return self.fail(api, spec["error"], count)
        if action == "close":
            return self.close(api, count)
        return self.delay(api, spec["ms"], count)

    def clear(self, api: str | int | None = None) -> int:
        """Remove every rule (or those of one API); returns how many were removed."""
        key = None if api in (None, ANY) else api_key(api)
        with self._lock:
            keep = [r for r in self._rules if api not in (None, ANY) and r.api != key]
            n = len(self._rules) - len(keep)
            self._rules = keep
            self.active = bool(keep)
        return n

    def rules(self) -> list[Rule]:
        with self._lock:
            return [Rule(**asdict(r)) for r in self._rules]

    def decide(self, key: int) -> Decision:
        """Consume the rules that apply to one request of API `key`."""
        if not self.active:
            return NO_FAULT
        with self._lock:
            delay, error, close, used = 0, None, False, []
            for r in self._rules:
                if not r.matches(key):
                    continue
                if r.action == "delay":
                    delay += r.delay_ms
                elif error is None and not close:
                    if r.action == "fail":
                        error = r.error
                    else:
                        close = True
                else:
                    continue
                used.append(r.id)
                r.applied += 1
                if r.remaining is not None:
                    r.remaining -= 1
            self._rules = [r for r in self._rules if r.remaining is None or r.remaining > 0]
            self.active = bool(self._rules)
        if not used:
            return NO_FAULT
        return Decision(delay, error, close, tuple(used))
