"""Online migration of a live group between the classic protocol and the consumer protocol (KIP-848), as
Kafka 4.x's group coordinator does it: `group.consumer.migration.policy` (bidirectional, upgrade, downgrade,
disabled), and the two conversions.

Upgrade: a ConsumerGroupHeartbeat joining a non-empty classic group whose protocol type is "consumer" turns it
into a consumer group. The records are Kafka's: the classic group's tombstone, then each member's subscription,
the group epoch (the classic generation), each member's target assignment (what it holds), the target
assignment epoch, each member's current assignment (epoch = the generation, stable). Every classic member keeps
its assignment and its classic metadata (session timeout, JoinGroup protocols).

Downgrade: when the last consumer-protocol member leaves or is fenced with other members left (all classic),
or a static one is replaced by a classic member, the group becomes a classic group again: the consumer group's
tombstones, then one GroupMetadata record of a Stable group of generation = the group epoch whose members hold
their target assignments (serialized in the version of their own subscription). A member leaving or fenced
starts a rebalance of the classic group; a replacement does not.

Pure functions over group values: the consumer kind (consumer/heartbeat.py, consumer/classic_members.py) calls
them and emits what they return.
"""
from __future__ import annotations

import struct
from collections.abc import Callable

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from tenure.protocol.consumer_group_records import (
    ClassicMemberMetadata,
    ConsumerMemberRecord,
    CurrentAssignmentRecord,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
)
from tenure.protocol.records import GroupMetadataRecord

from .classic.group import STABLE, ClassicGroup, Member
from .consumer.group import ConsumerGroup, ConsumerMember, Partitions, freeze

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
CONSUMER_PROTOCOL_TYPE = "consumer"

_TP = ConsumerProtocolAssignment.fields["assigned_partitions"].data_class


class MigrationRefused(Exception):
    """A conversion Kafka refuses: the request fails with GROUP_ID_NOT_FOUND and this message."""


def upgrade_enabled(policy: str) -> bool:
    return policy in ("bidirectional", "upgrade")


def downgrade_enabled(policy: str) -> bool:
    return policy in ("bidirectional", "downgrade")


def upgrade_refusal(policy: str, g: ClassicGroup, max_size: int | None) -> str | None:
    """Why a non-empty classic group may not be upgraded (Kafka's validateOnlineUpgrade), None if it may."""
    if not upgrade_enabled(policy):
        return "the online upgrade is disabled"
    if g.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if max_size is not None and len(g.members) > max_size:
        return "the group size exceeds the consumer group maximum size"
    return None


def may_downgrade(policy: str, g: ConsumerGroup, leaving: set[str], max_size: int | None, *,
                  replacement: bool = False) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember / WithReplacedMemberId: every member but the leaving
    (or replaced) ones speaks the classic protocol, some remain (a leave), the policy allows a downgrade and
    the classic group would fit."""
    if not g.all_classic_except(leaving):
        return False
    remaining = len(g.members) if replacement else len([m for m in g.members if m not in leaving])
    if not replacement and remaining < 1:
        return False
    if not downgrade_enabled(policy):
        return False
    return max_size is None or remaining <= max_size


# ---------------------------------------------------------------- the embedded consumer protocol
def decode_subscription(metadata: bytes) -> ConsumerProtocolSubscription:
    """A JoinGroup protocol's metadata as the consumer protocol's Subscription; ValueError if malformed."""
    try:
        return ConsumerProtocolSubscription.decode(bytes(metadata))
    except Exception as exc:            # kafka-python raises several types on short or bad input
        raise ValueError(f"malformed consumer protocol subscription: {exc}") from None


def protocol_version(metadata: bytes) -> int:
    """The version a Subscription is written in (its first int16), bounded by what the Assignment knows."""
    if len(metadata) < 2:
        return 0
    return max(0, min(struct.unpack_from(">h", metadata, 0)[0], ConsumerProtocolAssignment.max_version))


def decode_assignment(raw: bytes, topic_id: Callable[[str], object]) -> Partitions:
    """A classic member's assignment (the consumer protocol's Assignment) as partitions by topic id; topics the
    cluster does not know are left out. ValueError if malformed."""
    if not raw:
        return {}
    try:
        a = ConsumerProtocolAssignment.decode(bytes(raw))
    except Exception as exc:
        raise ValueError(f"malformed consumer protocol assignment: {exc}") from None
    out: dict = {}
    for t in a.assigned_partitions:
        tid = topic_id(t.topic)
        if tid is not None and t.partitions:
            out[tid] = out.get(tid, frozenset()) | frozenset(t.partitions)
    return out


def encode_assignment(partitions: Partitions, topic_name: Callable[[object], str | None], version: int) -> bytes:
    """Partitions by topic id in the consumer protocol's Assignment, in `version` (the member's subscription's)."""
    topics = []
    for tid, parts in freeze(partitions):
        name = topic_name(tid)
        if name is not None:
            topics.append(_TP(topic=name, partitions=list(parts)))
    topics.sort(key=lambda t: t.topic)
    return bytes(ConsumerProtocolAssignment(assigned_partitions=topics, user_data=None).encode(version=version))


def classic_subscription(protocols: tuple[tuple[str, bytes], ...]) -> ConsumerProtocolSubscription:
    """The subscription a classic member sends: its first protocol's metadata (Kafka's deserializeSubscription)."""
    if not protocols:
        raise ValueError("no protocols")
    return decode_subscription(protocols[0][1])


# ---------------------------------------------------------------- upgrade: classic -> consumer
def upgrade_records(g: ClassicGroup, topic_id: Callable[[str], object],
                    epoch_records: Callable[[int, set[str]], list]) -> list:
    """The records converting a non-empty classic group into a consumer group (ConsumerGroup.fromClassicGroup
    and createConsumerGroupRecords): ValueError if a member's embedded protocol is malformed. `epoch_records`:
    the group epoch's records for the subscribed topics (the metadata hash, or as Kafka 4.0 the subscription
    metadata record before the epoch record)."""
    gid, epoch = g.group_id, g.generation
    members: list[ConsumerMember] = []
    for m in g.members.values():
        sub = decode_subscription(m.metadata(g.protocol_name))
        assigned = decode_assignment(m.assignment, topic_id)
        members.append(ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=getattr(sub, "rack_id", None) or None,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(set(sub.topics))), rebalance_timeout_ms=m.rebalance_timeout_ms,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
            member_epoch=epoch, previous_member_epoch=epoch, assigned=assigned))
    subscribed = {t for m in members for t in m.subscribed_topic_names}
    out: list = [GroupMetadataRecord(gid, tombstone=True)]
    out += [ConsumerMemberRecord(gid, m.member_id, **m.metadata()) for m in members]
    out += epoch_records(epoch, subscribed)
    out += [TargetAssignmentMemberRecord(gid, m.member_id, freeze(m.assigned)) for m in members]
    out.append(TargetAssignmentMetadataRecord(gid, epoch))
    out += [CurrentAssignmentRecord(gid, m.member_id, m.member_epoch, m.previous_member_epoch, m.state,
                                    freeze(m.assigned), ()) for m in members]
    return out


# ---------------------------------------------------------------- downgrade: consumer -> classic
def downgraded_group(g: ConsumerGroup, leaving: set[str], topic_name: Callable[[object], str | None],
                     now_ms: int) -> ClassicGroup:
    """The Stable classic group a consumer group becomes (ClassicGroup.fromConsumerGroup): generation = the
    group epoch, every member but the leaving ones with its classic metadata and its target assignment."""
    c = ClassicGroup(g.group_id, state=STABLE, generation=g.group_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
                     state_timestamp=now_ms)
    for mid, m in g.members.items():
        if mid in leaving:
            continue
        assert m.classic is not None, "only classic members are kept by a downgrade"
        c.add_member(Member(mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, tuple(m.classic.protocols)))
    c.protocol_name = c.select_protocol()
    for cm in c.members.values():
        meta = cm.metadata(c.protocol_name)
        cm.assignment = encode_assignment(g.targets.get(cm.member_id, {}), topic_name, protocol_version(meta))
    return c
