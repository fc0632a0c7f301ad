"""Which coordinator shard answers a group request: Kafka's group hash, and the requests that name
several groups split by shard and their answers merged back in request order.

A shard owns the groups of one `__consumer_offsets` partition: a group lives where Kafka puts it,
`partition_for(group_id, partitions)`. A request naming one group goes to its shard. DescribeGroups,
DeleteGroups and OffsetFetch v8+ name several groups: `split` gives each shard the part of the request
that names its groups (in request order), and `merge` puts the shards' answers back in request order.
ListGroups asks every shard and concatenates their groups.

A read-only request naming many items (the describes, OffsetFetch v8+, DescribeTransactions) is answered in
chunks of `CHUNK_ITEMS` items (`chunks`), each on a loop turn of its own (the runtime awaits a turn between
them), so one request of 100,000 ids does not hold every other client for its whole handling; `join_chunks`
puts the answers together. Items answered once (`dedup`) are made unique first, as `split` and the handlers
make them, so the answer is the one a single pass gives. An OffsetFetch naming more than `CHUNK_PARTITIONS`
partitions (v1-7: of its one group; v8+: of a few groups) is answered that many partitions at a time
(`partition_chunks`), a topic's partitions possibly spread over two chunks, and `PartitionChunks.join` puts
each topic's and each group's pieces back under one entry.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from tenure.protocol.internal_topics import java_string_hash, partition_for  # noqa: F401 - re-exported

OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, CONSUMER_GROUP_DESCRIBE = 9, 15, 16, 42, 69
SHARE_GROUP_DESCRIBE = 77
DESCRIBE_TRANSACTIONS = 65
# the member requests of a classic group (JoinGroup, Heartbeat, LeaveGroup, SyncGroup): each names one group and
# is answered in one go (never split, chunked or merged), so the group runtime routes them straight to their
# group's shard (`CoordinatorRuntime.direct_apis`)
ONE_GROUP_APIS = frozenset({11, 12, 13, 14})
CHUNK_ITEMS = 250          # items of a large read-only request handled per loop turn
CHUNK_PARTITIONS = 1000    # partitions of one group's large OffsetFetch v1-7 answered per loop turn


class _MultiGroup:
    """A request naming several groups: its list field, the group of an item, the answers' list field.
    `dedup` gives the key under which the coordinator answers repeated items once (None: every item is
    answered); applying it before the split makes every shard's answers one per item, in item order.
    (A plain class: the table below is all there is of it, and a dataclass's build cost ~0.4 ms at import.)"""

    __slots__ = ("items", "group_of", "answers", "dedup")

    def __init__(self, items: str, group_of: Callable[[Any], str], answers: str,
                 dedup: Callable[[int, Any], object] | None) -> None:
        self.items, self.group_of, self.answers, self.dedup = items, group_of, answers, dedup


def _same_id(i: int, gid: str) -> str:
    """The dedup key of an item answered once by its id: the id."""
    return gid


_MULTI = {
    DESCRIBE_GROUPS: _MultiGroup("groups", lambda gid: gid, "groups", _same_id),
    DELETE_GROUPS: _MultiGroup("groups_names", lambda gid: gid, "results", None),
    CONSUMER_GROUP_DESCRIBE: _MultiGroup("group_ids", lambda gid: gid, "groups", _same_id),
    SHARE_GROUP_DESCRIBE: _MultiGroup("group_ids", lambda gid: gid, "groups", _same_id),
    OFFSET_FETCH: _MultiGroup("groups", lambda q: q.group_id, "groups",
                              lambda i, q: (q.group_id, None) if q.topics is None else (q.group_id, i)),
}


# read-only requests answered one answer per (unique) item, in item order: handled in chunks when large
_CHUNKED = {**{k: v for k, v in _MULTI.items() if k != DELETE_GROUPS},
            DESCRIBE_TRANSACTIONS: _MultiGroup("transactional_ids", lambda tid: tid, "transaction_states", None)}


def chunks(api_key: int, api_version: int, body, size: int = CHUNK_ITEMS) -> Iterator | None:
    """The request `body` as bodies of at most `size` (unique) items each, in item order, made one at a time as
    they are asked for (so making them is bounded per loop turn too); None when it is not a chunked request or
    names no more than `size` items (it is then handled in one go)."""
    spec = _CHUNKED.get(api_key)
    if spec is None or (api_key == OFFSET_FETCH and api_version < 8):
        return None
    items = getattr(body, spec.items) or []
    if len(items) <= size:
        return None
    return _chunked(body, spec, items, size)


def _chunked(body, spec: _MultiGroup, items: list, size: int) -> Iterator:
    seen: set = set()
    mine: list = []
    for i, item in enumerate(items):
        if spec.dedup is not None:
            key = item if spec.dedup is _same_id else spec.dedup(i, item)
            if key in seen:
                continue
            seen.add(key)
        mine.append(item)
        if len(mine) == size:
            yield _with_items(body, spec, mine)
            mine = []
    if mine:
        yield _with_items(body, spec, mine)


def _with_items(body, spec: _MultiGroup, items: list):
    sub = copy.copy(body)
    setattr(sub, spec.items, items)
    return sub


def join_chunks(api_key: int, subs: list, answers: list):
    """The answer to the whole request from each chunk's answer (`chunks` made `subs`)."""
    spec = _CHUNKED[api_key]
    joined = []
    for sub, answer in zip(subs, answers, strict=True):
        got = getattr(answer, spec.answers)
        if len(got) != len(getattr(sub, spec.items)):
            raise AssertionError(f"a chunk of {len(getattr(sub, spec.items))} item(s) got {len(got)} answer(s)")
        joined += got
    out = copy.copy(answers[0])
    setattr(out, spec.answers, joined)
    return out


def partition_chunks(api_key: int, api_version: int, body, size: int = CHUNK_PARTITIONS) -> PartitionChunks | None:
    """An OffsetFetch naming more than `size` partitions in all (below v8: of its one group; v8+: of its groups -
    the runtime asks this of each chunk `chunks` made, or of the request when it names no more than CHUNK_ITEMS)
    as bodies of at most `size` partitions each, in request order (`PartitionChunks`); None for any other
    request (one pass)."""
    if api_key != OFFSET_FETCH:
        return None
    v8 = api_version >= 8
    if not v8 and body.topics is None:
        return None
    groups = _unique_queries(body.groups or []) if v8 else [body]
    if sum(len(t.partition_indexes or []) for g in groups for t in g.topics or []) <= size:
        return None
    return PartitionChunks(body, v8, groups, size)


def _unique_queries(items: list) -> list:
    """OffsetFetch v8+'s group queries, a group's repeated "all offsets" query once (as the handler answers them)."""
    dedup = _MULTI[OFFSET_FETCH].dedup
    assert dedup is not None
    return list({dedup(i, q): q for i, q in enumerate(items)}.values())


class PartitionChunks:
    """The chunks of one large OffsetFetch (`partition_chunks`), made one at a time as they are iterated, and
    `join` for their answers. Below v8 the request's one group is its body (its topics the entries); from v8
    each group query is an entry of `groups`, holding its topics. A topic whose partitions straddle two chunks
    is an entry in each, a group whose topics do a query in each; a topic or group naming no partition is an
    entry of the chunk it falls in. `_origins` keeps, per chunk, (group, [topic of each topic entry]) of each
    group entry, so `join` puts each topic's and each group's pieces back under one entry."""

    def __init__(self, body, v8: bool, groups: list, size: int) -> None:
        self.body, self.v8, self.groups, self.size = body, v8, groups, size
        self._origins: list[list[tuple[int, list[int]]]] = []

    def __iter__(self) -> Iterator:
        entries: list = []                         # the current chunk's group entries
        origins: list[tuple[int, list[int]]] = []
        room = self.size

        def entry(gi: int, g):
            if not origins or origins[-1][0] != gi:
                q = copy.copy(g)
                q.topics = []
                entries.append(q)
                origins.append((gi, []))
            return entries[-1], origins[-1][1]

        def done():
            nonlocal entries, origins, room
            self._origins.append(origins)
            sub = self._body(entries)
            entries, origins, room = [], [], self.size
            return sub

        for gi, g in enumerate(self.groups):
            if not g.topics:                       # all offsets (None) or no topic: one entry as it is
                entries.append(g)
                origins.append((gi, []))
                continue
            for ti, t in enumerate(g.topics):
                indexes = t.partition_indexes or []
                if not indexes:
                    q, tis = entry(gi, g)
                    q.topics.append(t)
                    tis.append(ti)
                at = 0
                while at < len(indexes):                 # slices of the request's list: no copy of the rest
                    piece = indexes[at:at + room]
                    at += len(piece)
                    part = copy.copy(t)
                    part.partition_indexes = piece
                    q, tis = entry(gi, g)
                    q.topics.append(part)
                    tis.append(ti)
                    room -= len(piece)
                    if room == 0:
                        yield done()
        if entries:
            yield done()

    def _body(self, entries: list):
        if self.v8:
            sub = copy.copy(self.body)
            sub.groups = entries
            return sub
        [q] = entries
        return q

    def join(self, answers: list):
        """The answer to the whole request from each chunk's answer, in request order: each group's pieces one
        group (a piece answered with a group error: the group's answer is that error, as a single pass answers
        it); each topic's pieces one topic. Below v8, the first chunk's error code that is not NONE, if any (a
        chunk refused, e.g. the coordinator moved meanwhile: the client retries)."""
        if len(answers) != len(self._origins):
            raise AssertionError(f"{len(answers)} answer(s) to {len(self._origins)} chunk(s)")
        pieces: dict[int, list] = {}
        for answer, origins in zip(answers, self._origins, strict=True):
            got = answer.groups if self.v8 else [answer]
            if len(got) != len(origins):
                raise AssertionError(f"a chunk of {len(origins)} group(s) got {len(got)} answer(s)")
            for g, (gi, tis) in zip(got, origins, strict=True):
                pieces.setdefault(gi, []).append((g, tis))
        joined = [self._group(self.groups[gi], pieces.get(gi, [])) for gi in range(len(self.groups))]
        if self.v8:
            out = copy.copy(answers[0])
            out.groups = joined
            return out
        out = joined[0]
        out.error_code = next((a.error_code for a in answers if a.error_code), answers[0].error_code)
        return out

    def _group(self, q, pieces: list):
        if not pieces:
            raise AssertionError(f"group query {getattr(q, 'group_id', '')!r}: no answer")
        if not q.topics:
            [(g, _)] = pieces
            return g
        failed = next((g for g, _ in pieces if self.v8 and g.error_code), None)
        if failed is not None:
            return failed
        topics: list = []
        last = -1
        for g, tis in pieces:
            if len(g.topics) != len(tis):
                raise AssertionError(f"{len(g.topics)} topic answer(s) to {len(tis)} topic(s)")
            for t, ti in zip(g.topics, tis, strict=True):
                if ti == last:
                    topics[-1].partitions.extend(t.partitions)
                else:
                    topics.append(copy.copy(t))
                    topics[-1].partitions = list(t.partitions)       # its own list, extended in place
                    last = ti
        for t, asked in zip(topics, q.topics, strict=True):
            if len(t.partitions) != len(asked.partition_indexes or []) or t.name != asked.name:
                raise AssertionError(f"topic {asked.name!r}: {len(t.partitions)} answer(s) to "
                                     f"{len(asked.partition_indexes or [])} partition(s)")
        out = copy.copy(pieces[0][0])
        out.topics = topics
        return out


def names_several_groups(api_key: int, api_version: int) -> bool:
    return api_key in (DESCRIBE_GROUPS, DELETE_GROUPS, CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE) or (api_key == OFFSET_FETCH and api_version >= 8)


def split(api_key: int, body, partitions: int) -> tuple[list[tuple[int, object]], list[int]]:
    """([(partition, the body naming only that partition's groups)] in order of each partition's first
    item, the partition of each answer in request order). One piece, the body itself, when every item
    belongs to one partition."""
    spec = _MULTI[api_key]
    items = list(getattr(body, spec.items) or [])
    if spec.dedup is not None:
        first: dict = {}
        for i, item in enumerate(items):
            first.setdefault(spec.dedup(i, item), item)
        items = list(first.values())
    if partitions == 1:                                # every group on partition 0: no hash to compute
        return [(0, body)], [0] * len(items)
    parts: dict[int, list] = {}
    order = []
    for item in items:
        part = partition_for(spec.group_of(item), partitions)
        parts.setdefault(part, []).append(item)
        order.append(part)
    if len(parts) <= 1:
        return [(next(iter(parts), 0), body)], order
    pieces = []
    for part, mine in parts.items():
        sub = copy.copy(body)
        setattr(sub, spec.items, mine)
        pieces.append((part, sub))
    return pieces, order


def merge(api_key: int, order: list[int], pieces: list[tuple[int, object, object]]):
    """The answer from [(partition, sub-body, its answer)] as `split` made them: each shard answers its
    items in their order, so walking `order` puts every answer back in request order."""
    spec = _MULTI[api_key]
    answers = {}
    for part, sub, answer in pieces:
        got = list(getattr(answer, spec.answers))
        if len(got) != len(getattr(sub, spec.items) or []):
            raise AssertionError(f"shard {part} answered {len(got)} of {len(getattr(sub, spec.items))} group(s)")
        answers[part] = iter(got)
    out = copy.copy(pieces[0][2])
    setattr(out, spec.answers, [next(answers[part]) for part in order])
    return out


def merge_lists(answers: list):
    """ListGroups over every shard: one answer holding every shard's groups, the first error if any."""
    out = copy.copy(answers[0])
    out.groups = [g for a in answers for g in a.groups]
    out.error_code = next((a.error_code for a in answers if a.error_code), 0)
    return out
