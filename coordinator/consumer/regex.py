"""Regular-expression subscriptions (ConsumerGroupHeartbeat's SubscribedTopicRegex) resolved on the coordinator
as Kafka's resolves them.

Syntax and matching are RE2's, through Google's RE2 binding (google-re2), with the options Kafka's RE2/J
defaults amount to for topic names (Perl classes and word boundaries, `^`/`$` at the ends of the name); a
topic matches when the whole name matches (RE2/J's `matcher(name).matches()`), every topic of the topic table
is tried (internal ones too, as Kafka's metadata image lists them). Where RE2/J (what Kafka compiles with)
differs from the C++ RE2 the binding wraps, RE2/J wins: `\\C` and a capture group name used twice are refused,
and the description of a refused pattern is RE2/J's (`PatternSyntaxException.getDescription()`), so the
heartbeat's INVALID_REGULAR_EXPRESSION (128) message is Kafka's word for word. One difference is left: C++
RE2 refuses nested repetitions that multiply past 1000 (`(a{500}){3}`), which RE2/J accepts.

Resolutions are kept per group in Kafka's ConsumerGroupRegularExpression records (type 16: the topics, the
version of the topic table, the time), written when a member brings a regular expression nobody in the group
subscribes to, and refreshed - on a heartbeat of the group, never within 10 s of the group's last resolution
(Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS) - when topics were created or deleted since, or the last
resolution is older than group.consumer.regex.refresh.interval.ms (10 min). A refresh resolves every
expression of the group at once and writes a record for each; if any resolved to other topics than before,
the group epoch goes up once. The last member subscribed to an expression takes its record with it (a
tombstone). Kafka resolves on a background executor and bumps the epoch when the result comes back; tenure
resolves within the heartbeat that asks for it, so a member bringing a new expression gets its partitions in
that answer (one bump where Kafka makes two: the join, then the resolution).
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenure.protocol.consumer_group_records import RegularExpressionRecord

from .group import ConsumerGroup, ConsumerMember, ResolvedRegex

REFRESH_MIN_INTERVAL_MS = 10_000          # Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
REFRESH_INTERVAL_MS = 600_000             # Kafka's group.consumer.regex.refresh.interval.ms default


@functools.cache
def _re2() -> tuple[Any, Any]:
    """RE2 (the binding and its options), imported at the first regular expression, not at the server's start."""
    import re2
    options = re2.Options()
    options.log_errors = False            # a refused pattern is the client's error, not the server's log line
    return re2, options

# RE2/J's descriptions of a refused pattern, by the words C++ RE2's message starts with (its error codes)
_DESCRIPTIONS = (
    ("missing )", "missing closing )"),
    ("missing ]", "missing closing ]"),
    ("no argument for repetition operator", "missing argument to repetition operator"),
    ("bad repetition operator", "invalid nested repetition operator"),
    ("trailing \\", "trailing backslash at end of expression"),
    ("invalid repetition size", "invalid repeat count"),
    ("invalid perl operator: (?<", "invalid named capture"),       # RE2/J reads (?< as a named group
    ("invalid perl operator", "invalid or unsupported Perl syntax"),
    ("unexpected )", "regexp/syntax: internal error"),             # RE2/J 1.8's own words for a stray )
    ("invalid escape sequence", "invalid escape sequence"),
    ("invalid character class range", "invalid character class range"),
    ("invalid character class", "invalid character class"),
    ("invalid named capture group", "invalid named capture"),
    ("invalid UTF-8", "invalid escape sequence"),                  # C++'s word for a broken \x{...}
)


class InvalidRegex(Exception):
    """A pattern RE2/J refuses; `message` is Kafka's INVALID_REGULAR_EXPRESSION message for it."""

    def __init__(self, regex: str, description: str) -> None:
        self.description = description
        self.message = f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."
        super().__init__(self.message)


def _rej_only(regex: str) -> str | None:
    """What RE2/J refuses and C++ RE2 takes: `\\C` (one byte) and a capture group name given twice."""
    names: set[str] = set()
    i, n = 0, len(regex)
    while i < n:
        c = regex[i]
        if c == "\\" and i + 1 < n:
            if regex[i + 1] == "Q":                         # \Q...\E: literal text
                end = regex.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            if regex[i + 1] == "C":
                return "invalid escape sequence"
            i += 2
            continue
        if regex.startswith("(?P<", i) or regex.startswith("(?<", i):
            start = i + (4 if regex[i + 2] == "P" else 3)
            end = regex.find(">", start)
            if end > start:
                name = regex[start:end]
                if name in names:
                    return "duplicate capture group name"
                names.add(name)
        i += 1
    return None


@functools.lru_cache(maxsize=1024)
def compile_regex(regex: str) -> Any:
    """The compiled pattern; InvalidRegex (with RE2/J's description) when Kafka's RE2/J would refuse it."""
    re2, options = _re2()
    try:
        compiled = re2.compile(regex, options)
    except re2.error as exc:
        text = exc.args[0].decode("utf-8", "replace") if isinstance(exc.args[0], bytes) else str(exc.args[0])
        description = next((rej for cpp, rej in _DESCRIPTIONS if text.startswith(cpp)), text)
        raise InvalidRegex(regex, description) from None
    refused = _rej_only(regex)
    if refused is not None:
        raise InvalidRegex(regex, refused)
    return compiled


def check_regex(regex: str) -> None:
    compile_regex(regex)


def matching(regex: str, names: Iterable[str]) -> frozenset[str]:
    """The names the whole of which the pattern matches."""
    pattern = compile_regex(regex)
    return frozenset(name for name in names if pattern.fullmatch(name) is not None)


def subscribed_union(members: Iterable[ConsumerMember], resolved: Mapping[str, ResolvedRegex]) -> frozenset[str]:
    """Every topic some of `members` subscribes to (the union of their `member_topics`); a subscription members
    share (one tuple: heartbeat.py shares equal ones) is counted once, so a group of N members subscribing the
    same M names costs M, not N x M."""
    members = list(members)
    sets = [names_set(names) for names in
            {id(m.subscribed_topic_names): m.subscribed_topic_names for m in members}.values()]
    out = sets[0] if len(sets) == 1 else frozenset().union(*sets)
    for regex in {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}:
        r = resolved.get(regex)
        if r is not None:
            out |= r.topics
    return out


def topic_sets(members: Iterable[ConsumerMember],
               resolved: Mapping[str, ResolvedRegex]) -> dict[str, frozenset[str]]:
    """Each member's `member_topics` by member id, one set made per subscription members share."""
    made: dict[tuple, frozenset[str]] = {}
    out = {}
    for m in members:
        key = (id(m.subscribed_topic_names), m.subscribed_topic_regex)     # the tuples live as long as `members`
        got = made.get(key)
        if got is None:
            got = made[key] = member_topics(m, resolved)
        out[m.member_id] = got
    return out


def member_topics(m: ConsumerMember, resolved: Mapping[str, ResolvedRegex]) -> frozenset[str]:
    """What a member subscribes to: its topic names and what its regular expression resolved to (Kafka takes
    both when a request carries both)."""
    r = resolved.get(m.subscribed_topic_regex) if m.subscribed_topic_regex else None
    names = names_set(m.subscribed_topic_names)
    return names | r.topics if r is not None else names


# the sets of the latest large subscriptions, by the identity of their (shared: heartbeat.py) tuple; each entry
# holds its tuple, so an id in it is that tuple's. Bounded: a group's members share one tuple.
_SETS: dict[int, tuple[tuple[str, ...], frozenset[str]]] = {}
_SETS_KEPT = 8
_SETS_FROM = 1000          # smaller subscriptions are made a set each time (cheaper than keeping them)


def names_set(names: tuple[str, ...]) -> frozenset[str]:
    """A subscription's names as a set: made once per (shared) tuple of a large subscription, not per join."""
    if len(names) < _SETS_FROM:
        return frozenset(names)
    got = _SETS.get(id(names))
    if got is not None and got[0] is names:
        return got[1]
    made = frozenset(names)
    if len(_SETS) >= _SETS_KEPT:
        del _SETS[next(iter(_SETS))]                  # the oldest
    _SETS[id(names)] = (names, made)
    return made


@dataclass
class RegexUpdate:
    """What a heartbeat does to its group's regular expressions: the records to write, the resolutions after
    it, and whether one of them now names other topics (the group epoch goes up)."""
    records: list[RegularExpressionRecord] = field(default_factory=list)
    resolved: dict[str, ResolvedRegex] = field(default_factory=dict)
    changed: bool = False


class TopicRegexes:
    """The regular-expression resolver of one coordinator shard (the consumer kind's, beside the topic-hash
    cache): it counts the changes of the topic table (`topics_changed`, called by the table it watches) and
    remembers, for each group, the count its last resolution saw in this process (a group not resolved since
    the process started is resolved again at its first chance, then only after a change)."""

    def __init__(self, topics: Any) -> None:
        self.topics = topics
        self.version = 0
        self.seen: dict[str, int] = {}
        self.resolutions = 0           # resolutions made (each one scans the topic table once), for tests
        self._names_then = frozenset(self._names())
        watch = getattr(topics, "watch", None)
        if watch is not None:
            watch(self)

    def topics_changed(self, names: Iterable[str] | None = None) -> None:
        """A topic was created or deleted (the version moves), or only its partitions or replicas changed, or a
        broker stopped or started (nothing an expression matches changed: the version stays)."""
        now = frozenset(self._names())
        if now != self._names_then:
            self._names_then = now
            self.version += 1

    def _names(self) -> list[str]:
        listing = getattr(self.topics, "all", None)
        return [t.name for t in listing()] if listing is not None else []

    def update(self, g: ConsumerGroup, members: Mapping[str, ConsumerMember], now_ms: int,
               brought: str | None = None) -> RegexUpdate:
        """The group's regular expressions after a heartbeat that leaves it with `members`; `brought` is the
        expression the heartbeat's member subscribes to now if it changed (checked: InvalidRegex). Raises
        nothing else and changes nothing but `seen` (set only when it returns records)."""
        gid = g.group_id
        in_use = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        if brought and brought not in g.regexes:
            check_regex(brought)
        out = RegexUpdate(resolved={r: v for r, v in g.regexes.items() if r in in_use})
        out.records += [RegularExpressionRecord(gid, r, tombstone=True) for r in sorted(g.regexes) if r not in in_use]
        if not in_use:
            self.seen.pop(gid, None)
            return out
        last = max((v.timestamp for v in g.regexes.values()), default=None)
        if last is not None and now_ms <= last + REFRESH_MIN_INTERVAL_MS:
            return out
        stale = self.seen.get(gid, -1) < self.version or last is None or now_ms > last + REFRESH_INTERVAL_MS
        if not stale and in_use <= set(out.resolved):
            return out
        names = self._names()
        self.resolutions += 1
        for r in sorted(in_use):
            try:
                topics = matching(r, names)
            except InvalidRegex:            # never stored unchecked; a record of an older version: nothing
                topics = frozenset()
            new = ResolvedRegex(topics, self.version, now_ms)
            before = out.resolved.get(r)
            out.changed |= before is None and bool(topics) or before is not None and before.topics != topics
            out.resolved[r] = new
            out.records.append(RegularExpressionRecord(gid, r, tuple(sorted(topics)), new.version, now_ms))
        self.seen[gid] = self.version
        return out

    def forget(self, group_id: str) -> None:
        self.seen.pop(group_id, None)
