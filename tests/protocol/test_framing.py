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


def test_one_whole_frame_per_read_as_a_client_with_one_request_in_flight_sends_it():
    d = FrameDecoder(max_frame_bytes=3000)
    for p in PAYLOADS:
        out = d.feed(frame(p))
        assert out == [p] and type(out[0]) is bytes and d.buffered == 0
    assert d.feed(frame(b"ab")[:3]) == [] and d.feed(frame(b"ab")[3:] + frame(b"c")) == [b"ab", b"c"]
    assert d.feed(frame(b"x" * 3000)) == [b"x" * 3000]


def test_a_whole_frame_above_the_limit_or_of_negative_size_in_one_read_is_refused():
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_frame_bytes=10).feed(frame(b"x" * 11))
    with pytest.raises(MalformedRequest):
        FrameDecoder().feed(struct.pack(">i", -4) + b"abcd")


def test_any_chunking_of_many_frames_gives_the_same_frames_as_bytes_and_keeps_only_the_partial_one():
    """Frames are cut at an offset along each read (ten in one read are ten slices of it), and a read that ends
    inside a frame keeps only that frame's bytes, whether the read began on a frame's edge or not."""
    import random
    payloads = [bytes([i % 251]) * (i * 7 % 90) for i in range(200)]
    stream = b"".join(frame(p) for p in payloads)
    rng = random.Random(5)
    for _ in range(30):
        d, out, pos = FrameDecoder(max_frame_bytes=100), [], 0
        while pos < len(stream):
            step = rng.choice((1, 3, 4, 5, 60, 300, 2000))
            out += d.feed(stream[pos:pos + step])
            pos += step
            assert all(type(f) is bytes for f in out)
            rest = min(pos, len(stream)) - sum(4 + len(p) for p in payloads[:len(out)])
            assert d.buffered == (rest - 4 if rest >= 4 else rest)    # a whole size prefix is not counted
        assert out == payloads and d.buffered == 0
    d = FrameDecoder()
    ten = b"".join(frame(b"hb%d" % i) for i in range(10))
    assert d.feed(ten + frame(b"next")[:6]) == [b"hb%d" % i for i in range(10)] and d.buffered == 2
    assert d.feed(bytearray(frame(b"next")[6:]) + frame(b"x")) == [b"next", b"x"] and d.buffered == 0
    assert d.feed(bytearray(frame(b"y"))) == [b"y"]            # a read of another type: bytes out all the same
