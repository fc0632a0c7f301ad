"""The server-side assignors of consumer groups: `uniform` (the default) and `range`.

An assignor sees the members (id, instance id, subscribed topics, current target) and the subscribed
topics (id and partition count) and returns every member's new target. It is a pure function: the same
input gives the same target on any machine.
"""
from __future__ import annotations

import heapq
import uuid
from dataclasses import dataclass

from .group import Partitions, from_pairs, pairs


@dataclass(frozen=True)
class AssignorMember:
    member_id: str
    instance_id: str | None
    topics: frozenset[str]          # subscribed topics that exist
    current: Partitions             # its current target (for stickiness)


@dataclass(frozen=True)
class TopicInfo:
    topic_id: uuid.UUID
    partitions: int


def uniform(members: list[AssignorMember], topics: dict[str, TopicInfo]) -> dict[str, Partitions]:
    """Balance first, then stickiness. Every member with the same subscription: each gets the quota
    (total // N, one more for total % N of them), keeping as many of its current partitions as the quota
    allows. Different subscriptions: topics with the fewest subscribers per partition first, each partition
    kept by its current owner while that owner is not above the least-loaded subscriber, else given to the
    least-loaded subscriber; then a bounded pass moves partitions from the most to the least loaded."""
    if not members:
        return {}
    if len({m.topics for m in members}) == 1:
        return _uniform_homogeneous(members, topics)
    return _uniform_heterogeneous(members, topics)


def _all_partitions(names, topics) -> list[tuple[uuid.UUID, int]]:
    return [(topics[t].topic_id, p) for t in sorted(names) if t in topics for p in range(topics[t].partitions)]


def _uniform_homogeneous(members, topics) -> dict[str, Partitions]:
    every = _all_partitions(members[0].topics, topics)
    valid = set(every)
    n = len(members)
    quota, extra = divmod(len(every), n)
    ordered = sorted(members, key=lambda m: m.member_id)
    kept: dict[str, list] = {}
    for m in ordered:
        kept[m.member_id] = sorted(pairs(m.current) & valid)[:quota + 1]
    # members already holding more than the quota keep one extra while extras last, most first
    extras_left = extra
    gets_extra: set[str] = set()
    for m in sorted(ordered, key=lambda m: (-len(kept[m.member_id]), m.member_id)):
        if len(kept[m.member_id]) > quota and extras_left:
            gets_extra.add(m.member_id)
            extras_left -= 1
        else:
            kept[m.member_id] = kept[m.member_id][:quota]
    for m in ordered:
        if extras_left and m.member_id not in gets_extra and len(kept[m.member_id]) <= quota:
            gets_extra.add(m.member_id)
            extras_left -= 1
    taken = {tp for parts in kept.values() for tp in parts}
    free = [tp for tp in every if tp not in taken]
    for m in sorted(ordered, key=lambda m: (len(kept[m.member_id]), m.member_id)):
        want = quota + (1 if m.member_id in gets_extra else 0)
        while len(kept[m.member_id]) < want and free:
            kept[m.member_id].append(free.pop(0))
    return {mid: from_pairs(parts) for mid, parts in kept.items()}


class _LeastLoaded:
    """The least-loaded of a topic's subscribers (ties by member id), over loads that only grow while
    partitions are handed out: a heap whose stale entries (a load grew since) are re-pushed when met."""

    def __init__(self, subs: list[str], load: dict[str, int]) -> None:
        self.load = load
        self.heap = [(load[m], m) for m in subs]
        heapq.heapify(self.heap)

    def peek(self) -> str:
        while True:
            n, m = self.heap[0]
            if n == self.load[m]:
                return m
            heapq.heapreplace(self.heap, (self.load[m], m))


def _uniform_heterogeneous(members, topics) -> dict[str, Partitions]:
    load = {m.member_id: 0 for m in members}
    out: dict[str, set] = {m.member_id: set() for m in members}
    owner_of = {tp: m.member_id for m in members for tp in pairs(m.current)}
    subscribers = {t: sorted(m.member_id for m in members if t in m.topics) for t in topics}
    order = sorted((t for t in topics if subscribers[t]),
                   key=lambda t: (topics[t].partitions / len(subscribers[t]), t))
    holder: dict[tuple, str] = {}
    for t in order:
        subscribed = set(subscribers[t])
        least = _LeastLoaded(subscribers[t], load)
        for p in range(topics[t].partitions):
            tp = (topics[t].topic_id, p)
            low = least.peek()
            prev = owner_of.get(tp)
            chosen = prev if prev is not None and prev in subscribed and load[prev] <= load[low] else low
            out[chosen].add(tp)
            holder[tp] = chosen
            load[chosen] += 1
    # balancing: a partition moves from its holder to the least-loaded subscriber of its topic while the
    # holder has two or more partitions more; a few passes over the partitions, topic by topic
    for _ in range(8):
        moved = False
        for t in order:
            subs = subscribers[t]
            low = min(subs, key=lambda x: (load[x], x))
            for p in range(topics[t].partitions):
                tp = (topics[t].topic_id, p)
                mid = holder[tp]
                if load[mid] > load[low] + 1:
                    out[mid].discard(tp)
                    out[low].add(tp)
                    holder[tp] = low
                    load[mid] -= 1
                    load[low] += 1
                    moved = True
                    low = min(subs, key=lambda x: (load[x], x))
        if not moved:
            break
    return {mid: from_pairs(parts) for mid, parts in out.items()}


def range_assignor(members: list[AssignorMember], topics: dict[str, TopicInfo]) -> dict[str, Partitions]:
    """Static members first (by instance id), then dynamic ones (by member id); each topic's partitions
    split into contiguous ranges among its subscribers in that order, the first ones getting one more
    when they do not divide evenly. Deterministic; not sticky."""
    ordered = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or "", m.member_id))
    out: dict[str, set] = {m.member_id: set() for m in members}
    for t in sorted(topics):
        subs = [m.member_id for m in ordered if t in m.topics]
        if not subs:
            continue
        share, extra = divmod(topics[t].partitions, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            n = share + (1 if i < extra else 0)
            out[mid].update((topics[t].topic_id, p) for p in range(start, start + n))
            start += n
    return {mid: from_pairs(parts) for mid, parts in out.items()}


ASSIGNORS = {"uniform": uniform, "range": range_assignor}
DEFAULT_ASSIGNOR = "uniform"
