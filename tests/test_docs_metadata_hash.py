"""The metadata-hash section of docs/consumer-groups.md: its test vectors are what the code computes, and the
byte layout it describes is the one the code hashes."""
import json
import re
import uuid
from pathlib import Path

from tenure.coordinator.consumer.hash import group_hash, topic_hash, topic_hash_input

DOC = Path(__file__).resolve().parents[1] / "docs" / "consumer-groups.md"
ROW = re.compile(r"^\| (\w+) \| `(.+?)` \| (-?\d+) \|$", re.M)


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## The metadata hash (KIP-1101)")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _topic_rows():
    section = _section()
    ids = dict(re.findall(r"`(\w+)` is `([0-9a-f-]{36})`", section))
    return [(uuid.UUID(ids[name]), name, json.loads(racks), int(value))
            for name, racks, value in ROW.findall(section)]


def _group_rows():
    rows = re.findall(r"^\| `(\{.*?\})` \| (-?\d+) \|$", _section(), re.M)
    return [(json.loads(cell), int(value)) for cell, value in rows]


def test_the_topic_vectors_in_the_doc_are_what_the_code_computes():
    rows = _topic_rows()
    assert len(rows) >= 8
    for topic_id, name, racks, expected in rows:
        assert topic_hash(topic_id, name, racks) == expected, (name, racks)


def test_the_group_vectors_in_the_doc_are_what_the_code_computes():
    rows = _group_rows()
    assert len(rows) == 4 and rows[0] == ({}, 0)
    for hashes, expected in rows:
        assert group_hash(hashes) == expected, hashes


def test_the_doc_names_the_layout_the_code_hashes():
    section = _section()
    assert "mmh3.hash64(data, seed=0, x64arch=True, signed=True)[0]" in section
    # a topic "ab" with one partition on rack "r": every field of the table, in order
    data = topic_hash_input(uuid.UUID(int=0), "ab", [["r"]])
    assert data == (b"\x00" + bytes(16) + "ab".encode("utf-16-le") + (2).to_bytes(4, "little")
                    + (1).to_bytes(4, "little") + (0).to_bytes(4, "little")
                    + (1).to_bytes(4, "little") + "r".encode("utf-16-le") + (1).to_bytes(4, "little"))
