"""Request capture: every request a server served and its answer, kept in a bounded ring per server.

    server.requests(api="JoinGroup", group="orders")     # [Exchange, ...] oldest first
    server.requests(client_id="worker-1")[-1].error_name # "NONE", "REBALANCE_IN_PROGRESS", ...
    server.capture.write_jsonl("requests.jsonl")          # one JSON object per line

Each `Exchange` holds the API, version, correlation id, client id, connection, peer, broker, when it was
read (wall clock), how long it took to answer, the first error code of the answer (0: none), the outcome
(`answered`, `no_answer` - a Produce with acks=0 -, `closed`: the connection was closed instead), a summary
of what the request named (`summary()`: group, groups, topics, member id, group instance id, generation,
transactional id) and the request and answer themselves (kept as the bytes received and sent - bytes are not
tracked by the garbage collector, so a full collection does not walk the ring - and decoded by kafka-python
when read; a Produce request's
records and a Fetch answer's records are not kept, nor a request or an answer of more than the codec's
heavy count of array elements (5,000: a describe of thousands of groups) beyond the latest
`HEAVY_BODIES_KEPT` of them - older ones keep their summary -, so the ring's memory stays bounded).

The ring keeps a finished exchange as a tuple of strings, numbers and bytes - which the collector stops tracking -
and `query` turns it back into an `Exchange`. The dispatcher keeps the usual exchange, whose answer it encodes on the
loop, as that tuple at once with the answer's frame before sending it (`keep`), and its duration once the answer is
written (`written`); an exchange with no answer, or a heavy one, is recorded as an object first (`record`), handed
the answer's frame before it is sent (`Exchange.answered`) and made a tuple once the answer is written (`finish`).
The summary is worked out only when asked (a Produce's when recorded,
its records being dropped), and kept as tuples of strings and numbers, which the collector stops tracking. `ServerConfig.capture_requests` is the ring's length (0: no capture).
"""
from __future__ import annotations

import collections
import json
import operator
import threading
import time
import uuid
from time import perf_counter
from time import time as wall_clock
from typing import Any

from tenure.protocol.apis import API_VERSIONS_KEY, DEFAULT_SERVED, SUPPORTED
from tenure.protocol.codec import LIGHT_ANSWERS
from tenure.protocol.codec import heavy_answer as is_heavy

PRODUCE, FETCH, FIND_COORDINATOR = 0, 1, 10
DEFAULT_CAPACITY = 10000
HEAVY_BODIES_KEPT = 4      # exchanges with a request or answer of > 5,000 array elements keeping their bodies
_SCALARS = ("group_id", "member_id", "group_instance_id", "generation_id", "member_epoch", "transactional_id",
            "producer_id", "protocol_type")
_GROUP_LISTS = ("groups", "groups_names")               # DescribeGroups / OffsetFetch v8+ / DeleteGroups
_TOPIC_LISTS = ("topics", "topic_data", "topic_names", "v3_and_below_topics")


def _name_of(item) -> str | None:
    if isinstance(item, str):
        return item
    for attr in ("name", "topic", "group_id"):
        value = getattr(item, attr, None)
        if isinstance(value, str):
            return value
    return None


def summarize(api_key: int, body) -> dict[str, Any]:
    """What a decoded request names: {"group", "groups", "topics", "member_id", "group_instance_id",
    "generation_id", ...}, only the keys it has. FindCoordinator's keys are groups (key type 0) or
    transactional ids (key type 1)."""
    out: dict[str, Any] = {}
    if body is None:
        return out
    for attr in _SCALARS:
        value = getattr(body, attr, None)
        if value is not None:
            out[attr] = value
    if "group_id" in out:
        out["group"] = out.pop("group_id")
    if api_key == FIND_COORDINATOR:
        keys = list(getattr(body, "coordinator_keys", None) or [])
        if not keys and getattr(body, "key", None) is not None:
            keys = [body.key]
        kind = getattr(body, "key_type", 0) or 0
        if keys:
            out["groups" if kind == 0 else "transactional_ids"] = keys
        return out
    for attr in _GROUP_LISTS:
        items = getattr(body, attr, None)
        if isinstance(items, list) and items:
            names = [n for n in map(_name_of, items) if n is not None]
            if names:
                out["groups"] = names
    for attr in _TOPIC_LISTS:
        items = getattr(body, attr, None)
        if isinstance(items, list) and items:
            names = [n for n in map(_name_of, items) if n is not None]
            if names:
                out["topics"] = names
                break
    return out


def _plain(value):
    """A JSON value of a decoded kafka-python object (bytes as their length)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": len(value)}
    if isinstance(value, uuid.UUID):                   # a topic id (its `fields` is not a list of names)
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    names = getattr(value, "fields", None)
    if names:
        return {n: _plain(getattr(value, n, None)) for n in names}
    return repr(value)


def _frozen(summary: dict[str, Any]) -> tuple:
    """A summary as a tuple of (key, value) pairs, its lists as tuples: the collector stops tracking a tuple of
    strings and numbers once it has seen it, where a dict or a list stays tracked for the ring's whole length."""
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in summary.items())


class Exchange:
    """One request and what became of it (see the module's docs). The request and the answer are kept as their
    encoded bytes (bytes are not tracked by the garbage collector: a full collection does not walk the ring's
    bodies) and decoded by kafka-python, at the exchange's version, when `request` / `response` is read."""

    __slots__ = ("seq", "api_key", "version", "correlation_id", "client_id", "connection", "peer", "broker",
                 "received", "duration_ms", "error", "outcome", "_req", "_req_at", "_resp", "_resp_version",
                 "_summary", "_dropped")

    def __init__(self, seq: int, api_key: int, version: int, correlation_id: int, client_id: str,
                 connection: int, peer: str, broker: int | None, received: float, duration_ms: float,
                 error: int, outcome: str, request: bytes | None = None, request_at: int = 0,
                 summary: tuple | None = None) -> None:
        self.seq, self.api_key, self.version, self.correlation_id = seq, api_key, version, correlation_id
        self.client_id, self.connection, self.peer, self.broker = client_id, connection, peer, broker
        self.received = received          # wall clock (time.time()) when the request was read
        self.duration_ms = duration_ms
        self.error = error                # the first error code of the answer (0: none)
        self.outcome = outcome            # answered | no_answer | closed
        self._req, self._req_at = request, request_at        # the request's frame (a Produce's: None)
        self._resp: bytes | None = None                       # the answer's frame as sent (a Fetch's: None)
        self._resp_version = version
        self._summary = summary
        self._dropped: bool | None = False             # None: heavy (kept as the object), True: bodies dropped

    def _row(self) -> tuple:
        """The exchange as a tuple of strings, numbers and bytes: what the ring keeps of a finished exchange (the
        collector stops tracking such a tuple at its first look, so it is never promoted nor walked again)."""
        return _ROW(self)

    @classmethod
    def _of_row(cls, row: tuple) -> Exchange:
        e = cls.__new__(cls)
        for slot, value in zip(Exchange.__slots__, row, strict=True):
            setattr(e, slot, value)
        return e

    def __eq__(self, other: object) -> bool:      # the same exchange, read from the ring twice
        return isinstance(other, Exchange) and (self.seq, self.received, self.connection, self.correlation_id) == \
            (other.seq, other.received, other.connection, other.correlation_id)

    def __hash__(self) -> int:
        return hash((self.seq, self.received))

    def __repr__(self) -> str:
        return (f"Exchange(seq={self.seq}, api={self.api}, version={self.version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r}, outcome={self.outcome}, "
                f"error={self.error_name})")

    @property
    def request(self) -> Any:
        """The decoded request (a Produce's: None - its records are not kept)."""
        if self._req is None:
            return None
        cls = DEFAULT_SERVED.specs[self.api_key].request
        return cls.decode(memoryview(self._req)[self._req_at:], version=self.version)

    @property
    def response(self) -> Any:
        """The decoded answer, as it was sent (a Fetch's: None - its records are not kept)."""
        if self._resp is None:
            return None
        version = self._resp_version
        cls = DEFAULT_SERVED.specs[self.api_key].response
        # after the frame's size and the correlation id, a flexible version's (empty) tagged fields, not ApiVersions'
        at = 9 if self.api_key != API_VERSIONS_KEY and cls.flexible_version_q(version) else 8
        return cls.decode(memoryview(self._resp)[at:], version=version)

    def answered(self, frame: bytes, version: int | None = None) -> None:
        """The answer's frame as it is sent (`version`: the one it is encoded at, if not the request's)."""
        if self._dropped or self.api_key == FETCH:
            return
        if version is not None:
            self._resp_version = version
        self._resp = frame

    def drop_bodies(self) -> None:
        """Keep only the summary (worked out first)."""
        self.summary()
        self._dropped = True
        self._req = self._resp = None

    @property
    def api(self) -> str:
        return SUPPORTED[self.api_key].name if self.api_key in SUPPORTED else str(self.api_key)

    @property
    def error_name(self) -> str:
        from tenure.control.faults import error_name
        return error_name(self.error) if self.error else "NONE"

    def summary(self) -> dict[str, Any]:
        """What the request names (worked out once, from the decoded request, when first asked)."""
        if self._summary is None:
            self._summary = _frozen(summarize(self.api_key, self.request))
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self._summary}

    @property
    def group(self) -> str | None:
        return self.summary().get("group")

    @property
    def group_instance_id(self) -> str | None:
        return self.summary().get("group_instance_id")

    @property
    def member_id(self) -> str | None:
        return self.summary().get("member_id")

    def names_group(self, group: str) -> bool:
        s = self.summary()
        return s.get("group") == group or group in s.get("groups", ())

    def names_topic(self, topic: str) -> bool:
        return topic in self.summary().get("topics", ())

    def to_dict(self, bodies: bool = False) -> dict[str, Any]:
        d = {"seq": self.seq, "api": self.api, "api_key": self.api_key, "version": self.version,
             "correlation_id": self.correlation_id, "client_id": self.client_id, "connection": self.connection,
             "peer": self.peer, "broker": self.broker, "received": round(self.received, 6),
             "duration_ms": round(self.duration_ms, 3), "error": self.error, "error_name": self.error_name,
             "outcome": self.outcome, "summary": _plain(self.summary())}
        if bodies:
            d["request"] = _plain(self.request)
            d["response"] = _plain(self.response)
        return d


_ROW = operator.attrgetter(*Exchange.__slots__)     # an exchange's slots as one tuple (in C)


class Capture:
    """The ring of one server's exchanges (`capacity` of them; 0: off). `keep`, `record`, `written` and `finish` are
    called on the server's loop and take no lock (what they do to the ring is one append or one store, each whole
    under the interpreter's lock); `query`, `all`, `clear`, `resize` and `write_jsonl` from any thread, which read
    the ring by copying it and take their own lock among themselves."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        # seq -> the summary a query worked out for a row of the ring (the ring's rows are written on the loop only)
        self._summaries: dict[int, tuple] = {}
        self.resize(capacity)

    def resize(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise ValueError(f"capacity: want a whole number of requests >= 0, not {capacity!r}")
        with self._lock:
            rows = self._read() if hasattr(self, "_ring") else []
            ring: collections.deque[Exchange | tuple] = collections.deque((row for _, row in rows), maxlen=capacity)
            # the duration `written` noted for the row of sequence number s, at s % capacity (None: none noted):
            # a store per request, no object made (read into the rows by `_read`)
            took: list[float | None] = [None] * capacity
            self._heavy: collections.deque[Exchange] = getattr(self, "_heavy", collections.deque())
            self._took, self._ring = took, ring
            self.capacity = capacity
            self.active = capacity > 0

    def record(self, req, ctx, body, error: int, started: float, outcome: str,
               heavy_answer: bool = False) -> Exchange:
        """One served request (`started`: its time.perf_counter() when read); its duration is until now
        (the caller may set it again once the answer is written). `heavy_answer`: the answer holds more than
        the codec's heavy-answer count of array elements. Only the latest `HEAVY_BODIES_KEPT` exchanges with
        such a request or answer keep their bodies; an older one keeps its summary (the ring would otherwise
        hold every large describe's megabytes for its whole length)."""
        now = time.perf_counter()
        key = req.api_key
        if key == PRODUCE:
            frame, at, summary = None, 0, _frozen(summarize(key, req.body))
        else:
            frame, at, summary = getattr(req, "payload", None), getattr(req, "body_at", 0), None
            if frame is None:                              # a request made in process: encoded (kafka-python)
                frame = None if req.body is None else req.body.encode(version=req.api_version)
            elif frame.__class__ is not bytes:
                frame = bytes(frame)
        seq = self._seq = self._seq + 1                    # then the row at once (readers check the last is it)
        exchange = Exchange(
            seq, key, req.api_version, req.correlation_id, ctx.client_id, ctx.connection_id, ctx.peer,
            ctx.broker_id, time.time() - (now - started), (now - started) * 1000.0, error, outcome,
            frame, at, summary)
        took = self._took
        if took:
            took[seq % len(took)] = None                   # its slot's note is of the row this one pushes out
        self._ring.append(exchange)
        if heavy_answer or (key != PRODUCE and is_heavy(key, req.body)):
            exchange.summary()                             # worked out while the request is decoded
            exchange._dropped = None                       # kept as the object: its bodies may be dropped
            self._heavy.append(exchange)
            if len(self._heavy) > HEAVY_BODIES_KEPT:
                self._heavy.popleft().drop_bodies()
        return exchange

    def keep(self, req, ctx, error: int, started: float, frame: bytes,
             version: int | None = None) -> Exchange | tuple | None:
        """One served request and the frame of its answer, about to be sent (`version`: the answer's, if not the
        request's): the usual exchange - an answer encoded on the loop - kept at once as the tuple of a finished
        one, no `Exchange` made (its duration until now, set again by `written`). A Produce, or a request heavy
        enough to keep as an object, takes `record`'s way. What is kept goes to `written` once the answer is
        (None: the capture was turned off meanwhile)."""
        key = req.api_key
        if key not in LIGHT_ANSWERS and is_heavy(key, req.body) or key == PRODUCE:
            exchange = self.record(req, ctx, None, error, started, "answered")
            exchange.answered(frame, version)
            return exchange
        took = perf_counter() - started
        notes = self._took
        if not notes:
            return None
        payload = req.payload
        if payload is None:                                # a request made in process: encoded (kafka-python)
            payload = None if req.body is None else req.body.encode(version=req.api_version)
        elif payload.__class__ is not bytes:
            payload = bytes(payload)
        seq = self._seq = self._seq + 1                    # then the row at once (readers check the last is it)
        row = (seq, key, req.api_version, req.correlation_id, ctx.client_id, ctx.connection_id, ctx.peer,
               ctx.broker_id, wall_clock() - took, took * 1000.0, error, "answered", payload, req.body_at,
               None if key == FETCH else frame, req.api_version if version is None else version, None, False)
        notes[seq % len(notes)] = None                     # its slot's note is of the row this one pushes out
        self._ring.append(row)
        return row

    def written(self, kept: Exchange | tuple, duration_ms: float) -> None:
        """The answer of an exchange `keep` kept is written: its duration set (from the request read to now). A
        row's is noted beside the ring (one store; the ring is read with it: `_read`)."""
        if kept.__class__ is not tuple:
            kept.duration_ms = duration_ms                 # type: ignore[union-attr]
            self.finish(kept)                              # type: ignore[arg-type]
            return
        notes = self._took
        seq = kept[0]
        if notes and self._seq - seq < len(notes):         # still in the ring (so its slot is its own)
            notes[seq % len(notes)] = duration_ms

    def _read(self) -> list[tuple[int, Exchange | tuple]]:
        """What the ring holds, oldest first: (sequence number, the row with the duration `written` noted for it and
        the summary a query worked out for it, or the exchange kept as an object). The readers' lock held; the
        ring is copied as the loop leaves it between two requests (a copy taken while the loop thread was between
        the steps of one is taken again)."""
        for _ in range(1000):
            seq, ring, notes = self._seq, self._ring, self._took
            kept, took = list(ring), list(notes)
            last = kept[-1] if kept else None
            last_seq = None if last is None else last.seq if isinstance(last, Exchange) else last[0]
            if seq == self._seq and ring is self._ring and notes is self._took and last_seq in (None, seq):
                break
            time.sleep(0.0005)                             # the loop thread is inside a step: let it end it
        summaries = self._summaries
        out: list[tuple[int, Exchange | tuple]] = []
        n = len(took)
        for row in kept:
            if row.__class__ is not tuple:
                out.append((row.seq, row))                 # type: ignore[union-attr]
                continue
            s = row[0]
            noted = took[s % n] if n else None
            summary = summaries.get(s) if row[16] is None else None
            if (noted is not None and noted != row[9]) or summary is not None:
                row = row[:9] + (row[9] if noted is None else noted,) + row[10:16] + \
                    (row[16] if summary is None else summary,) + row[17:]
            out.append((s, row))
        return out

    def finish(self, exchange: Exchange) -> None:
        """The exchange is done (its answer and duration set): the ring keeps it as a tuple from now on."""
        if exchange._dropped is not False:                 # a heavy one (its bodies dropped later): the object
            return
        row = exchange._row()
        ring = self._ring
        at = len(ring) - 1 - (self._seq - exchange.seq)    # the ring holds consecutive sequence numbers, latest last
        if at >= 0 and ring[at] is exchange:
            ring[at] = row

    def clear(self) -> int:
        with self._lock:
            n = len(self._ring)
            self._ring.clear()
            self._took[:] = [None] * len(self._took)
            self._summaries.clear()
            self._heavy.clear()
        return n

    def all(self) -> list[Exchange]:
        with self._lock:
            kept = self._read()
        return [e if isinstance(e, Exchange) else Exchange._of_row(e) for _, e in kept]

    def query(self, api: str | int | None = None, group: str | None = None, client_id: str | None = None,
              topic: str | None = None, broker: int | None = None, connection: int | None = None,
              error: str | int | None = None, since: int | None = None) -> list[Exchange]:
        """The exchanges kept, oldest first, of `api` (name or key), naming `group` / `topic`, from
        `client_id`, on `broker`, on `connection`, answered with `error` (name or code), after sequence
        number `since`; every filter left None matches all."""
        from tenure.control.faults import api_key, error_code
        key = api_key(api) if api is not None else None
        code = error_code(error) if error is not None else None
        out = []
        summarized: list[tuple[int, tuple]] = []          # rows whose summary this query worked out
        with self._lock:
            kept = self._read()
        for seq, row in kept:
            e = row if isinstance(row, Exchange) else Exchange._of_row(row)
            if ((key is None or e.api_key == key) and (client_id is None or e.client_id == client_id)
                    and (broker is None or e.broker == broker) and (connection is None or e.connection == connection)
                    and (code is None or e.error == code) and (since is None or e.seq > since)):
                had = e._summary
                if (group is None or e.names_group(group)) and (topic is None or e.names_topic(topic)):
                    out.append(e)
                if had is None and e._summary is not None and e is not row:
                    summarized.append((seq, e._summary))
        if summarized:
            self._keep_summaries(summarized)
        return out

    def _keep_summaries(self, summarized: list[tuple[int, tuple]]) -> None:
        """Keep the summaries a query decoded beside the ring, read into their rows (`_read`), so the next query by
        group or topic does not decode those requests again; those of rows the ring no longer holds go."""
        with self._lock:
            summaries = self._summaries
            summaries.update(summarized)
            if len(summaries) > self.capacity:
                oldest = self._seq - self.capacity
                for seq in [s for s in summaries if s <= oldest]:
                    del summaries[seq]

    @property
    def last_seq(self) -> int:
        """The sequence number of the latest exchange (0: none yet): `query(since=...)` takes it."""
        return self._seq

    def write_jsonl(self, path, bodies: bool = False, **filters) -> int:
        """Write the exchanges matching `filters` (those of `query`) to `path`, one JSON object per line
        (`bodies`: with the decoded request and answer); returns how many."""
        rows = self.query(**filters)
        with open(path, "w", encoding="utf-8") as f:
            for e in rows:
                f.write(json.dumps(e.to_dict(bodies)) + "\n")
        return len(rows)
