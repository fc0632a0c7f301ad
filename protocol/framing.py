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
        self._buf = bytearray()
        self._need: int | None = None

    def feed(self, data: bytes) -> list[bytes]:
        if self._need is None and not self._buf and type(data) is bytes and len(data) >= 4:
            # the common case, one whole request in one read: its payload without going through the buffer
            (size,) = _SIZE.unpack_from(data, 0)
            if len(data) == 4 + size and size <= self.max_frame_bytes:
                return [data[4:]]
        self._buf += data
        frames: list[bytes] = []
        while True:
            if self._need is None:
                if len(self._buf) < 4:
                    return frames
                (size,) = _SIZE.unpack_from(self._buf, 0)
                if size < 0:
                    raise MalformedRequest(f"negative frame size {size}")
                if size > self.max_frame_bytes:
                    raise FrameTooLarge(size, self.max_frame_bytes)
                del self._buf[:4]
                self._need = size
            if len(self._buf) < self._need:
                return frames
            frames.append(bytes(self._buf[: self._need]))
            del self._buf[: self._need]
            self._need = None

    @property
    def buffered(self) -> int:
        return len(self._buf)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
