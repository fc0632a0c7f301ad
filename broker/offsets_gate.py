"""The broker's check of an OffsetCommit (or TxnOffsetCommit) before the group coordinator sees it.

Kafka's request handler (`KafkaApis.handleOffsetCommitRequest`, and its TxnOffsetCommit twin) answers UNKNOWN_TOPIC_OR_PARTITION (3) for every
partition of a topic that does not exist, and for every partition index the topic does not have, and passes
only the rest to the coordinator (with an authorizer, a topic the principal may not READ is answered
TOPIC_AUTHORIZATION_FAILED (29) first); when nothing is left it answers at once, so a commit for unknown partitions
alone neither stores an offset nor creates a group. `split_commit` does that split; `merge_commit` puts the
refused partitions back into the coordinator's answer, in the request's order.

OffsetCommit v10 and OffsetFetch v10 (Kafka 4.3's, KIP-848's follow-up) name topics by id instead of by name.
As Kafka's request handler, the broker resolves each id to its topic's name from the topic table before the
coordinator sees the request (the coordinator and its offset store stay keyed by name); an id no topic has
is answered UNKNOWN_TOPIC_ID (100) for each of its partitions, checked before the principal's READ. The answer
names each topic by its id again: the request's for a commit or a named fetch; for a fetch of all offsets,
the id the topic has now, a topic that no longer exists (its offsets outlive it until they expire) left out,
since v10 cannot name it.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

from kafka.protocol.consumer.group import OffsetCommitResponse

from tenure.gcpause import gc_paused
from tenure.protocol.errors import ErrorCode

from . import base
from .topics import TopicRegistry


def resolve_ids(request_topics, topics: TopicRegistry) -> None:
    """v10: each topic's name from its id (set on the request's topic); "" for an id no topic has."""
    for t in request_topics or ():
        topic = topics.by_id(t.topic_id)
        t.name = topic.name if topic is not None else ""


def split_commit(body, topics: TopicRegistry, readable: Callable[[str], bool] = lambda name: True,
                 by_id: bool = False) -> tuple[object | None, dict[tuple[str, int], int]]:
    """(the request with only existing partitions of topics the principal may READ, or None when none is left;
    {(topic, partition): 29 or 3, or 100 for a topic id no topic has when `by_id` - v10, its names resolved})."""
    refused: dict[tuple[str, int], int] = {}
    kept_topics = []
    for t in body.topics:
        if by_id and not t.name:            # an id no topic has: Kafka's first check at v10
            for p in t.partitions:
                refused[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_ID
            continue
        if not readable(t.name):            # as Kafka: TOPIC_AUTHORIZATION_FAILED before whether it exists
            for p in t.partitions:
                refused[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        topic = topics.get(t.name)
        if topic is None:                   # every partition refused: one pass of the C-level dict update
            refused.update(dict.fromkeys([(t.name, p.partition_index) for p in t.partitions],
                                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        count = len(topic.partitions)
        kept = [p for p in t.partitions if 0 <= p.partition_index < count]
        for p in t.partitions:
            if not 0 <= p.partition_index < count:
                refused[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if kept:
            t.partitions = kept
            kept_topics.append(t)
    if not refused:
        return body, refused
    if not kept_topics:
        return None, refused
    body.topics = kept_topics
    return body, refused


def merge_commit(order: list[tuple[str, list[int], object]], answer, refused: dict[tuple[str, int], int],
                 response=OffsetCommitResponse):
    """The coordinator's answer (None when it was not asked) with the refused partitions added, topics and
    partitions in the order of the original request (`response`: the API's response class), each topic with
    the id the request gave it (OffsetCommit v10)."""
    codes, T, P, ids = _merging(answer, refused, response)
    topics = [T(name=name, partitions=[P(partition_index=i, error_code=codes[(name, i)]) for i in parts],
                **({"topic_id": topic_id} if ids else {}))
              for name, parts, topic_id in order]
    return response(throttle_time_ms=answer.throttle_time_ms if answer is not None else 0, topics=topics)


async def merge_commit_in_turns(order: list[tuple[str, list[int], object]], answer,
                                refused: dict[tuple[str, int], int], response=OffsetCommitResponse):
    """`merge_commit` made `base.PARTITIONS_PER_TURN` partitions per loop turn when the request names more (the
    codes are all known before the first turn: the answer is the one `merge_commit` gives, whatever runs between
    turns); no automatic garbage collection walks it while it grows."""
    size = base.PARTITIONS_PER_TURN
    if sum(len(parts) for _, parts, _ in order) <= size:
        return merge_commit(order, answer, refused, response)
    codes, T, P, ids = _merging(answer, refused, response)
    topics = []
    left = size
    with gc_paused():
        for name, parts, topic_id in order:
            made = []
            for i in parts:
                if left == 0:
                    await asyncio.sleep(0)                 # the other clients' turn
                    left = size
                made.append(P(partition_index=i, error_code=codes[(name, i)]))
                left -= 1
            topics.append(T(name=name, partitions=made, **({"topic_id": topic_id} if ids else {})))
    return response(throttle_time_ms=answer.throttle_time_ms if answer is not None else 0, topics=topics)


def _merging(answer, refused: dict[tuple[str, int], int], response) -> tuple[dict, type, type, bool]:
    """(each partition's code: the refused ones', then the coordinator's answer's; the topic and partition
    classes of `response`; whether its topics carry ids)."""
    T = response.fields["topics"].data_class
    P = T.fields["partitions"].data_class
    codes = dict(refused)
    if answer is not None:
        for t in answer.topics:
            for p in t.partitions:
                codes[(t.name, p.partition_index)] = p.error_code
    return codes, T, P, "topic_id" in T.fields


def request_order(body) -> list[tuple[str, list[int], object]]:
    """(name, partitions, topic id - None for an API without ids) of each topic of the request, in order."""
    return [(t.name, [p.partition_index for p in t.partitions], getattr(t, "topic_id", None)) for t in body.topics]


def split_fetch(body) -> dict[str, list]:
    """OffsetFetch v10, its names resolved (`resolve_ids`): the topics no topic has the id of, taken out of
    each group's request, by group id (answered `merge_fetch`)."""
    unknown: dict[str, list] = {}
    for q in body.groups:
        if q.topics is None:
            continue
        unknown.setdefault(q.group_id, []).extend(t for t in q.topics if not t.name)
        q.topics = [t for t in q.topics if t.name]
    return unknown


def merge_fetch(answer, unknown: dict[str, list], asked: dict[str, object], topics: TopicRegistry):
    """OffsetFetch v10's answer: each topic named by its id - the request's (`asked`: name -> id), else (all
    offsets) the id the topic has now, a topic without one left out -, then the unknown ids of each group that
    got no group error, each partition UNKNOWN_TOPIC_ID (100)."""
    for g in answer.groups:
        T = type(g).fields["topics"].data_class
        P = T.fields["partitions"].data_class
        kept = []
        for t in g.topics:
            topic_id = asked.get(t.name)
            if topic_id is None:
                topic = topics.get(t.name)
                if topic is None:
                    continue
                topic_id = topic.topic_id
            t.topic_id = topic_id
            kept.append(t)
        if not g.error_code:
            kept += [T(name="", topic_id=t.topic_id, partitions=[
                P(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                  error_code=ErrorCode.UNKNOWN_TOPIC_ID) for i in t.partition_indexes])
                for t in unknown.pop(g.group_id, [])]
        g.topics = kept
    return answer
