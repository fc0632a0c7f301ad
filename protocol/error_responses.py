"""A whole-request error answer for each served API: what Kafka's `AbstractRequest.getErrorResponse`
gives, built from the decoded request so every topic, partition or group it named gets the error.

Used by fault injection (tenure/control/faults.py): "answer the next N JoinGroups with COORDINATOR_NOT_AVAILABLE".
The group APIs' builders (`join_group_error`, `sync_group_error`, ...) are also what the coordinator's
handlers answer their own whole-request errors with: an injected error and a real one look the same.
`error_response(request, code)` returns a response body of the request's API; `can_fail(api_key)` says
whether an API has one (Metadata has none: Kafka answers its errors per topic, and a Metadata with no
brokers is not an error a client can act on - close the connection or delay it instead).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.groups import DeleteGroupsResponse
from kafka.protocol.consumer.group import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    SyncGroupResponse,
)

from tenure.deferred import deferred

from . import consumer_group, share_group  # (their classes are built at their first use: structs.py)
from .apis import API_VERSIONS_KEY, SUPPORTED

if TYPE_CHECKING:
    from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse
# kafka-python's SASL classes: imported (quietly, as at import) by the first SASL answer - a SASL listener's
# exchange, or a SaslHandshake/SaslAuthenticate outside one
kafka_sasl = deferred("kafka.protocol.sasl")


def _item(cls, field: str, **kw):
    """An element of the response's array field `field` (kafka-python's nested data class)."""
    return cls.fields[field].data_class(**kw)


def _per_partition(R, field: str, topics, topic_kw, parts_of, parts_field: str, part_kw) -> dict:
    """{field: [a topic answer per request topic, with an answer per partition it named]}."""
    T = R.fields[field].data_class
    return {field: [T(**topic_kw(t), **{parts_field: [_item(T, parts_field, **part_kw(p)) for p in parts_of(t) or []]})
                    for t in topics or []]}


def _produce(req, R, code):
    topic = ((lambda t: {"topic_id": t.topic_id}) if req.api_version >= 13 else (lambda t: {"name": t.name}))
    return R(**_per_partition(R, "responses", req.body.topic_data, topic,
                              lambda t: t.partition_data, "partition_responses",
                              lambda p: {"index": p.index, "error_code": code, "base_offset": -1,
                                         "log_start_offset": -1}))


def _fetch(req, R, code):
    return R(error_code=code, session_id=0, **_per_partition(
        R, "responses", req.body.topics,
        lambda t: {"topic": getattr(t, "topic", None) or "", "topic_id": getattr(t, "topic_id", None)},
        lambda t: t.partitions, "partitions",
        lambda p: {"partition_index": p.partition, "error_code": code, "high_watermark": -1,
                   "last_stable_offset": -1, "log_start_offset": -1}))


def _list_offsets(req, R, code):
    return R(**_per_partition(R, "topics", req.body.topics, lambda t: {"name": t.name}, lambda t: t.partitions,
                              "partitions", lambda p: {"partition_index": p.partition_index, "error_code": code,
                                                       "timestamp": -1, "offset": -1}))


# ---------------------------------------------------------------- the group APIs (one builder each)
def join_group_error(version: int, code: int, member_id: str = "") -> JoinGroupResponse:
    """JoinGroup's error shape (J4): generation -1, protocol type null, protocol name null from v7 (""
    before, where it is not nullable), leader "", no members, the member id the request gave."""
    return JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1, protocol_type=None,
                             protocol_name=None if version >= 7 else "", leader="", skip_assignment=False,
                             member_id=member_id, members=[])


def sync_group_error(code: int) -> SyncGroupResponse:
    """SyncGroup's error shape: protocol type and name null, no assignment."""
    return SyncGroupResponse(throttle_time_ms=0, error_code=code, protocol_type=None, protocol_name=None,
                             assignment=b"")


def heartbeat_error(code: int) -> HeartbeatResponse:
    """A Heartbeat answer is its code alone (0 included)."""
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


def shared_heartbeat_answer(code: int) -> HeartbeatResponse:
    """The coordinator's Heartbeat answer of `code`: one object per code, shared by every answer with that code
    (made once, as `heartbeat_error` makes it). Nothing in the server changes an answer once made but a test's
    `on_response` hook, which the dispatcher hands a copy of a shared one (`is_shared_answer`)."""
    answer = _HEARTBEAT_ANSWERS.get(code)
    if answer is None:
        answer = _HEARTBEAT_ANSWERS[code] = heartbeat_error(code)
    return answer


_HEARTBEAT_ANSWERS: dict[int, HeartbeatResponse] = {}


def is_shared_answer(body: Any) -> bool:
    """Whether `body` is an answer object shared between requests (`shared_heartbeat_answer`'s)."""
    code = getattr(body, "error_code", None)
    return isinstance(code, int) and _HEARTBEAT_ANSWERS.get(code) is body


def sasl_handshake_error(code: int, mechanisms: list[str] | None = None) -> SaslHandshakeResponse:
    """A SaslHandshake answer: its code and the mechanisms the listener enables (UNSUPPORTED_SASL_MECHANISM
    tells the client which it may use; ILLEGAL_SASL_STATE outside an exchange names none)."""
    return kafka_sasl.SaslHandshakeResponse(error_code=code, mechanisms=list(mechanisms or []))


def sasl_authenticate_error(code: int, message: str | None = None) -> SaslAuthenticateResponse:
    """A SaslAuthenticate answer of a failure: its code, Kafka's message, no token, no session."""
    return kafka_sasl.SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=b"", session_lifetime_ms=0)


def leave_group_error(code: int) -> LeaveGroupResponse:
    """LeaveGroup's whole-request error: the top-level code, no per-member answers (v3+)."""
    return LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[])


def offset_commit_error(topics, code: int, response=OffsetCommitResponse):
    """OffsetCommit's (or TxnOffsetCommit's, `response`) error: `code` for every partition of every topic
    the request named (by id too: OffsetCommit v10)."""
    T = response.fields["topics"].data_class
    P = T.fields["partitions"].data_class
    ids = "topic_id" in T.fields
    return response(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions or []],
          **({"topic_id": t.topic_id} if ids else {}))
        for t in topics or []])


def offset_delete_error(code: int) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])


def delete_groups_error(group_ids, code: int) -> DeleteGroupsResponse:
    D = DeleteGroupsResponse.DeletableGroupResult
    return DeleteGroupsResponse(throttle_time_ms=0, results=[D(group_id=g, error_code=code) for g in group_ids or []])


def _offset_commit(req, R, code):
    return offset_commit_error(req.body.topics, code)


def _txn_offset_commit(req, R, code):
    return offset_commit_error(req.body.topics, code, R)


def _offset_fetch(req, R, code):
    if req.api_version >= 8:
        G = R.fields["groups"].data_class
        return R(groups=[G(group_id=g.group_id, error_code=code, topics=[]) for g in req.body.groups or []])
    return R(error_code=code, **_per_partition(
        R, "topics", req.body.topics, lambda t: {"name": t.name}, lambda t: t.partition_indexes, "partitions",
        lambda p: {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": code}))


def _find_coordinator(req, R, code):
    if req.api_version >= 4:
        C = R.fields["coordinators"].data_class
        return R(coordinators=[C(key=k, node_id=-1, host="", port=-1, error_code=code)
                               for k in req.body.coordinator_keys or []])
    return R(error_code=code, node_id=-1, host="", port=-1)


def _describe_groups(req, R, code):
    G = R.fields["groups"].data_class
    return R(groups=[G(error_code=code, group_id=g, group_state="", protocol_type="", protocol_data="",
                       members=[]) for g in req.body.groups or []])


def _delete_groups(req, R, code):
    return delete_groups_error(req.body.groups_names, code)


def _create_topics(req, R, code):
    T = R.fields["topics"].data_class
    return R(topics=[T(name=t.name, error_code=code, num_partitions=-1, replication_factor=-1)
                     for t in req.body.topics or []])


def _delete_topics(req, R, code):
    T = R.fields["responses"].data_class
    names = req.body.topic_names if req.api_version < 6 else [t.name for t in req.body.topics or []]
    return R(responses=[T(name=n, error_code=code) for n in names or []])


def _offset_for_leader_epoch(req, R, code):
    return R(**_per_partition(R, "topics", req.body.topics, lambda t: {"topic": t.topic}, lambda t: t.partitions,
                              "partitions", lambda p: {"partition": p.partition, "error_code": code,
                                                       "leader_epoch": -1, "end_offset": -1}))


def _describe_configs(req, R, code):
    T = R.fields["results"].data_class
    return R(results=[T(resource_type=r.resource_type, resource_name=r.resource_name, error_code=code,
                        configs=[]) for r in req.body.resources or []])


def _create_partitions(req, R, code):
    T = R.fields["results"].data_class
    return R(results=[T(name=t.name, error_code=code) for t in req.body.topics or []])


def _alter_configs(req, R, code):
    T = R.fields["responses"].data_class
    return R(responses=[T(resource_type=r.resource_type, resource_name=r.resource_name, error_code=code)
                        for r in req.body.resources or []])


def _delete_records(req, R, code):
    return R(**_per_partition(R, "topics", req.body.topics, lambda t: {"name": t.name}, lambda t: t.partitions,
                              "partitions", lambda p: {"partition_index": p.partition_index, "error_code": code,
                                                       "low_watermark": -1}))


def _add_partitions_to_txn(req, R, code):
    """v4+ (batched by transactional id): one top-level code, as Kafka answers; before: per partition."""
    if req.api_version >= 4:
        return R(error_code=code, results_by_transaction=[])
    return R(**_per_partition(R, "results_by_topic_v3_and_below", req.body.v3_and_below_topics,
                              lambda t: {"name": t.name}, lambda t: t.partitions, "results_by_partition",
                              lambda p: {"partition_index": p, "partition_error_code": code}))


def _describe_producers(req, R, code):
    return R(**_per_partition(R, "topics", req.body.topics, lambda t: {"name": t.name}, lambda t: t.partition_indexes,
                              "partitions", lambda p: {"partition_index": p, "error_code": code,
                                                       "active_producers": []}))


def _describe_transactions(req, R, code):
    S = R.fields["transaction_states"].data_class
    return R(transaction_states=[S(error_code=code, transactional_id=tid, transaction_state="",
                                   transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                                   producer_epoch=-1, topics=[]) for tid in req.body.transactional_ids or []])


def _elect_leaders(req, R, code):
    T = R.fields["replica_election_results"].data_class
    P = T.fields["partition_result"].data_class
    return R(error_code=code, replica_election_results=[
        T(topic=t.topic, partition_result=[P(partition_id=i, error_code=code) for i in t.partitions or []])
        for t in req.body.topic_partitions or []])


def _reassignments(req, R, code):
    return R(error_code=code, **_per_partition(
        R, "responses", req.body.topics, lambda t: {"name": t.name}, lambda t: t.partitions, "partitions",
        lambda p: {"partition_index": p.partition_index, "error_code": code}))


def _describe_log_dirs(req, R, code):
    """v1-2 have no top-level code: the one log dir carries it."""
    D = R.fields["results"].data_class
    return R(error_code=code, results=[D(error_code=code, log_dir="", topics=[])])


def _describe_topic_partitions(req, R, code):
    T = R.fields["topics"].data_class
    return R(topics=[T(name=t.name, error_code=code, partitions=[]) for t in req.body.topics or []])


def _create_acls(req, R, code):
    C = R.fields["results"].data_class
    return R(throttle_time_ms=0, results=[C(error_code=code, error_message=None) for _ in req.body.creations or []])


def _delete_acls(req, R, code):
    F = R.fields["filter_results"].data_class
    return R(throttle_time_ms=0, filter_results=[F(error_code=code, error_message=None, matching_acls=[])
                                                 for _ in req.body.filters or []])


def _api_versions(req, R, code):
    """NB: goes on the wire as v0 (codec.encode_api_versions_error), the form clients parse an error in."""
    from .codec import api_versions_body
    return api_versions_body(0, code, req.served)


def _join_group(req, R, code):
    """JoinGroup echoes the member id the request named."""
    return join_group_error(req.api_version, code, req.body.member_id or "")


def consumer_group_heartbeat_error(code: int, message: str | None = None) -> Any:
    return consumer_group.ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                                         member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                                                         assignment=None)


def _consumer_group_describe(req, R, code):
    """ConsumerGroupDescribe: each group asked for answers the code."""
    D = R.DescribedGroup
    return R(throttle_time_ms=0, groups=[
        D(error_code=code, error_message=None, group_id=gid, group_state="", group_epoch=-1, assignment_epoch=-1,
          assignor_name="", members=[]) for gid in dict.fromkeys(req.body.group_ids)])


def _alter_replica_log_dirs(req, R, code):
    by_topic: dict[str, list[int]] = {}
    for d in req.body.dirs or []:
        for t in d.topics or []:
            by_topic.setdefault(t.name, []).extend(t.partitions or [])
    T = R.fields["results"].data_class
    P = T.fields["partitions"].data_class
    return R(throttle_time_ms=0, results=[T(topic_name=n, partitions=[P(partition_index=i, error_code=code)
                                                                      for i in ps]) for n, ps in by_topic.items()])
def share_group_heartbeat_error(code: int, message: str | None = None) -> Any:
    return share_group.ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                                   member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                                                   assignment=None)


def _share_group_describe(req, R, code):
    """ShareGroupDescribe: each group asked for answers the code."""
    D = R.DescribedGroup
    return R(throttle_time_ms=0, groups=[
        D(error_code=code, error_message=None, group_id=gid, group_state="", group_epoch=-1, assignment_epoch=-1,
          assignor_name="", members=[]) for gid in dict.fromkeys(req.body.group_ids or [])])


def _describe_share_group_offsets(req, R, code):
    """DescribeShareGroupOffsets: each group asked for answers the code."""
    G = R.DescribeShareGroupOffsetsResponseGroup
    return R(throttle_time_ms=0, groups=[G(group_id=q.group_id, topics=[], error_code=code, error_message=None)
                                         for q in req.body.groups or []])


def _share_state(req, R, code):
    """The share coordinator's APIs (83-87): every partition of every topic answers the code."""
    T = R.fields["results"].data_class
    P = T.fields["partitions"].data_class
    defaults = {k: v for k, v in {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1, "state_batches": [],
                                  "delivery_complete_count": -1}.items() if k in P.fields}
    return R(results=[T(topic_id=t.topic_id, partitions=[
        P(partition=p.partition, error_code=code, error_message=None, **defaults) for p in t.partitions or []])
        for t in req.body.topics or []])


def _top_level(**extra) -> Callable:
    """APIs whose error is one top-level code (group APIs, InitProducerId, ...)."""
    def build(req, R, code):
        return R(error_code=code, **extra)
    return build


_BUILDERS: dict[int, Callable[[Any, type, int], Any]] = {
    0: _produce, 1: _fetch, 2: _list_offsets, 8: _offset_commit, 9: _offset_fetch, 10: _find_coordinator,
    11: _join_group, 12: lambda req, R, code: heartbeat_error(code), 13: lambda req, R, code: leave_group_error(code),
    14: lambda req, R, code: sync_group_error(code),
    15: _describe_groups, 16: _top_level(groups=[]), 18: _api_versions, 19: _create_topics,
    20: _delete_topics, 22: _top_level(producer_id=-1, producer_epoch=-1), 23: _offset_for_leader_epoch,
    21: _delete_records, 32: _describe_configs, 33: _alter_configs, 35: _describe_log_dirs,
    37: _create_partitions, 42: _delete_groups, 43: _elect_leaders, 44: _alter_configs, 45: _reassignments,
    46: _top_level(topics=[]), 47: lambda req, R, code: offset_delete_error(code), 75: _describe_topic_partitions,
    60: _top_level(cluster_id="", controller_id=-1, brokers=[]),
    24: _add_partitions_to_txn, 25: _top_level(), 26: _top_level(), 28: _txn_offset_commit,
    61: _describe_producers, 65: _describe_transactions,
    68: lambda req, R, code: consumer_group_heartbeat_error(code), 69: _consumer_group_describe,
    66: _top_level(unknown_state_filters=[], transaction_states=[]),
    17: lambda req, R, code: sasl_handshake_error(code), 36: lambda req, R, code: sasl_authenticate_error(code),
    50: _top_level(results=[]),
    51: lambda req, R, code: R(throttle_time_ms=0, results=[_item(R, "results", user=name, error_code=code)
                                                            for name in dict.fromkeys(
                                                                [d.name for d in req.body.deletions or []]
                                                                + [u.name for u in req.body.upsertions or []])]),
    29: _top_level(error_message=None, resources=[]), 30: _create_acls, 31: _delete_acls,
    34: _alter_replica_log_dirs, 55: _top_level(error_message=None, topics=[], nodes=[]),
    74: _top_level(config_resources=[]),
    # share groups (KIP-932): ShareFetch and ShareAcknowledge answer a whole-request error at the top level
    76: lambda req, R, code: share_group_heartbeat_error(code), 77: _share_group_describe,
    78: _top_level(acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[]),
    79: _top_level(acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[]),
    90: _describe_share_group_offsets, 91: _top_level(responses=[]), 92: _top_level(responses=[]),
    83: _share_state, 84: _share_state, 85: _share_state, 86: _share_state, 87: _share_state,
}


assert API_VERSIONS_KEY in _BUILDERS


def can_fail(api_key: int) -> bool:
    return _BUILDERS.get(api_key) is not None


def error_response(request, code: int):
    """The response body answering every part of `request` (a protocol.codec.Request) with `code`."""
    build = _BUILDERS.get(request.api_key)
    if build is None:
        raise ValueError(f"{request.name} has no whole-request error answer")
    return build(request, SUPPORTED[request.api_key].response, int(code))
