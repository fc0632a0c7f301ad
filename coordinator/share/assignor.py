"""The share groups' server assignor, Kafka's "simple" one for members subscribed to the same topics: with at
least as many members as a topic's partitions every member gets one partition and a partition is shared by
several members (member i gets partition i mod n); with fewer, the partitions are spread over the members
(partition p goes to member p mod m). Members are ordered by member id, so the result depends only on the
group and the topics."""
from __future__ import annotations

import uuid

ASSIGNOR_NAME = "simple"


def assign(members: dict[str, frozenset[str]], topics: dict[str, tuple[uuid.UUID, int]]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """`members`: member id -> subscribed topic names; `topics`: name -> (topic id, partition count) of the
    topics that exist. Returns member id -> topic id -> partitions (every member present, maybe empty)."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {mid: {} for mid in members}
    for name in sorted(topics):
        tid, count = topics[name]
        subscribers = sorted(mid for mid, subs in members.items() if name in subs)
        if not subscribers or count <= 0:
            continue
        if len(subscribers) >= count:
            for i, mid in enumerate(subscribers):
                out[mid].setdefault(tid, set()).add(i % count)
        else:
            for p in range(count):
                out[subscribers[p % len(subscribers)]].setdefault(tid, set()).add(p)
    return {mid: {tid: frozenset(ps) for tid, ps in parts.items()} for mid, parts in out.items()}
