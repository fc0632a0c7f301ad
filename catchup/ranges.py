"""Range tokens: the offsets a crash left behind, and how they are written into commit metadata.

A token is one catch-up range of one partition as it was opened, `lo-hi` (the committed offset and the
log end when the crash was detected), with `next`, the first offset of it not yet processed: offsets
[next, hi) are still owed. A partition's owed spans [next, hi) are disjoint, apart and sorted.

Two metadata strings, both plain text so anything that reads `__consumer_offsets` (kafka-consumer-groups,
tenure's log dump, the audit) can read them:

- on the companion group's commit for a partition (the second commit log):
  `tenure.catchup/1 instance=<id> ranges=70-120:85,140-190:140` - every open token as `lo-hi:next`;
  `ranges=` empty when nothing is owed. The committed offset is the lowest `next` (or, with nothing
  owed, the `hi` of the last token closed).
- on the application's own group's commit for a partition: `tenure.catchup/1 running instance=<id>`
  while an instance owns it, `tenure.catchup/1 clean instance=<id>` once it gave it up in an orderly
  way (close, revocation). A commit without the clean marker, behind the log end, means a crash.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "tenure.catchup/1"
RUNNING = "running"
CLEAN = "clean"

_TOKEN = re.compile(r"^(\d+)-(\d+):(\d+)$")


@dataclass
class Token:
    lo: int         # the range as opened: [lo, hi)
    hi: int
    next: int       # [next, hi) is still owed

    def __str__(self) -> str:
        return f"{self.lo}-{self.hi}:{self.next}"


def copy(tokens: list[Token]) -> list[Token]:
    return [Token(t.lo, t.hi, t.next) for t in tokens]


def add(tokens: list[Token], lo: int, hi: int) -> list[Token]:
    """`tokens` with [lo, hi) owed too. Owed spans that overlap or touch become one token (a crash that
    recurs before anything was committed reopens a range that is partly open already): at-least-once,
    never a gap."""
    if lo >= hi:
        return copy(tokens)
    out: list[Token] = []
    new = Token(lo, hi, lo)
    for t in sorted(copy(tokens), key=lambda t: t.next):
        if t.next <= new.hi and new.next <= t.hi:            # owed spans overlap or touch
            new = Token(min(t.lo, new.lo), max(t.hi, new.hi), min(t.next, new.next))
        else:
            out.append(t)
    out.append(new)
    return sorted(out, key=lambda t: t.next)


def processed_below(tokens: list[Token], offset: int) -> list[Token]:
    """`tokens` once everything before `offset` is processed (a commit of `offset`): tokens ending at
    or below it close, the one holding it starts there."""
    out = []
    for t in copy(tokens):
        t.next = max(t.next, offset)
        if t.next < t.hi:
            out.append(t)
    return out


def owed_at(tokens: list[Token], offset: int) -> bool:
    """Is a commit of `offset` (everything before it processed) one of the catch-up's: next < offset <= hi
    for an open token."""
    return any(t.next < offset <= t.hi for t in tokens)


def low(tokens: list[Token]) -> int | None:
    """The first offset still owed, or None."""
    return min((t.next for t in tokens), default=None)


def encode(tokens: list[Token], instance: str) -> str:
    return f"{PREFIX} instance={instance} ranges=" + ",".join(str(t) for t in sorted(tokens, key=lambda t: t.next))


def decode(metadata: str | None) -> list[Token] | None:
    """The tokens of a companion-group commit, or None if the metadata is not a catch-up checkpoint.
    One trailing NUL is ignored: confluent-kafka hands librdkafka the metadata as a C string whose
    terminator goes on the wire, so that is how `__consumer_offsets` holds it."""
    if metadata and metadata.endswith("\x00"):
        metadata = metadata[:-1]
    if not metadata or not metadata.startswith(PREFIX + " "):
        return None
    fields = dict(f.split("=", 1) for f in metadata[len(PREFIX) + 1:].split(" ") if "=" in f)
    if "ranges" not in fields:
        return None
    tokens = []
    for part in filter(None, fields["ranges"].split(",")):
        m = _TOKEN.match(part)
        if not m:
            raise ValueError(f"catch-up checkpoint with a malformed range token {part!r}: {metadata!r}")
        lo, hi, nxt = map(int, m.groups())
        if not lo <= nxt < hi:
            raise ValueError(f"catch-up checkpoint with an impossible range token {part!r}: {metadata!r}")
        tokens.append(Token(lo, hi, nxt))
    return sorted(tokens, key=lambda t: t.next)


def marker(state: str, instance: str) -> str:
    return f"{PREFIX} {state} instance={instance}"


def is_crash_marker(metadata: str | None) -> bool:
    """A main-group commit left by an instance that did not give the partition up cleanly. A commit
    written by anything else (a plain consumer, a tool) is taken as clean: switching the mode on resumes
    as a plain consumer would."""
    return metadata is not None and metadata.startswith(f"{PREFIX} {RUNNING}")


@dataclass
class TokenHistory:
    """One range token's life in a (companion group, topic, partition)'s commit history."""
    lo: int
    hi: int
    opened_ms: int                          # the timestamp of the first checkpoint that holds it
    closed_ms: int | None = None            # of the first checkpoint without it (None: still open)
    merged_into: tuple[int, int] | None = None   # closed because a recurring crash merged it into a wider token
    owed: tuple[int, int] | None = None     # still open at the end: [next, hi) was never committed


def history(commits) -> list[TokenHistory]:
    """Fold one partition's companion-group commits, `(timestamp_ms, metadata)` in log order, into the
    life of every token: when it opened, when it was fully processed (or merged), and what a token still
    open at the end owes (an anomaly if the instance is gone). Commits that are not catch-up checkpoints
    are skipped."""
    done: list[TokenHistory] = []
    open_: dict[tuple[int, int], TokenHistory] = {}
    last: dict[tuple[int, int], Token] = {}
    for ts, metadata in commits:
        tokens = decode(metadata)
        if tokens is None:
            continue
        now = {(t.lo, t.hi): t for t in tokens}
        for key, h in list(open_.items()):
            if key not in now:
                h.closed_ms = ts
                h.merged_into = next(((lo, hi) for lo, hi in now if lo <= key[0] and key[1] <= hi), None)
                done.append(open_.pop(key))
        for key in now:
            if key not in open_:
                open_[key] = TokenHistory(key[0], key[1], ts)
        last = now
    for key, h in open_.items():
        h.owed = (last[key].next, last[key].hi)
        done.append(h)
    return sorted(done, key=lambda h: (h.opened_ms, h.lo))
