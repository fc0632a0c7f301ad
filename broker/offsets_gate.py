"""The broker's check of an OffsetCommit (or TxnOffsetCommit) before the group coordinator sees it.

Kafka's request handler (`KafkaApis.handleOffsetCommitRequest`, and its TxnOffsetCommit twin) answers UNKNOWN_TOPIC_OR_PARTITION (3) for every
partition of a topic that does not exist, and for every partition index the topic does not have, and passes
only the rest to the coordinator (with an authorizer, a topic the principal may not READ is answered
TOPIC_AUTHORIZATION_FAILED (29) first); when nothing is left it answers at once, so a commit for unknown partitions
alone neither stores an offset nor creates a group. `split_commit` does that split; `merge_commit` puts the
refused partitions back into the coordinator's answer, in the request's order.
"""
from __future__ import annotations

from collections.abc import Callable

from kafka.protocol.consumer.group import OffsetCommitResponse

from tenure.protocol.errors import ErrorCode

from .topics import TopicRegistry


def split_commit(body, topics: TopicRegistry, readable: Callable[[str], bool] = lambda name: True
                 ) -> tuple[object | None, dict[tuple[str, int], int]]:
    """(the request with only existing partitions of topics the principal may READ, or None when none is left;
    {(topic, partition): 29 or 3})."""
    refused: dict[tuple[str, int], int] = {}
    kept_topics = []
    for t in body.topics:
        if not readable(t.name):            # as Kafka: TOPIC_AUTHORIZATION_FAILED before whether it exists
            for p in t.partitions:
                refused[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        topic = topics.get(t.name)
        count = len(topic.partitions) if topic is not None else 0
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


def merge_commit(order: list[tuple[str, list[int]]], answer, refused: dict[tuple[str, int], int],
                 response=OffsetCommitResponse):
    """The coordinator's answer (None when it was not asked) with the refused partitions added, topics and
    partitions in the order of the original request (`response`: the API's response class)."""
    _T = response.fields["topics"].data_class
    _P = _T.fields["partitions"].data_class
    codes = dict(refused)
    if answer is not None:
        for t in answer.topics:
            for p in t.partitions:
                codes[(t.name, p.partition_index)] = p.error_code
    topics = [_T(name=name, partitions=[_P(partition_index=i, error_code=codes[(name, i)]) for i in parts])
              for name, parts in order]
    return response(throttle_time_ms=answer.throttle_time_ms if answer is not None else 0, topics=topics)


def request_order(body) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in body.topics]
