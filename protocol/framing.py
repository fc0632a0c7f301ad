"""Length-prefixed framing (4-byte big-endian size, then the payload), sans-IO."""
from __future__ import annotations

import struct

from .errors import FrameTooLarge, MalformedRequest

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


class FrameDecoder:
    """Feed bytes in any chunking; get whole frame payloads out, in order.

    Raises `FrameTooLarge` as soon as a length prefix above the limit is seen (before buffering
    the payload) and `MalformedRequest` for a negative length.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()  # the bytes after the last whole frame: a partial frame, its size prefix first

    def feed(self, data: bytes) -> list[bytes]:
        """The whole frames `data` completes, in order. The frames are cut at an offset that moves along the
        bytes read (a frame of a read's own bytes is one slice of them); what is left is kept once per read."""
        buf = self._buf
        if not buf and type(data) is bytes and len(data) >= 4:
            # the common case, one whole request in one read: its payload at once
            (size,) = _SIZE.unpack_from(data, 0)
            if len(data) == 4 + size and size <= self.max_frame_bytes:
                return [data[4:]]
        if buf or type(data) is not bytes:
            buf += data
            src: bytes | bytearray = buf
        else:
            src = data
        end = len(src)
        pos = 0
        frames: list[bytes] = []
        limit = self.max_frame_bytes
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(src, pos)
            if size < 0:
                raise MalformedRequest(f"negative frame size {size}")
            if size > limit:
                raise FrameTooLarge(size, limit)
            stop = pos + 4 + size
            if stop > end:
                break
            frames.append(data[pos + 4:stop] if src is data else bytes(src[pos + 4:stop]))
            pos = stop
        if src is buf:
            if pos:
                del buf[:pos]
        elif pos < end:
            buf += data[pos:]
        return frames

    @property
    def buffered(self) -> int:
        """Payload bytes of the partial frame held (its size prefix, once whole, not counted)."""
        n = len(self._buf)
        return n - 4 if n >= 4 else n


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
