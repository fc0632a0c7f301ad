"""The read stage on the other group kinds' records: every KIP-848 consumer group record type (3-8, 16, tombstones)
and every KIP-932 share group record type (9-15) of `__consumer_offsets`, and the share coordinator's
ShareSnapshot/ShareUpdate records of `__share_group_state`, become record rows (no `unknown_type` error), each
column as docs/audit.md says - the records written with the project's own codecs, read with the executors'
reader (no Spark)."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.audit import listing, read
from tenure.protocol import consumer_group_records as cg
from tenure.protocol import records as rec
from tenure.protocol import share_group_records as sg
from tenure.protocol import share_state_records as ss
from tenure.protocol.internal_topics import SHARE_STATE_TOPIC
from tenure.storage.segments import LogConfig, SegmentLog

from .logs import T0, batch, open_log

TID = uuid.UUID("00000000-0000-0000-0000-00000000000a")
F = {n: i for i, n in enumerate(read.RECORD_FIELDS)}


def rows_of(data_dir: Path, topic: str = read.OFFSETS_TOPIC) -> tuple[list[dict], list[tuple]]:
    listings, _ = listing.list_partitions(str(data_dir), topic=topic)
    rows, errors = [], []
    for unit in listings[0].units():
        for kind, payload in read.read_unit(unit):
            if kind == "R":
                rows.append(dict(zip(read.RECORD_FIELDS, payload, strict=True)))
            elif kind == "E":
                errors.append(payload)
    return rows, errors


def test_consumer_and_share_group_records_are_rows(tmp_path):
    classic = cg.ClassicMemberMetadata(45000, (("range", b"sub"),))
    records = [
        cg.ConsumerGroupMetadataRecord("cg", 3, 77),
        cg.ConsumerMemberRecord("cg", "m1", "i1", None, "c1", "/10.0.0.1", ("t",), None, 300000, "uniform"),
        cg.ConsumerMemberRecord("cg", "m2", "i2", None, "c2", "/10.0.0.2", ("t",), None, 300000, None, classic),
        cg.TargetAssignmentMetadataRecord("cg", 3),
        cg.TargetAssignmentMemberRecord("cg", "m1", ((TID, (0, 1)),)),
        cg.CurrentAssignmentRecord("cg", "m1", 3, 2, 1, ((TID, (0,)),), ((TID, (1,)),)),
        cg.RegularExpressionRecord("cg", "^t.*", ("t", "tt"), 5, T0),
        cg.CurrentAssignmentRecord("cg", "m2", tombstone=True),
        cg.ConsumerMemberRecord("cg", "m2", tombstone=True),
        cg.RegularExpressionRecord("cg", "^t.*", tombstone=True),
        cg.ConsumerGroupMetadataRecord("cg", tombstone=True),
        sg.ShareGroupMetadataRecord("sg", 4),
        sg.ShareMemberRecord("sg", "s1", None, "sc", "/10.0.0.3", ("t",)),
        sg.ShareTargetMetadataRecord("sg", 4),
        sg.ShareTargetMemberRecord("sg", "s1", ((TID, (0,)),)),
        sg.ShareAssignmentRecord("sg", "s1", 4, 3, 0, ((TID, (0,)),)),
        sg.ShareMemberRecord("sg", "s1", tombstone=True),
    ]
    log = open_log(tmp_path)
    log.append(batch(records, T0))
    log.close()
    rows, errors = rows_of(tmp_path)
    assert errors == []
    got = [{k: v for k, v in r.items() if v is not None and k not in ("partition", "timestamp")} for r in rows]
    C, S = dict(protocol_type="consumer"), dict(protocol_type="share")

    def a(d):
        return json.dumps({str(TID): d[TID]} if d else {})
    assert got == [
        dict(offset=0, type="consumer_group_metadata", group="cg", tombstone=False, generation=3, **C),
        dict(offset=1, type="consumer_member", group="cg", tombstone=False, instance_id="i1", new_member_id="m1",
             client_id="c1", client_host="/10.0.0.1", protocol="consumer", **C,
             metadata=json.dumps({"topics": ["t"], "regex": None})),
        dict(offset=2, type="consumer_member", group="cg", tombstone=False, instance_id="i2", new_member_id="m2",
             client_id="c2", client_host="/10.0.0.2", protocol="classic", **C,
             metadata=json.dumps({"topics": ["t"], "regex": None})),
        dict(offset=3, type="consumer_target", group="cg", tombstone=False, generation=3, **C),
        dict(offset=4, type="consumer_target", group="cg", tombstone=False, new_member_id="m1", **C,
             metadata=a({TID: [0, 1]})),
        dict(offset=5, type="consumer_assignment", group="cg", tombstone=False, new_member_id="m1", generation=3,
             event_generation=2, **C, metadata=json.dumps({"state": 1, "assigned": {str(TID): [0]},
                                                           "pending_revocation": {str(TID): [1]}})),
        dict(offset=6, type="consumer_regex", group="cg", tombstone=False, generation=5, event_time=T0, **C,
             metadata=json.dumps({"regex": "^t.*", "topics": ["t", "tt"]})),
        dict(offset=7, type="consumer_assignment", group="cg", tombstone=True, new_member_id="m2", **C),
        dict(offset=8, type="consumer_member", group="cg", tombstone=True, new_member_id="m2", **C),
        dict(offset=9, type="consumer_regex", group="cg", tombstone=True, **C, metadata=json.dumps({"regex": "^t.*"})),
        dict(offset=10, type="consumer_group_metadata", group="cg", tombstone=True, **C),
        dict(offset=11, type="share_group_metadata", group="sg", tombstone=False, generation=4, **S),
        dict(offset=12, type="share_member", group="sg", tombstone=False, new_member_id="s1", client_id="sc",
             client_host="/10.0.0.3", **S, metadata=json.dumps({"topics": ["t"]})),
        dict(offset=13, type="share_target", group="sg", tombstone=False, generation=4, **S),
        dict(offset=14, type="share_target", group="sg", tombstone=False, new_member_id="s1", **S,
             metadata=a({TID: [0]})),
        dict(offset=15, type="share_assignment", group="sg", tombstone=False, new_member_id="s1", generation=4,
             event_generation=3, **S, metadata=json.dumps({"state": 0, "assigned": {str(TID): [0]},
                                                           "pending_revocation": {}})),
        dict(offset=16, type="share_member", group="sg", tombstone=True, new_member_id="s1", **S),
    ]
    assert all(r["timestamp"] == T0 for r in rows)


def test_ignored_record_types_are_rows_too(tmp_path):
    """The types a server reads and ignores (4: consumer partition metadata, 9 and 15: share partition and state
    partition metadata) are rows of their own, not errors: nothing read is dropped silently."""
    def ignored(kv: int) -> tuple[bytes, bytes | None]:
        key, _ = rec.encode(cg.ConsumerGroupMetadataRecord("g", 1, 1))
        return kv.to_bytes(2, "big") + key[2:], None
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2 ** 31 - 1)
    for i, kv in enumerate((4, 9, 15)):
        k, v = ignored(kv)
        b.append(i, timestamp=T0, key=k, value=v, headers=[])
    log = open_log(tmp_path)
    log.append(bytes(b.build()))
    log.close()
    rows, errors = rows_of(tmp_path)
    assert errors == []
    assert [(r["type"], r["group"], r["tombstone"]) for r in rows] == [
        ("consumer_partition_metadata", "g", True), ("share_ignored", "g", True), ("share_ignored", "g", True)]


def test_share_state_records_are_rows(tmp_path):
    log = SegmentLog(tmp_path / f"{SHARE_STATE_TOPIC}-0", LogConfig(segment_bytes=1 << 20))
    recs = [ss.ShareStateRecord("sg", TID, 0, True, 0, 1, 0, 0, ((0, 4, 0, 1), (5, 5, 4, 5))),
            ss.ShareStateRecord("sg", TID, 0, False, 0, 0, 0, -1, ((6, 6, 2, 2),)),
            ss.ShareStateRecord("sg", TID, 0, True, tombstone=True)]
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2 ** 31 - 1)
    for i, r in enumerate(recs):
        k, v = ss.encode(r)
        b.append(i, timestamp=T0 + i, key=k, value=v, headers=[])
    log.append(bytes(b.build()))
    log.close()
    rows, errors = rows_of(tmp_path, SHARE_STATE_TOPIC)
    assert errors == []
    got = [{k: v for k, v in r.items() if v is not None} for r in rows]
    assert got == [
        dict(partition=0, offset=0, timestamp=T0, type="share_state", group="sg", tombstone=False, topic=str(TID),
             topic_partition=0, protocol_type="snapshot", generation=0, committed_offset=0,
             metadata="[[0, 4, 0, 1], [5, 5, 4, 5]]"),
        dict(partition=0, offset=1, timestamp=T0 + 1, type="share_state", group="sg", tombstone=False,
             topic=str(TID), topic_partition=0, protocol_type="update", generation=0, committed_offset=-1,
             metadata="[[6, 6, 2, 2]]"),
        dict(partition=0, offset=2, timestamp=T0 + 2, type="share_state", group="sg", tombstone=True,
             topic=str(TID), topic_partition=0, protocol_type="snapshot"),
    ]


def test_the_type_4_subscription_metadata_kafka_4_0_writes_is_a_row_with_its_topics(tmp_path):
    log = open_log(tmp_path)
    log.append(batch([cg.ConsumerGroupPartitionMetadataRecord("g", ((TID, "t", 3),)),
                      cg.ConsumerGroupPartitionMetadataRecord("g", tombstone=True)], T0))
    log.close()
    rows, errors = rows_of(tmp_path)
    assert errors == []
    assert [(r["type"], r["group"], r["tombstone"], r["protocol_type"]) for r in rows] == [
        ("consumer_partition_metadata", "g", False, "consumer"), ("consumer_partition_metadata", "g", True, "consumer")]
    assert json.loads(rows[0]["metadata"]) == {"topics": [[str(TID), "t", 3]]} and rows[1]["metadata"] is None
