"""__consumer_offsets record codecs: the project's own StaticMemberEvent record (key version 345) next to
Kafka's GroupMetadata and OffsetCommit records, and what `decode` does with key versions it does not know."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.protocol import records as rec
from tenure.protocol.records import (
    STATIC_EVENT_CAUSES,
    GroupMetadataRecord,
    MemberRecord,
    OffsetCommitRecord,
    StaticMemberEventRecord,
    UnknownRecordType,
    decode,
    encode,
    key_version,
)
from tenure.protocol.structs import decode_struct


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _nullable(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else _str(s)


def test_static_member_event_key_is_version_345_group_and_instance_id():
    key, value = encode(StaticMemberEventRecord("grp", "inst-1", rec.JOINED, None, "inst-1-7", 0, 5, "c", "/h"))
    assert key == struct.pack(">h", 345) + _str("grp") + _str("inst-1")
    assert key_version(key) == rec.STATIC_MEMBER_EVENT_KEY_VERSION == 345
    assert value == (struct.pack(">h", 0) + _str("joined") + _nullable(None) + _nullable("inst-1-7")
                     + struct.pack(">iq", 0, 5) + _str("c") + _str("/h"))


@pytest.mark.parametrize("cause", STATIC_EVENT_CAUSES)
def test_static_member_event_round_trips_for_every_cause(cause):
    r = StaticMemberEventRecord("g", "i1", cause, "i1-1", "i1-2", 7, 1_700_000_000_123, "client-a", "/10.0.0.9")
    assert decode(*encode(r)) == r


def test_static_member_event_round_trips_with_null_member_ids():
    for old, new in ((None, "new"), ("old", None), (None, None), ("", "x")):
        r = StaticMemberEventRecord("g", "i", rec.EXPIRED, old, new, 2, 9, "", "")
        assert decode(*encode(r)) == r


def test_static_member_event_tombstone_has_the_same_key_and_no_value():
    live = StaticMemberEventRecord("g", "i", rec.LEFT, "m", None, 3, 4, "c", "h")
    tomb = StaticMemberEventRecord("g", "i", tombstone=True)
    key, value = encode(tomb)
    assert value is None
    assert key == encode(live)[0]             # compaction: the tombstone supersedes the event
    assert decode(key, None) == tomb


def test_static_member_event_keys_differ_per_instance_and_per_group():
    keys = {encode(StaticMemberEventRecord(g, i, rec.JOINED, None, "m", 0, 0))[0]
            for g in ("g", "h") for i in ("i1", "i2")}
    assert len(keys) == 4
    # and never collide with the group's own GroupMetadata key
    assert encode(GroupMetadataRecord("g", tombstone=True))[0] not in keys


def test_encoding_an_unknown_cause_is_refused():
    with pytest.raises(ValueError):
        encode(StaticMemberEventRecord("g", "i", "teleported", None, "m", 0, 0))


def test_a_cause_written_by_a_newer_version_decodes_as_it_is():
    key = encode(StaticMemberEventRecord("g", "i", tombstone=True))[0]
    value = (struct.pack(">h", 0) + _str("from_the_future") + _nullable("a") + _nullable("b")
             + struct.pack(">iq", 1, 2) + _str("c") + _str("h"))
    assert decode(key, value) == StaticMemberEventRecord("g", "i", "from_the_future", "a", "b", 1, 2, "c", "h")


@pytest.mark.parametrize("kv", [17, 20, 344, 347, -1, 32767])   # 3-8, 16: KIP-848, 9-15: KIP-932; 345, 346: tenure's own
def test_other_unknown_key_versions_still_raise_unknown_record_type(kv):
    key = struct.pack(">h", kv) + _str("g") + _str("i")
    with pytest.raises(UnknownRecordType) as exc:
        decode(key, b"\x00\x00anything")
    assert exc.value.key_version == kv
    with pytest.raises(UnknownRecordType):
        decode(key, None)


def test_kafka_records_still_round_trip_beside_the_new_type():
    g = GroupMetadataRecord("g", "consumer", 3, "range", "m1", 42,
                            (MemberRecord("m1", "i1", "c", "/h", 30000, 10000, b"s", b"a"),))
    o = OffsetCommitRecord("g", "t", 0, 10, 5, "meta", 77)
    for r in (g, o, GroupMetadataRecord("g", tombstone=True), OffsetCommitRecord("g", "t", 0, tombstone=True)):
        assert decode(*encode(r)) == r


_text = st.text(max_size=20)


@settings(max_examples=200, deadline=None)
@given(group=_text, inst=_text, cause=st.sampled_from(STATIC_EVENT_CAUSES), old=st.none() | _text,
       new=st.none() | _text, gen=st.integers(-2**31, 2**31 - 1), ts=st.integers(-2**63, 2**63 - 1),
       cid=_text, host=_text)
def test_static_member_event_round_trip_fuzz(group, inst, cause, old, new, gen, ts, cid, host):
    r = StaticMemberEventRecord(group, inst, cause, old, new, gen, ts, cid, host)
    assert decode(*encode(r)) == r


@pytest.mark.parametrize("vv", range(5))
def test_every_value_version_decodes_as_kafka_pythons_field_by_field_path(vv):
    """`decode` reads each struct with kafka-python's compiled decoder; every value version Kafka has written
    (v0-v3, the flexible v4 with its tagged-field byte, and a version newer than the schema's, read as the
    newest) gives what `ApiData.decode` gives."""
    M = rec.GroupMetadataValue.MemberMetadata
    gm = rec.GroupMetadataValue(protocol_type="consumer", generation=7, protocol="range", leader="m1",
                                current_state_timestamp=99, members=[M(
                                    member_id="m1", group_instance_id="i1", client_id="c", client_host="/h",
                                    rebalance_timeout=30000, session_timeout=10000, subscription=b"\x00\x01s",
                                    assignment=b"a")])
    oc = rec.OffsetCommitValue(offset=10, leader_epoch=5, metadata="meta", commit_timestamp=77, expire_timestamp=-1)
    gkey = bytes(rec.GroupMetadataKey(group="g").encode(version=2))
    okey = bytes(rec.OffsetCommitKey(group="g", topic="t", partition=3).encode(version=1))
    for key, value in ((gkey, gm), (okey, oc)):
        raw = bytes(value.encode(version=vv))
        for data in (raw, struct.pack(">h", 9) + raw[2:] if vv == 4 else raw):
            slow = type(value).decode(data)
            assert decode_struct(type(value), data) == slow
            got = decode(key, data)
            if key == okey:
                assert (got.offset, got.metadata, got.commit_timestamp) == (10, "meta", 77)
                assert got.leader_epoch == (5 if vv >= 3 else -1)
            else:
                m = got.members[0]
                assert (got.generation, got.protocol, got.leader, m.member_id, m.subscription) == (
                    7, "range", "m1", "m1", b"\x00\x01s")
                assert m.group_instance_id == ("i1" if vv >= 3 else None)


def test_a_truncated_value_is_an_error_not_a_record():
    key, value = encode(OffsetCommitRecord("g", "t", 0, 10, 5, "meta", 77))
    with pytest.raises(struct.error):
        decode(key, value[:-3])
    with pytest.raises(ValueError):
        decode(key, struct.pack(">h", -2) + value[2:])


def test_consumer_group_records_round_trip_with_kafkas_key_types():
    import uuid

    from tenure.protocol.consumer_group_records import (
        ConsumerGroupMetadataRecord,
        ConsumerGroupPartitionMetadataRecord,
        ConsumerMemberRecord,
        CurrentAssignmentRecord,
        TargetAssignmentMemberRecord,
        TargetAssignmentMetadataRecord,
    )
    tid = uuid.UUID(int=7)
    cases = [
        (ConsumerGroupMetadataRecord("g", 4, -123456789012), 3),
        (ConsumerMemberRecord("g", "m", "i", "r1", "c", "/h", ("a", "b"), None, 30000, "range"), 5),
        (TargetAssignmentMetadataRecord("g", 4), 6),
        (TargetAssignmentMemberRecord("g", "m", ((tid, (0, 2)),)), 7),
        (CurrentAssignmentRecord("g", "m", 4, 3, 1, ((tid, (0,)),), ((tid, (2,)),)), 8),
    ]
    for record, kv in cases:
        key, value = encode(record)
        assert struct.unpack_from(">h", key)[0] == kv and struct.unpack_from(">h", value)[0] == 0
        assert decode(key, value) == record
        assert decode(*encode(type(record)(*[getattr(record, f) for f in ("group_id",)],
                                           **({"member_id": "m"} if kv in (5, 7, 8) else {}),
                                           tombstone=True))).tombstone
    # the metadata hash is a tagged field: a value without it is the epoch alone (hash 0)
    key, value = encode(ConsumerGroupMetadataRecord("g", 4, 0))
    assert value == struct.pack(">h", 0) + struct.pack(">i", 4) + b"\x00"
    # type 4 (the partition metadata KIP-1101 replaced; Kafka 4.0 writes it): key = the group id; value v0,
    # flexible: topics (id, name, partition count, an empty PartitionMetadata list - 4.0 writes no racks)
    key4 = struct.pack(">h", 4) + _str("g")
    assert decode(key4, None) == ConsumerGroupPartitionMetadataRecord("g", tombstone=True)
    record4 = ConsumerGroupPartitionMetadataRecord("g", ((tid, "a", 3),))
    key, value = encode(record4)
    assert key == key4
    assert value == (struct.pack(">h", 0) + b"\x02" + tid.bytes + b"\x02a" + struct.pack(">i", 3) + b"\x01"
                     + b"\x00" + b"\x00")
    assert decode(key, value) == record4
    assert encode(ConsumerGroupPartitionMetadataRecord("g", tombstone=True)) == (key4, None)
    # an older log's racks are read and dropped (what 4.0 compares has none)
    with_racks = (struct.pack(">h", 0) + b"\x02" + tid.bytes + b"\x02a" + struct.pack(">i", 1)
                  + b"\x02" + struct.pack(">i", 0) + b"\x02" + b"\x03r1" + b"\x00" + b"\x00" + b"\x00")
    assert decode(key4, with_racks) == ConsumerGroupPartitionMetadataRecord("g", ((tid, "a", 1),))


def test_the_regular_expression_record_is_kafkas_type_16():
    """ConsumerGroupRegularExpressionKey (version 16: group id, expression) and Value v0 (flexible: compact
    topic names, version, timestamp), byte for byte."""
    from tenure.protocol.consumer_group_records import RegularExpressionRecord
    record = RegularExpressionRecord("g", "t.*", ("t1", "t2"), 7, 123)
    key, value = encode(record)
    assert key == struct.pack(">h", 16) + _str("g") + _str("t.*")
    assert value == (struct.pack(">h", 0) + b"\x03" + b"\x03t1" + b"\x03t2" + struct.pack(">qq", 7, 123) + b"\x00")
    assert decode(key, value) == record
    assert decode(key, None) == RegularExpressionRecord("g", "t.*", tombstone=True)


def test_the_compiled_encoder_writes_the_bytes_of_the_field_by_field_one():
    """encode_struct (the KIP-848 record values: kafka-python's compiled encoder) against ApiData.encode, for
    values with nulls, tagged fields, nested arrays and a classic member's protocols."""
    import uuid

    from tenure.protocol.consumer_group_records import (
        ConsumerGroupCurrentMemberAssignmentValue,
        ConsumerGroupMemberMetadataValue,
        ConsumerGroupMetadataValue,
        ConsumerGroupRegularExpressionValue,
    )
    from tenure.protocol.structs import encode_struct
    M = ConsumerGroupMemberMetadataValue
    C = M.fields["classic_member_metadata"].data_class
    P = C.fields["supported_protocols"].data_class
    A = ConsumerGroupCurrentMemberAssignmentValue
    T = A.fields["assigned_partitions"].data_class
    values = [
        M(instance_id=None, rack_id="r", client_id="c", client_host="/h", subscribed_topic_names=["a", "é"] * 50,
          subscribed_topic_regex=None, rebalance_timeout_ms=1, server_assignor=None, classic_member_metadata=None),
        M(instance_id="i", rack_id=None, client_id="", client_host="", subscribed_topic_names=[],
          subscribed_topic_regex="t.*", rebalance_timeout_ms=-1, server_assignor="range",
          classic_member_metadata=C(session_timeout_ms=10, supported_protocols=[P(name="range", metadata=b"\0x")])),
        ConsumerGroupMetadataValue(epoch=4, metadata_hash=-5),
        ConsumerGroupMetadataValue(epoch=4, metadata_hash=0),
        A(member_epoch=3, previous_member_epoch=2, state=1, partitions_pending_revocation=[],
          assigned_partitions=[T(topic_id=uuid.UUID(int=9), partitions=[0, 5, 70000])]),
        ConsumerGroupRegularExpressionValue(["x", "y"], 7, 123),
    ]
    for v in values:
        assert encode_struct(v, 0) == bytes(v.encode(version=0))
