"""Segment files written by a real server are byte-compatible with independent RecordBatch readers.

One data dir is written by an in-process server with small segments (--segment-bytes 1024) and real
clients: confluent-kafka producing to `events` (2 partitions, idempotent, headers, binary values) and
to `zipped` (gzip batches), and a static member (group.instance.id inst-0, librdkafka) of group `sg`
committing several times, so `events` and `__consumer_offsets` both roll into several segment files.
Then every segment file is read by:

1. kafka-python's own record reader (`MemoryRecords` / `DefaultRecordBatch.validate_crc`), which knows
   nothing of tenure's storage code;
2. Java kafka-clients 4.3's `FileRecords` (tests/java/SegmentReader.java) - the class a Kafka broker's
   LogSegment and kafka-dump-log read segments with - checking each batch with `ensureValid()`.

Both must find valid CRCs, offsets contiguous from 0 across the files of a partition (nothing is
compacted), each file's first batch at the file's base offset, and exactly the keys, values and headers
that were produced / committed.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

from tenure.config import ServerConfig
from tenure.protocol import records as rec
from tenure.server import ServerThread
from tenure.storage import parse_batches
from tests.support.groups import GroupMember, group_view, wait_for
from tests.support.java import JavaError, run_java

pytestmark = pytest.mark.timeout(180)

OFFSETS = "__consumer_offsets"
PER_PARTITION = 40
COMMITS = 6


def produced_record(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """Record i of `events`: partition i % 2; binary values on every third record."""
    value = bytes([i % 256, 0, 255]) * (10 + i % 7) if i % 3 == 0 else f"value-{i}-".encode() * (3 + i % 5)
    return f"k{i}".encode(), value, [("seq", str(i).encode()), ("bin", bytes([i % 256, 0]))]


def zipped_record(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """Record i of `zipped`: record i of `events` with its value 8 times over. librdkafka sends a batch
    uncompressed when gzip does not make it smaller, and it may send the first record alone (seen under
    load): a lone short record would be such a batch, a lone long repetitive one is gzip too."""
    k, v, h = produced_record(i)
    return k, v * 8, h


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The data dir, and what was produced: {(topic, partition): [(offset, key, value, headers)]}."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    d = tmp_path_factory.mktemp("readers") / "data"
    produced: dict[tuple[str, int], list] = {}
    commits: list[int] = []
    with ServerThread(ServerConfig(port=0, data_dir=str(d), segment_bytes=1024,
                                   min_session_timeout_ms=500)) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        for f in admin.create_topics([NewTopic("events", 2, 1), NewTopic("zipped", 1, 1)]).values():
            f.result(15)
        acks = []
        for topic, conf in (("events", {"enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 5}),
                            ("zipped", {"compression.type": "gzip", "linger.ms": 20})):
            p = Producer({"bootstrap.servers": s.bootstrap, **conf})
            for i in range(2 * PER_PARTITION if topic == "events" else 15):
                k, v, h = (produced_record if topic == "events" else zipped_record)(i)
                p.produce(topic, key=k, value=v, headers=h, partition=i % 2 if topic == "events" else 0,
                          on_delivery=lambda err, msg: acks.append((err, msg)))
                if i % 10 == 9:
                    p.flush(15)               # several produce requests, so several batches
            assert p.flush(15) == 0
        assert all(err is None for err, _ in acks), [err for err, _ in acks if err]
        for _, msg in acks:                   # what was sent, at the offset the server acknowledged
            i = int(msg.key()[1:])
            k, v, h = (produced_record if msg.topic() == "events" else zipped_record)(i)
            assert (msg.key(), msg.value()) == (k, v)
            produced.setdefault((msg.topic(), msg.partition()), []).append((msg.offset(), k, v, h))
        m = GroupMember("confluent", s.bootstrap, "sg", "events", "inst-0", name="java-reader",
                        session_timeout_ms=1000).start()
        try:
            assert m.wait_assigned() == {0, 1}
            for n in range(1, COMMITS + 1):
                res = m.call(lambda c, n=n: c.commit(offsets=[TopicPartition("events", 0, n),
                                                              TopicPartition("events", 1, 2 * n)],
                                                     asynchronous=False))
                assert [tp.error for tp in res] == [None, None]
                commits.append(n)
        finally:
            m.stop()
        wait_for(lambda: group_view(s, "sg")["state"] == "Empty", 15, "the static member to expire")
    for v in produced.values():
        v.sort()
    return d, produced


def segment_files(d: Path, name: str) -> list[Path]:
    files = sorted((d / name).glob("*.log"))
    assert files and all(len(f.name) == 24 and f.stem.isdigit() for f in files), files
    return files


def python_read(files: list[Path]) -> list[dict]:
    """Every batch of the files through kafka-python's MemoryRecords, CRCs validated."""
    batches = []
    for f in files:
        raw = f.read_bytes()
        mr = MemoryRecords(raw)
        while mr.has_next():
            b = mr.next_batch()
            assert b.magic == 2 and b.validate_crc(), f"{f}: batch at offset {b.base_offset} fails its CRC"
            recs = [(r.offset, r.key, r.value, [(k, bytes(v)) for k, v in r.headers]) for r in b]
            assert len(recs) == b.records_count
            batches.append({"file": f, "base_offset": b.base_offset, "last_offset": b.last_offset,
                            "records": recs})
        assert mr.valid_bytes() == len(raw), f"{f}: bytes after the last whole batch"
    return batches


def check_offsets(files: list[Path], batches: list[dict]) -> None:
    """Offsets contiguous from 0 across the files; each file starts with a batch at its base offset."""
    offsets = [r[0] for b in batches for r in b["records"]]
    assert offsets == list(range(len(offsets)))
    for f in files:
        first = next(b for b in batches if b["file"] == f)
        assert first["base_offset"] == int(f.stem), f


def records_of(batches: list[dict]) -> list[tuple]:
    return [r for b in batches for r in b["records"]]


# ---------------------------------------------------------------------- 1. kafka-python
def test_kafka_python_reads_every_segment_file(data):
    d, produced = data
    assert len(segment_files(d, "events-0")) >= 3 and len(segment_files(d, "events-1")) >= 3
    assert len(segment_files(d, f"{OFFSETS}-0")) >= 2
    for topic, part in [("events", 0), ("events", 1), ("zipped", 0)]:
        files = segment_files(d, f"{topic}-{part}")
        batches = python_read(files)
        check_offsets(files, batches)
        assert records_of(batches) == produced[(topic, part)]
        assert len(batches) > 1
    zipped = [h for f in segment_files(d, "zipped-0") for h in parse_batches(f.read_bytes())]
    assert zipped and all(h.attributes & 0x07 == 1 for h in zipped)         # gzip batches
    events = [h for f in segment_files(d, "events-0") for h in parse_batches(f.read_bytes())]
    assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in events)  # idempotent batches
    # __consumer_offsets: every record decodes; the group's commits and its static member are there
    files = segment_files(d, f"{OFFSETS}-0")
    batches = python_read(files)
    check_offsets(files, batches)
    decoded = [rec.decode(k, v) for _, k, v, _ in records_of(batches)]
    commits = [(r.topic, r.partition, r.offset) for r in decoded if isinstance(r, rec.OffsetCommitRecord)]
    assert commits == [("events", p, n * (p + 1)) for n in range(1, COMMITS + 1) for p in (0, 1)]
    metas = [r for r in decoded if isinstance(r, rec.GroupMetadataRecord)]
    assert [m.members[0].group_instance_id for m in metas if m.members] == ["inst-0"]
    assert metas[-1].members == () and all(r.group_id == "sg" for r in decoded)


def test_the_files_are_what_tenures_own_parser_reads(data):
    """The two views agree batch for batch (positions, offsets), so neither reader skipped anything."""
    d, _ = data
    for name in ("events-0", f"{OFFSETS}-0"):
        files = segment_files(d, name)
        ours = [(f, h.base_offset, h.last_offset) for f in files for h in parse_batches(f.read_bytes())]
        theirs = [(b["file"], b["base_offset"], b["last_offset"]) for b in python_read(files)]
        assert ours == theirs


# ---------------------------------------------------------------------- 2. Java FileRecords
def java_read(files: list[Path]) -> list[dict]:
    out = run_java("SegmentReader", *files)
    batch_lines = [o for o in out if o["type"] == "batch"]
    assert out[-1] == {"type": "done", "files": len(files), "batches": len(batch_lines),
                       "records": sum(len(o["records"]) for o in batch_lines)}
    assert [o["bytes"] for o in out if o["type"] == "file"] == [f.stat().st_size for f in files]
    batches = []
    for o in out:
        if o["type"] != "batch":
            continue
        assert o["magic"] == 2 and o["control"] is False
        assert o["count"] == len(o["records"])
        batches.append({"file": Path(o["file"]), "base_offset": o["base_offset"], "last_offset": o["last_offset"],
                        "position": o["position"], "crc": o["crc"],
                        "records": [(r["offset"], _unhex(r["key"]), _unhex(r["value"]),
                                     [(h["key"], _unhex(h["value"])) for h in r["headers"]])
                                    for r in o["records"]]})
    return batches


def _unhex(s: str | None) -> bytes | None:
    return None if s is None else bytes.fromhex(s)


@pytest.mark.java
def test_java_file_records_reads_a_rolled_user_topic(data):
    d, produced = data
    for part in (0, 1):
        files = segment_files(d, f"events-{part}")
        assert len(files) >= 3
        batches = java_read(files)
        check_offsets(files, batches)
        assert records_of(batches) == produced[("events", part)]
        ours = [(f, h.position, h.base_offset, h.last_offset, h.crc)
                for f in files for h in parse_batches(f.read_bytes())]
        assert [(b["file"], b["position"], b["base_offset"], b["last_offset"], b["crc"]) for b in batches] == ours


@pytest.mark.java
def test_java_file_records_reads_gzip_batches(data):
    d, produced = data
    files = segment_files(d, "zipped-0")
    batches = java_read(files)
    check_offsets(files, batches)
    assert records_of(batches) == produced[("zipped", 0)]
    assert records_of(python_read(files)) == produced[("zipped", 0)]


@pytest.mark.java
def test_java_file_records_reads_consumer_offsets_of_a_static_group(data):
    d, _ = data
    files = segment_files(d, f"{OFFSETS}-0")
    assert len(files) >= 2
    batches = java_read(files)
    check_offsets(files, batches)
    got = records_of(batches)
    assert got == records_of(python_read(files))
    decoded = [rec.decode(k, v) for _, k, v, _ in got]
    # the keys are Kafka's own __consumer_offsets keys: group metadata (v2) and offset commits (v1)
    gm_key = rec.encode(rec.GroupMetadataRecord("sg"))[0]
    commit_keys = {rec.encode(rec.OffsetCommitRecord("sg", "events", p))[0] for p in (0, 1)}
    keys = [k for _, k, _, _ in got]
    assert gm_key in keys and commit_keys <= set(keys)
    assert sum(isinstance(r, rec.OffsetCommitRecord) for r in decoded) == 2 * COMMITS
    stable = [r for r in decoded if isinstance(r, rec.GroupMetadataRecord) and r.members]
    assert [(m.group_instance_id, m.client_id) for r in stable for m in r.members] == [("inst-0", "java-reader")]


@pytest.mark.java
def test_java_ensure_valid_rejects_a_flipped_byte(data, tmp_path):
    """The negative control: the Java reader really checks (a flipped byte fails ensureValid)."""
    d, _ = data
    src = segment_files(d, "events-0")[0]
    bad = tmp_path / src.name
    shutil.copyfile(src, bad)
    raw = bytearray(bad.read_bytes())
    h = parse_batches(bytes(raw))[0]
    raw[h.position + h.size - 2] ^= 0x01
    bad.write_bytes(bytes(raw))
    with pytest.raises(JavaError) as exc:
        run_java("SegmentReader", bad)
    err = exc.value.lines[-1]
    assert err["type"] == "error" and err["exception"].endswith("CorruptRecordException"), err
    assert "CRC" in err["message"] or "crc" in err["message"].lower()
    assert os.path.getsize(bad) == len(raw)      # read-only: the file is left as it was


# ---------------------------------------------------------------------- and tenure's own tools agree
def test_tenure_log_verify_and_dump_on_the_rolled_dir(data, capsys):
    from tenure.tools.cli import main

    d, produced = data
    assert main(["log", "verify", str(d)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].endswith(": clean")
    assert out[1].startswith(f"events-0: {len(segment_files(d, 'events-0'))} segment(s), ")
    for topic, part in [("events", 0), ("events", 1), ("zipped", 0)]:
        assert main(["log", "dump", str(d), "--topic", topic, "--json"]) == 0
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        got = [(o["offset"], o["key"], o["value"], o["headers"]) for o in lines if o["partition"] == part]
        want = [(o, k.decode(), _shown(v), [{"key": hk, "value": _shown(hv)} for hk, hv in h])
                for o, k, v, h in produced[(topic, part)]]
        assert got == want


def _shown(b: bytes):
    """How `tenure log dump --json` shows bytes: printable UTF-8 as a string, else {"hex": ...}."""
    try:
        s = b.decode()
    except UnicodeDecodeError:
        return {"hex": b.hex()}
    return s if s.isprintable() else {"hex": b.hex()}
