"""`tenure log dump` and `tenure log verify` on data dirs written by a real in-process server.

The scripted history (`write_history`): a user topic `orders` with three records produced by
confluent-kafka (explicit timestamps, headers, one binary value); a static member (group.instance.id
inst-1, librdkafka) of group g1 that commits offset 3 with metadata; a simple (member-less) commit of
group g2; the static member's session expiring; DeleteGroups of g1 through the AdminClient. Values the
run cannot fix in advance (member id, server timestamps, the client's subscription bytes) are read from
the segment file with kafka-python's reader and the record codec; everything else in the expected
output is literal.

confluent-kafka 2.16.1's Python binding sends a commit's metadata string with its C terminator (the
metadata "after k2" arrives as "after k2\\0"); the server stores what it was sent, and the dump shows it
(escaped), so the expectations below carry that NUL.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from tenure.config import ServerConfig
from tenure.protocol import records as rec
from tenure.server import ServerThread
from tenure.storage import parse_batches
from tenure.storage.segments import LogConfig, SegmentLog, segment_name
from tenure.tools.cli import main
from tests.support.groups import GroupMember, group_view, wait_for
from tests.support.wire import build_batch

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_000_000
OFFSETS = "__consumer_offsets"
PRODUCED = [(b"k0", b"v0", [("h1", b"x0"), ("h2", b"\x00\x01")]),
            (b"k1", b"v1", [("h1", b"x1"), ("h2", b"\x00\x01")]),
            (b"k2", b"\x00\xff", [])]


def write_history(data_dir) -> tuple[int, int]:
    """Run the scripted history against a real server on `data_dir`; returns the wall-clock bounds."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    before = int(time.time() * 1000)
    with ServerThread(ServerConfig(port=0, data_dir=str(data_dir), min_session_timeout_ms=500)) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(15)
        p = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 50})
        for i, (k, v, h) in enumerate(PRODUCED):
            p.produce("orders", key=k, value=v, headers=h, partition=0, timestamp=T0 + i)
        assert p.flush(15) == 0
        m = GroupMember("confluent", s.bootstrap, "g1", "orders", "inst-1", name="c1",
                        session_timeout_ms=1000).start()
        try:
            assert m.wait_assigned() == {0}
            res = m.call(lambda c: c.commit(offsets=[TopicPartition("orders", 0, 3, metadata="after k2")],
                                            asynchronous=False))
            assert [tp.error for tp in res] == [None]
            simple = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "g2", "client.id": "c2",
                               "enable.auto.commit": False})
            try:
                res = simple.commit(offsets=[TopicPartition("orders", 0, 1, metadata="simple")],
                                    asynchronous=False)
                assert [tp.error for tp in res] == [None]
            finally:
                simple.close()
        finally:
            m.stop()                      # a static member sends no LeaveGroup: its session expires
        wait_for(lambda: group_view(s, "g1")["state"] == "Empty", 15, "g1's static member to expire")
        assert admin.delete_consumer_groups(["g1"])["g1"].result(15) is None
    return before, int(time.time() * 1000)


def read_offsets_log(data_dir) -> list[tuple[int, int, object]]:
    """(offset, timestamp, decoded record) of __consumer_offsets-0, read independently of logtool."""
    raw = (Path(data_dir) / f"{OFFSETS}-0" / segment_name(0)).read_bytes()
    out = []
    for h in parse_batches(raw):
        for r in DefaultRecordBatch(raw[h.position:h.position + h.size]):
            out.append((r.offset, r.timestamp, rec.decode(r.key, r.value)))
    return out


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    d = tmp_path_factory.mktemp("history") / "data"
    bounds = write_history(d)
    return d, bounds, read_offsets_log(d)


@pytest.fixture
def copy(history, tmp_path):
    """A private copy of the history's data dir, to damage."""
    d = tmp_path / "data"
    shutil.copytree(history[0], d)
    return d


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["log", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------- expected output
def expected_text(log) -> list[str]:
    """The dump's text lines for the scripted history, with the run's volatile values filled in."""
    (o0, t0, joined), (o1, t1, gm1), (o2, t2, c1), (o3, t3, c2), (o4, t4, expired), (o5, t5, gm2), \
        (o6, t6, _), (o7, t7, _), (o8, t8, _) = log
    mid = joined.new_member_id
    member = gm1.members[0]
    c = "__consumer_offsets-0"
    return [
        f'{c} offset=0 timestamp={t0} static_member_event key={{group_id="g1" group_instance_id="inst-1"}} '
        f'value={{cause="joined" old_member_id=null new_member_id="{mid}" generation=0 '
        f'timestamp={joined.timestamp} client_id="c1" client_host="/127.0.0.1"}}',
        f'{c} offset=1 timestamp={t1} group_metadata key={{group_id="g1"}} value={{protocol_type="consumer" '
        f'generation=1 protocol="range" leader="{mid}" current_state_timestamp={gm1.current_state_timestamp} '
        f'members=[{{member_id="{mid}" group_instance_id="inst-1" client_id="c1" client_host="/127.0.0.1" '
        f'rebalance_timeout_ms=20000 session_timeout_ms=1000 subscription=0x{member.subscription.hex()} '
        f'assignment=0x{member.assignment.hex()}}}]}}',
        f'{c} offset=2 timestamp={t2} offset_commit key={{group_id="g1" topic="orders" partition=0}} '
        f'value={{offset=3 leader_epoch=-1 metadata="after k2\\u0000" commit_timestamp={c1.commit_timestamp}}}',
        f'{c} offset=3 timestamp={t3} offset_commit key={{group_id="g2" topic="orders" partition=0}} '
        f'value={{offset=1 leader_epoch=-1 metadata="simple\\u0000" commit_timestamp={c2.commit_timestamp}}}',
        f'{c} offset=4 timestamp={t4} static_member_event key={{group_id="g1" group_instance_id="inst-1"}} '
        f'value={{cause="expired" old_member_id="{mid}" new_member_id=null generation=1 '
        f'timestamp={expired.timestamp} client_id="c1" client_host="/127.0.0.1"}}',
        f'{c} offset=5 timestamp={t5} group_metadata key={{group_id="g1"}} value={{protocol_type="consumer" '
        f'generation=2 protocol=null leader=null current_state_timestamp={gm2.current_state_timestamp} '
        f'members=[]}}',
        f'{c} offset=6 timestamp={t6} offset_commit key={{group_id="g1" topic="orders" partition=0}} tombstone',
        f'{c} offset=7 timestamp={t7} static_member_event key={{group_id="g1" group_instance_id="inst-1"}} '
        f'tombstone',
        f'{c} offset=8 timestamp={t8} group_metadata key={{group_id="g1"}} tombstone',
    ] + ORDERS_TEXT


ORDERS_TEXT = [
    f'orders-0 offset=0 timestamp={T0} key="k0" value="v0" headers={{h1="x0" h2=0x0001}}',
    f'orders-0 offset=1 timestamp={T0 + 1} key="k1" value="v1" headers={{h1="x1" h2=0x0001}}',
    f'orders-0 offset=2 timestamp={T0 + 2} key="k2" value=0x00ff',
]


def expected_json(log) -> list[dict]:
    (_, t0, joined), (_, t1, gm1), (_, t2, c1), (_, t3, c2), (_, t4, expired), (_, t5, gm2), \
        (_, t6, _), (_, t7, _), (_, t8, _) = log
    mid = joined.new_member_id
    member = gm1.members[0]

    def co(offset, ts, kind, kv, vv, key, value):
        return {"topic": OFFSETS, "partition": 0, "offset": offset, "timestamp": ts, "type": kind,
                "key_version": kv, "value_version": vv, "key": key, "value": value, "tombstone": value is None}

    static_key = {"group_id": "g1", "group_instance_id": "inst-1"}
    commit_key = {"group_id": "g1", "topic": "orders", "partition": 0}
    event = {"old_member_id": None, "new_member_id": None, "client_id": "c1", "client_host": "/127.0.0.1"}
    return [
        co(0, t0, "static_member_event", 345, 0, static_key,
           {**event, "cause": "joined", "new_member_id": mid, "generation": 0, "timestamp": joined.timestamp}),
        co(1, t1, "group_metadata", 2, 3, {"group_id": "g1"},
           {"protocol_type": "consumer", "generation": 1, "protocol": "range", "leader": mid,
            "current_state_timestamp": gm1.current_state_timestamp,
            "members": [{"member_id": mid, "group_instance_id": "inst-1", "client_id": "c1",
                         "client_host": "/127.0.0.1", "rebalance_timeout_ms": 20000, "session_timeout_ms": 1000,
                         "subscription": {"hex": member.subscription.hex()},
                         "assignment": {"hex": member.assignment.hex()}}]}),
        co(2, t2, "offset_commit", 1, 3, commit_key,
           {"offset": 3, "leader_epoch": -1, "metadata": "after k2\0", "commit_timestamp": c1.commit_timestamp}),
        co(3, t3, "offset_commit", 1, 3, {**commit_key, "group_id": "g2"},
           {"offset": 1, "leader_epoch": -1, "metadata": "simple\0", "commit_timestamp": c2.commit_timestamp}),
        co(4, t4, "static_member_event", 345, 0, static_key,
           {**event, "cause": "expired", "old_member_id": mid, "generation": 1, "timestamp": expired.timestamp}),
        co(5, t5, "group_metadata", 2, 3, {"group_id": "g1"},
           {"protocol_type": "consumer", "generation": 2, "protocol": None, "leader": None,
            "current_state_timestamp": gm2.current_state_timestamp, "members": []}),
        co(6, t6, "offset_commit", 1, None, commit_key, None),
        co(7, t7, "static_member_event", 345, None, static_key, None),
        co(8, t8, "group_metadata", 2, None, {"group_id": "g1"}, None),
    ] + ORDERS_JSON


def _record(offset, key, value, headers):
    return {"topic": "orders", "partition": 0, "offset": offset, "timestamp": T0 + offset, "type": "record",
            "key": key, "value": value, "headers": [{"key": k, "value": v} for k, v in headers]}


ORDERS_JSON = [
    _record(0, "k0", "v0", [("h1", "x0"), ("h2", {"hex": "0001"})]),
    _record(1, "k1", "v1", [("h1", "x1"), ("h2", {"hex": "0001"})]),
    _record(2, "k2", {"hex": "00ff"}, []),
]


# ---------------------------------------------------------------------- dump
def test_history_volatile_values_are_sane(history):
    """The values the expectations take from the run are what they should be."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    _, (before, after), log = history
    assert [o for o, _, _ in log] == list(range(9))
    assert all(before <= ts <= after for _, ts, _ in log)
    joined, gm1 = log[0][2], log[1][2]
    assert joined.new_member_id.startswith("inst-1-") and gm1.leader == joined.new_member_id
    member = gm1.members[0]
    assert list(ConsumerProtocolSubscription.decode(member.subscription).topics) == ["orders"]
    assignment = ConsumerProtocolAssignment.decode(member.assignment)
    assert [(t.topic, list(t.partitions)) for t in assignment.assigned_partitions] == [("orders", [0])]


def test_dump_text_prints_every_record_decoded(history, capsys):
    d, _, log = history
    code, out, err = run(capsys, "dump", d)
    assert (code, err) == (0, "")
    assert out.splitlines() == expected_text(log)


def test_dump_json_is_one_object_per_line(history, capsys):
    d, _, log = history
    code, out, err = run(capsys, "dump", d, "--json")
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == expected_json(log)


def test_dump_group_filter(history, capsys):
    d, _, log = history
    text = expected_text(log)
    code, out, _ = run(capsys, "dump", d, "--group", "g2")
    assert code == 0 and out.splitlines() == [text[3]]
    code, out, _ = run(capsys, "dump", d, "--group", "g1", "--topic", OFFSETS)
    assert code == 0 and out.splitlines() == text[:3] + text[4:9]
    code, out, _ = run(capsys, "dump", d, "--group", "g1", "--json")
    assert code == 0 and [json.loads(x) for x in out.splitlines()] == [
        o for o in expected_json(log) if o["topic"] == OFFSETS and o["key"]["group_id"] == "g1"]
    code, out, _ = run(capsys, "dump", d, "--group", "nobody")
    assert (code, out) == (0, "")


def test_dump_topic_filter(history, capsys):
    d, _, log = history
    code, out, _ = run(capsys, "dump", d, "--topic", "orders")
    assert code == 0 and out.splitlines() == ORDERS_TEXT
    code, out, _ = run(capsys, "dump", d, "--topic", OFFSETS)
    assert code == 0 and out.splitlines() == expected_text(log)[:9]


def test_dump_usage_errors_exit_2(history, tmp_path, capsys):
    d = history[0]
    code, out, err = run(capsys, "dump", d, "--topic", "nope")
    assert (code, out) == (2, "") and "no partition of topic 'nope'" in err
    code, _, err = run(capsys, "dump", d, "--topic", "orders", "--group", "g1")
    assert code == 2 and "--group" in err
    code, _, err = run(capsys, "dump", tmp_path / "missing")
    assert code == 2 and "no such directory" in err


def test_dump_prints_unknown_record_types_with_a_note(copy, capsys):
    # key version 20: no record type (3-8 are KIP-848's consumer group records, which tenure reads)
    plog = SegmentLog(copy / f"{OFFSETS}-0")
    plog.append(build_batch([(b"\x00\x14\x00\x02g1", b"\x00\x00\x01"), (b"\x00\x14", None)], base_timestamp=5))
    plog.close()
    code, out, err = run(capsys, "dump", copy, "--topic", OFFSETS)
    assert (code, err) == (0, "")
    note = "(a record type this tenure does not know; a server skips it when loading)"
    assert out.splitlines()[-2:] == [
        f"{OFFSETS}-0 offset=9 timestamp=5 unknown key_version=20 key=0x001400026731 value=0x000001 {note}",
        f"{OFFSETS}-0 offset=10 timestamp=6 unknown key_version=20 key=0x0014 value=null {note}",
    ]
    code, out, _ = run(capsys, "dump", copy, "--json", "--topic", OFFSETS)
    assert json.loads(out.splitlines()[-1]) == {
        "topic": OFFSETS, "partition": 0, "offset": 10, "timestamp": 6, "type": "unknown", "key_version": 20,
        "key": {"hex": "0014"}, "value": None, "note": note[1:-1]}
    code, out, _ = run(capsys, "dump", copy, "--group", "g1")   # a group filter cannot place them
    assert code == 0 and "unknown" not in out


def test_dump_group_filter_leaves_out_coordinator_moves(copy, capsys):
    """A coordinator move (CoordinatorLoad record) names no group: --group leaves it out, as every record of
    another group."""
    plog = SegmentLog(copy / f"{OFFSETS}-0")
    plog.append(build_batch([rec.encode(rec.CoordinatorLoadRecord(0, 1, 0, "moved", 2, 5))], base_timestamp=5))
    plog.close()
    code, out, err = run(capsys, "dump", copy, "--topic", OFFSETS)
    assert (code, err) == (0, "") and "coordinator_load key={offsets_partition=0}" in out.splitlines()[-1]
    code, out, err = run(capsys, "dump", copy, "--group", "g2")
    assert (code, err) == (0, "") and "coordinator_load" not in out and "g2" in out


def test_dump_reports_a_damaged_batch_and_goes_on(copy, capsys, history):
    seg = copy / f"{OFFSETS}-0" / segment_name(0)
    raw = bytearray(seg.read_bytes())
    hs = parse_batches(bytes(raw))
    target = hs[2]                             # offset 2, with sound batches after it
    raw[target.position + target.size // 2] ^= 0x10
    seg.write_bytes(bytes(raw))
    code, out, err = run(capsys, "dump", copy)
    lines = out.splitlines()
    assert code == 1
    assert lines[:2] == expected_text(history[2])[:2]
    assert lines[2].startswith(f"ERROR {seg} at byte {target.position} (offset 2): CRC-32C ")
    assert lines[2].endswith("; the rest of this segment is skipped")
    assert lines[3:] == ORDERS_TEXT            # the dump went on with the next partition
    assert "1 batch(es) or record(s) could not be read" in err
    code, out, _ = run(capsys, "dump", copy, "--json", "--topic", OFFSETS)
    err_obj = json.loads(out.splitlines()[2])
    assert code == 1 and {k: err_obj[k] for k in ("type", "topic", "partition", "file", "position", "offset")} == {
        "type": "error", "topic": OFFSETS, "partition": 0, "file": str(seg), "position": target.position,
        "offset": 2}


def test_dump_goes_on_with_the_next_segment_after_damage(tmp_path, capsys):
    plog = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for i in range(6):
        plog.append(build_batch([(f"k{i}".encode(), b"v" * 40)], base_timestamp=100 + i))
    plog.close()
    segs = sorted((tmp_path / "t-0").iterdir())
    assert len(segs) >= 3
    first = bytearray(segs[0].read_bytes())
    first[-2] ^= 0x01                          # the last batch of the first segment
    segs[0].write_bytes(bytes(first))
    last_pos = parse_batches(bytes(first), verify_crc=False)[-1].position
    code, out, _ = run(capsys, "dump", tmp_path)
    lines = out.splitlines()
    assert code == 1
    bad = next(i for i, line in enumerate(lines) if line.startswith("ERROR"))
    assert lines[bad].startswith(f"ERROR {segs[0]} at byte {last_pos} (offset {bad}): CRC-32C")
    assert [int(x.split()[1].split("=")[1]) for x in lines[bad + 1:]] == list(range(bad + 1, 6))


# ---------------------------------------------------------------------- verify
def _sizes(d) -> dict[str, tuple[int, int, int]]:
    """partition -> (batches, records, bytes), counted with parse_batches."""
    out = {}
    for name in (OFFSETS + "-0", "orders-0"):
        raw = (Path(d) / name / segment_name(0)).read_bytes()
        hs = parse_batches(raw)
        out[name] = (len(hs), sum(h.records_count for h in hs), len(raw))
    return out


def test_verify_clean_dir_prints_the_summary_and_exits_0(history, capsys):
    d = history[0]
    s = _sizes(d)
    (ob, orc, oby), (ub, urc, uby) = s[OFFSETS + "-0"], s["orders-0"]
    code, out, err = run(capsys, "verify", d)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"{OFFSETS}-0: 1 segment(s), {ob} batch(es), 9 record(s), {oby} byte(s), offsets 0..8",
        f"orders-0: 1 segment(s), {ub} batch(es), 3 record(s), {uby} byte(s), offsets 0..2",
        f"{d}: 2 partition(s), 2 segment(s), {ob + ub} batch(es), 12 record(s), {oby + uby} byte(s): clean",
    ]
    assert (orc, urc) == (9, 3)


def test_verify_finds_a_flipped_byte_in_the_middle(copy, capsys):
    seg = copy / f"{OFFSETS}-0" / segment_name(0)
    raw = bytearray(seg.read_bytes())
    hs = parse_batches(bytes(raw))
    target = hs[len(hs) // 2]
    raw[target.position + target.size // 2] ^= 0x01
    seg.write_bytes(bytes(raw))
    code, out, err = run(capsys, "verify", copy)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"{OFFSETS}-0: 1 segment(s), {len(hs) - 1} batch(es), ")
    assert lines[1].startswith(f"  PROBLEM {seg} at byte {target.position} (offset {target.base_offset}): "
                               f"CRC-32C ")
    assert lines[1].endswith(f"; a sound batch follows at byte {target.position + target.size}")
    assert lines[2] == (f"  at open a server refuses to start: corrupt log: {seg} at byte {target.position} "
                        f"(offset {target.base_offset}): " + lines[1].split("): ", 1)[1].split(";")[0])
    assert lines[3].startswith("orders-0: ")
    assert lines[4].endswith(": 1 problem(s)")
    assert len(lines) == 5


def test_verify_finds_a_torn_tail(copy, capsys):
    seg = copy / "orders-0" / segment_name(0)
    size = seg.stat().st_size
    os.truncate(seg, size - 7)
    code, out, _ = run(capsys, "verify", copy)
    assert code == 1
    lines = out.splitlines()
    assert lines[1] == f"orders-0: 1 segment(s), 0 batch(es), 0 record(s), {size - 7} byte(s), no batches"
    assert lines[2] == (f"  PROBLEM {seg} at byte 0: torn batch: declares {size} bytes, {size - 7} present; "
                        f"no sound batch found after it: the last {size - 7} byte(s) of the newest segment "
                        f"cannot be read")
    assert lines[3] == f"  at open a server cuts {size - 7} byte(s) off {seg} at byte 0 and serves on from " \
        "offset 0"
    assert lines[-1].endswith(": 1 problem(s)")
    assert len(lines) == 5


def test_verify_usage_errors_exit_2(tmp_path, capsys):
    code, out, err = run(capsys, "verify", tmp_path / "missing")
    assert (code, out) == (2, "") and "no such directory" in err
    code, out, err = run(capsys, "verify", tmp_path)
    assert (code, out) == (2, "") and "not a tenure data dir" in err


def test_verify_checks_offsets_across_batches_and_segments(tmp_path, capsys):
    plog = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for i in range(6):
        plog.append(build_batch([(f"k{i}".encode(), b"v" * 40)]))
    plog.close()
    segs = sorted((tmp_path / "t-0").iterdir())
    bases = [int(p.stem) for p in segs]
    assert len(segs) >= 3 and bases[0] == 0
    # the second segment renamed below the first one's end: overlap
    overlapping = segs[1].with_name(segment_name(bases[1] - 1))
    segs[1].rename(overlapping)
    # the third segment's name above its first batch's offset
    above = segs[2].with_name(segment_name(bases[2] + 1))
    segs[2].rename(above)
    code, out, _ = run(capsys, "verify", tmp_path)
    assert code == 1
    lines = out.splitlines()
    assert lines[-2] == (f"  at open a server refuses to start: {overlapping} has base offset {bases[1] - 1}, "
                         f"which overlaps the previous segment (it ends at offset {bases[1] - 1})")
    problems = [line.strip() for line in lines if line.startswith("  PROBLEM")]
    assert problems == [
        f"PROBLEM {overlapping}: segment base offset {bases[1] - 1} overlaps the previous segment, which ends "
        f"at offset {bases[1] - 1}",
        f"PROBLEM {above} at byte 0 (offset {bases[2]}): the segment's first batch starts at offset {bases[2]}, "
        f"below the segment's base offset {bases[2] + 1}",
    ]


def five_batches(tmp_path):
    """A partition t-0 of five one-record batches: (its segment file, the file's bytes, the batch headers)."""
    plog = SegmentLog(tmp_path / "t-0")
    for i in range(5):
        plog.append(build_batch([(f"k{i}".encode(), b"v" * 20)]))
    plog.close()
    seg = tmp_path / "t-0" / segment_name(0)
    raw = bytearray(seg.read_bytes())
    return seg, raw, parse_batches(bytes(raw))


def test_verify_goes_past_damage_inside_one_batch_and_notes_strays(tmp_path, capsys):
    seg, raw, hs = five_batches(tmp_path)
    for h in (hs[1], hs[3]):
        raw[h.position + h.size - 3] ^= 0x01
    seg.write_bytes(bytes(raw))
    (tmp_path / "t-0" / (segment_name(0) + ".cleaned")).write_bytes(b"")
    code, out, _ = run(capsys, "verify", tmp_path)
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == f"note: {tmp_path / 'topics.json'} is missing: a server starting here opens only {OFFSETS}"
    assert lines[1] == f"t-0: 1 segment(s), 3 batch(es), 3 record(s), {len(raw)} byte(s), offsets 0..4"
    assert lines[2].startswith(f"  PROBLEM {seg} at byte {hs[1].position} (offset 1): CRC-32C")
    assert lines[2].endswith(f"; a sound batch follows at byte {hs[2].position}")
    assert lines[3].startswith(f"  PROBLEM {seg} at byte {hs[3].position} (offset 3): CRC-32C")
    assert lines[3].endswith(f"; a sound batch follows at byte {hs[4].position}")
    assert lines[4].startswith(f"  at open a server refuses to start: corrupt log: {seg} at byte {hs[1].position} "
                               "(offset 1): CRC-32C")
    assert lines[5] == (f"  note: {seg}.cleaned: a cleaned segment from a compaction interrupted before its "
                        f"commit point (a server deletes it at open; the originals stand)")
    assert lines[6] == (f"{tmp_path}: 1 partition(s), 1 segment(s), 3 batch(es), 3 record(s), {len(raw)} byte(s): "
                        f"2 problem(s)")
    assert len(lines) == 7


def test_verify_and_dump_are_safe_on_a_live_servers_dir(tmp_path, capsys):
    from confluent_kafka import Producer

    d = tmp_path / "data"
    with ServerThread(ServerConfig(port=0, data_dir=str(d))) as s:
        p = Producer({"bootstrap.servers": s.bootstrap})
        for i in range(5):
            p.produce("live", key=f"k{i}".encode(), value=b"v", partition=0, timestamp=T0)
        assert p.flush(15) == 0
        code, out, _ = run(capsys, "verify", d)
        assert code == 0 and out.splitlines()[-1].endswith(": clean")
        code, out, _ = run(capsys, "dump", d, "--topic", "live")
        assert code == 0 and len(out.splitlines()) == 5
        p.produce("live", key=b"k5", value=b"v", partition=0, timestamp=T0)   # the server still serves
        assert p.flush(15) == 0
    code, out, _ = run(capsys, "dump", d, "--topic", "live")
    assert code == 0 and [line.split()[1] for line in out.splitlines()] == [f"offset={i}" for i in range(6)]


def test_verify_names_a_batch_whose_base_offset_does_not_continue_the_log(tmp_path, capsys):
    seg, raw, hs = five_batches(tmp_path)
    raw[hs[2].position + 7] ^= 0x08                # base offset 2 -> 10: outside the CRC's coverage
    seg.write_bytes(bytes(raw))
    code, out, _ = run(capsys, "verify", tmp_path)
    assert code == 1
    assert (f"  PROBLEM {seg} at byte {hs[2].position} (offset 10): base offset 10 does not continue the previous "
            f"batch's last offset 1: offsets 2..9 are missing") in out
    assert (f"  at open a server refuses to start: corrupt log: {seg} at byte {hs[2].position} (offset 2): base "
            f"offset 10 does not continue the previous batch (expected 2)\n") in out


def test_dump_consumer_group_records_text_and_json(tmp_path, capsys):
    """A KIP-848 group's records (types 3, 5-8) dump in both forms; topic ids are strings in JSON."""
    from tests.integration.test_consumer_protocol import Member, settled
    d = tmp_path / "data"
    with ServerThread(ServerConfig(port=0, data_dir=str(d), consumer_heartbeat_interval_ms=200)) as s:
        topic = s.call(lambda: s.server.topics.create("t", 2))
        m = Member(s.bootstrap, "cg", "t", "i1", "c1").start()
        try:
            settled(s, "cg", [m], 2)
        finally:
            m.stop()
    code, out, err = run(capsys, "dump", d, "--group", "cg", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["type"]: r["key_version"] for r in rows} == {
        "consumer_member": 5, "consumer_group_metadata": 3, "target_assignment_member": 7,
        "target_assignment_metadata": 6, "current_assignment": 8, "static_member_event": 345}
    target = next(r for r in rows if r["type"] == "target_assignment_member")
    assert target["value"]["partitions"] == [[str(topic.topic_id), [0, 1]]]
    code, out, err = run(capsys, "dump", d, "--group", "cg")
    assert code == 0 and f"assigned=[[{topic.topic_id}, [0, 1]]]" in out
