import struct

import pytest

from tenure.protocol.errors import FrameTooLarge, MalformedRequest
from tenure.protocol.framing import FrameDecoder, frame

PAYLOADS = [b"a", b"", b"hello world", bytes(range(256)) * 10]
STREAM = b"".join(frame(p) for p in PAYLOADS)


def test_whole_stream_at_once():
    assert FrameDecoder().feed(STREAM) == PAYLOADS


def test_byte_by_byte():
    d = FrameDecoder()
    out = []
    for i in range(len(STREAM)):
        out += d.feed(STREAM[i:i + 1])
    assert out == PAYLOADS
    assert d.buffered == 0


def test_trailing_partial_frame_is_kept():
    d = FrameDecoder()
    assert d.feed(STREAM + frame(b"tail")[:5]) == PAYLOADS
    assert d.buffered == 1  # one payload byte of "tail" buffered, the length already consumed
    assert d.feed(b"ail") == [b"tail"]


def test_frame_above_limit_raises_before_buffering():
    d = FrameDecoder(max_frame_bytes=10)
    assert d.feed(frame(b"x" * 10)) == [b"x" * 10]
    with pytest.raises(FrameTooLarge) as exc:
        d.feed(struct.pack(">i", 11))
    assert exc.value.size == 11 and exc.value.limit == 10


def test_negative_length_is_malformed():
    with pytest.raises(MalformedRequest):
        FrameDecoder().feed(struct.pack(">i", -5))
