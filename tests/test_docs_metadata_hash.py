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
    # the worked example: topic `t`, its id, its racks by partition, then the bytes in hex
    example = re.search(r"a topic `t` with id `([0-9a-f-]{36})` and three partitions, the first on\s+racks `b` "
                        r"and `a`, the second with no rack, the third on rack `c`, is hashed over these (\d+) bytes "
                        r"\(hex\):\s+((?:`[0-9a-f]+`\s*)+)\.", section)
    assert example, "the worked example of the topic layout is missing"
    topic_id, size, hex_fields = example.groups()
    data = topic_hash_input(uuid.UUID(topic_id), "t", [["b", "a"], [], ["c"]])
    assert bytes.fromhex("".join(re.findall(r"`([0-9a-f]+)`", hex_fields))) == data
    assert int(size) == len(data)
    # every field, as the table describes it: big-endian numbers, UTF-8 strings, racks sorted and joined by ";"
    assert data == (b"\x00" + (1).to_bytes(8, "big") + (2).to_bytes(8, "big") + b"t" + (3).to_bytes(8, "big")
                    + (0).to_bytes(4, "big") + b"a;b" + (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"c")
