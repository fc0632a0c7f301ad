"""Request decoding and response encoding around kafka-python's ApiMessage bodies.

`decode_request(payload, limits)` turns one frame payload into a `Request` or raises a
`ClientProtocolError` - nothing else (the fuzz tests hold it to that). The body is first checked
against its schema and the decoding limits (protocol/limits.py: nulls where the schema has none,
lengths past the end, too many array elements), then decoded by kafka-python. `encode_response` frames
a response body with the header version its API/version calls for; ApiVersions always uses header v0.
"""
from __future__ import annotations

import operator
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs.encode_buffer import EncodeBuffer
from kafka.protocol.schemas.fields.struct import StructField

from .apis import API_VERSIONS_KEY, DEFAULT_SERVED, ApiSpec, ServedApis
from .errors import ErrorCode, MalformedRequest, UnsupportedApi
from .framing import frame
from .limits import DecodeLimits, check_body

_PREFIX = struct.Struct(">hhi")
_DEFAULT_LIMITS = DecodeLimits()


class _TagReader:
    """`read(n)` over the request's bytes from a position, for kafka-python's TaggedFields.decode."""

    __slots__ = ("data", "pos")

    def __init__(self, data, pos: int) -> None:
        self.data, self.pos = data, pos

    def read(self, n: int = -1) -> bytes:
        start = self.pos
        self.pos = len(self.data) if n is None or n < 0 else min(start + n, len(self.data))
        return bytes(self.data[start:self.pos])


def _emit_tagged_decode(self, ctx, var_name, indent, version):
    """kafka-python 3.0.12's compiled decoders read a struct's tagged fields from `BytesIO(bytes(data[pos:]))`,
    a copy of the whole rest of the request for every struct that carries one: an array of N elements with
    tags costs N copies of the request (quadratic; a few MiB of it held the loop for minutes). This emits the
    same decode over a reader that copies only the bytes it reads."""
    tf_var = ctx.next_var('tf')
    ctx.globs[tf_var] = self.tagged_fields(version)
    ctx.globs['_TagReader'] = _TagReader
    reader = ctx.next_var('tr')
    ctx.emit(indent, f'{reader} = _TagReader(data, pos)')
    ctx.emit(indent, f'_tfd = {tf_var}.decode({reader}, version={version:d})')
    ctx.emit(indent, f'pos = {reader}.pos')
    ctx.emit(indent, 'if _tfd:')
    ctx.emit(indent, '    for _tk, _tv in _tfd.items():')
    ctx.emit(indent, '        if _tk.startswith("_"):')
    ctx.emit(indent, f'            if {var_name}.unknown_tags is None: {var_name}.unknown_tags = {{}}')
    ctx.emit(indent, f'            {var_name}.unknown_tags[_tk] = _tv')
    ctx.emit(indent, '        else:')
    ctx.emit(indent, f'            if {var_name}.tags is None: {var_name}.tags = set()')
    ctx.emit(indent, f'            {var_name}.tags.add(_tk)')
    ctx.emit(indent, f'            setattr({var_name}, _tk, _tv)')


StructField._emit_tagged_decode = _emit_tagged_decode   # before any decoder is compiled (they compile lazily)


@dataclass(frozen=True)
class Request:
    """One decoded request: its header, its body (kafka-python's object), the served API's row, and the bytes it
    was decoded from (kept by the request capture)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    spec: ApiSpec
    served: ServedApis = DEFAULT_SERVED      # what the server it came to presents (its ApiVersions answer)
    payload: Any = field(default=None, repr=False, compare=False)  # the frame's bytes it was decoded from
    body_at: int = field(default=0, repr=False, compare=False)     # where the body starts in `payload`

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class UnsupportedApiVersions:
    """An ApiVersions request at a version we do not serve: answered in v0 form with error 35."""

    correlation_id: int
    api_version: int
    served: ServedApis = DEFAULT_SERVED


_HEADER_DECODERS: dict[bool, Any] = {}


def _header_decoder(flexible: bool):
    """kafka-python's compiled decoder of the request header (v1, or v2 for a flexible version): what
    `RequestHeader.decode` decodes, read straight from the request's bytes - `decode` reads the header field by
    field from a stream, about a tenth of a small request's whole cost. `(data, pos) -> (header, end)`."""
    fn = _HEADER_DECODERS.get(flexible)
    if fn is None:
        version = RequestHeader._flexible_versions[0] if flexible else RequestHeader._valid_versions[0]
        fn = _HEADER_DECODERS[flexible] = RequestHeader._struct.compiled_decode_from(
            version, compact=False, tagged=flexible, data_class=RequestHeader)
    return fn


def _request(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any, spec: ApiSpec,
             served: ServedApis, payload: Any, body_at: int) -> Request:
    """A decoded `Request`, made without the per-field work of a frozen dataclass's constructor (one per request)."""
    req = object.__new__(Request)
    d = req.__dict__
    d["api_key"], d["api_version"], d["correlation_id"], d["client_id"] = api_key, api_version, correlation_id, client_id
    d["body"], d["spec"], d["served"], d["payload"], d["body_at"] = body, spec, served, payload, body_at
    return req


# Requests that repeat byte for byte but for their correlation id - a member's Heartbeat is the same bytes at every
# heartbeat of a generation, a KIP-848 (or share group) member's heartbeat at every heartbeat of an epoch once it has
# sent its subscription (the fields left null mean "unchanged"). What the request header's decode and the decoding
# limits' walk make of such bytes (the client id, where the body starts, that the body passed) is kept, keyed by the
# bytes after the correlation id (and the API, version and element limit they were checked at): the next such
# request decodes only its body. Up to REPEATS_KEPT of them (then the table starts again); requests of at most
# REPEAT_BYTES.
REPEATING_APIS = frozenset({12, 68, 76})  # Heartbeat, ConsumerGroupHeartbeat, ShareGroupHeartbeat
REPEATS_KEPT = 4096
REPEAT_BYTES = 512
_repeats: dict[bytes, tuple[int, int, int, str | None, int]] = {}     # numbers and a string: not tracked by the GC


# (api key, version) -> what decoding such a request needs, worked out at the first request of that API and version
# rather than at every request: whether the version is flexible, the request header's compiled decoder, the body's
# (kafka-python's compiled decoder, the one `ApiMessage.decode` finds for the class and version - or that `decode`
# itself for a class of its own decode), the request class and the request's name for messages.
_DECODING: dict[tuple[int, int], tuple[bool, Callable, Callable, type, str]] = {}


def _decoding(spec: ApiSpec, version: int) -> tuple[bool, Callable, Callable, type, str]:
    cls = spec.request
    flexible = cls.flexible_version_q(version)
    if getattr(cls.decode, "__func__", None) is ApiMessage.decode.__func__:
        fast = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls[None])
    else:                                            # a class with a decode of its own: that decode, every time
        def fast(data, pos, _decode=cls.decode, _version=version):
            return _decode(data[pos:], version=_version), len(data)
    entry = _DECODING[(spec.key, version)] = (flexible, _header_decoder(flexible), fast, cls,
                                              f"{spec.name} v{version}")
    return entry


def decode_request(payload: bytes, limits: DecodeLimits = _DEFAULT_LIMITS,
                   served: ServedApis = DEFAULT_SERVED) -> Request | UnsupportedApiVersions:
    """`served`: the APIs and versions the server presents (tenure's table, or a Kafka release's cut of it); a
    request outside them raises UnsupportedApi (the connection is closed, as Kafka closes it), but for an
    ApiVersions request above the served versions, answered v0 with error 35 (`UnsupportedApiVersions`)."""
    if len(payload) < 8:
        raise MalformedRequest(f"request of {len(payload)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _PREFIX.unpack_from(payload, 0)
    spec = served.specs.get(api_key)
    if spec is None:
        raise UnsupportedApi(api_key, api_version, f"API not served by Kafka {served.name}"
                             if api_key in DEFAULT_SERVED.specs else "API not served by tenure")
    if not spec.min_version <= api_version <= spec.max_version:
        if api_key == API_VERSIONS_KEY and api_version > spec.max_version:
            return UnsupportedApiVersions(correlation_id, api_version, served)
        raise UnsupportedApi(api_key, api_version,
                             f"{spec.name} is served at versions {spec.min_version}-{spec.max_version}")
    how = _DECODING.get((api_key, api_version))
    if how is None:
        how = _decoding(spec, api_version)
    flexible, header_decoder, body_decoder, request_cls, what = how
    key = None
    if api_key in REPEATING_APIS and len(payload) <= REPEAT_BYTES:
        key = bytes(payload[8:])
        seen = _repeats.get(key)
        if seen is not None and seen[0] == api_key and seen[1] == api_version and \
                seen[2] == limits.max_request_elements:
            end = seen[4]
            try:
                body = body_decoder(memoryview(payload), end)[0]
            except Exception as exc:  # the same bytes decoded before: not expected
                raise MalformedRequest(f"{what}: undecodable body: {exc!r}") from exc
            return _request(api_key, api_version, correlation_id, seen[3], body, spec, served, payload, end)
    whole = memoryview(payload)
    try:
        header, end = header_decoder(whole, 0)
    except Exception as exc:  # the codec raises struct/Index/Value/Unicode errors on bad bytes
        raise MalformedRequest(f"{what}: undecodable request header: {exc!r}") from exc
    if end > len(whole):      # the compiled decoder reads a string past the end as a shorter one: refused
        raise MalformedRequest(f"{what}: undecodable request header: it runs {end - len(whole)} byte(s) past the "
                               f"end of the request")
    check_body(request_cls, api_version, flexible, whole[end:], what, limits)
    try:
        body = body_decoder(whole, end)[0]
    except Exception as exc:  # e.g. invalid UTF-8 in a string
        raise MalformedRequest(f"{what}: undecodable body: {exc!r}") from exc
    if key is not None:                        # a repeating request: its header and walk kept for the next
        if len(_repeats) >= REPEATS_KEPT:
            _repeats.clear()
        _repeats[key] = (api_key, api_version, limits.max_request_elements, header.client_id, end)
    return _request(api_key, api_version, correlation_id, header.client_id, body, spec, served, payload, end)


# Requests and answers too heavy for one turn of the event loop (issue 30): one event loop serves every client,
# so the server decodes such a request, and encodes such an answer, on a worker thread (tenure/server/offload.py)
# while the loop serves the other connections. The bytes are the same either way.
HEAVY_REQUEST_BYTES = 16 * 1024      # a body this large may hold ~8,000 tiny array elements: ~30 ms to decode
HEAVY_ANSWER_ELEMENTS = 5_000        # array elements (lists at any depth) past which an answer is encoded off the loop
# answers never walked for their size: the hot path's, whose size the request bounds (records are bytes)
_LIGHT_ANSWERS = frozenset({0, 1, 8, 12, 14, 18, 68, 76, 78, 79})  # Produce Fetch OffsetCommit Heartbeat SyncGroup
#                                                                    ApiVersions ConsumerGroupHeartbeat ShareGroup-
#                                                                    Heartbeat ShareFetch ShareAcknowledge
LIGHT_ANSWERS = _LIGHT_ANSWERS


def heavy_request(payload: bytes) -> bool:
    """Whether decoding this request frame (`decode_request`) may take more than a loop turn: a body of many
    bytes that are not a Produce's record batches (whose bytes kafka-python keeps as one value)."""
    return len(payload) >= HEAVY_REQUEST_BYTES and payload[:2] != b"\x00\x00"     # api key 0: Produce


def heavy_answer(api_key: int, body: Any, limit: int = HEAVY_ANSWER_ELEMENTS) -> bool:
    """Whether an answer holds more than `limit` array elements (every list at every depth, a list of strings
    or numbers counting its length): its encoding is then done off the loop. The walk stops as soon as it has
    seen more than `limit`, so it costs at most a walk over that many elements."""
    if api_key in _LIGHT_ANSWERS or not _is_struct(body):
        return False
    seen, stack = 0, [body]
    while stack:
        node = stack.pop()
        for name in node.fields:
            value = getattr(node, name, None)
            if value.__class__ is list and value:
                seen += len(value)
                if seen > limit:
                    return True
                if _is_struct(value[0]):
                    stack.extend(value)
            elif _is_struct(value):
                stack.append(value)
    return False


def _is_struct(value: Any) -> bool:
    """A kafka-python message struct (its `fields`: name -> field; a UUID's `fields` is a tuple of ints)."""
    return isinstance(getattr(value, "fields", None), dict)


_SIZE_CID = struct.Struct(">ii")             # the frame's size, the response header v0 (correlation id)
_SIZE_CID_TAGS = struct.Struct(">iiB")       # ... header v1: the correlation id and no tagged field


# Answers whose body is a few numbers and nothing else (Heartbeat's: its throttle time and error code) are the same
# bytes for the same numbers at a version: kafka-python's encoding of each is kept, keyed by its class, version and
# numbers (up to ANSWERS_KEPT, then the table starts again). A body carrying tagged fields is encoded every time.
ANSWERS_KEPT = 1024
_INTEGERS = frozenset({"int8", "int16", "int32", "int64", "uint16"})
# class -> what reads its tagged fields and numbers as one tuple (None: not a numbers-only answer)
_numbers_only: dict[type, Callable[[Any], tuple] | None] = {}
_answers: dict[tuple, bytes] = {}


def _numbers_of(cls: type) -> Callable[[Any], tuple] | None:
    """For a class every one of whose fields is a plain integer (no array, string, struct or tagged field): what
    reads an answer's (tags, unknown tags, *numbers); None for any other class."""
    if cls in _numbers_only:
        return _numbers_only[cls]
    fields = getattr(cls, "fields", None)
    getter = None
    if isinstance(fields, dict) and fields and all(
            getattr(f, "_type_str", None) in _INTEGERS and getattr(f, "_tag", None) is None
            and getattr(f, "_fields", None) is None for f in fields.values()):
        getter = operator.attrgetter("tags", "unknown_tags", *fields)
    _numbers_only[cls] = getter
    return getter


# (class, version) -> how an answer of that class is encoded at that version, worked out at its first answer rather
# than at every one: the frame's header (the frame's size and the correlation id, then for a flexible version other
# than ApiVersions' an empty tagged-field section) and kafka-python's compiled encoder of the body (the one
# `ApiMessage.encode` finds; None for a class with an encode of its own, which is then called).
_ENCODING: dict[tuple[Any, int], tuple[struct.Struct, Callable | None]] = {}
_BUFFERS = threading.local()          # one kafka-python EncodeBuffer per thread (answers are encoded on workers too)


def _encoding(cls: Any, version: int) -> tuple[struct.Struct, Callable | None]:
    max_version = cls.max_version
    if not 0 <= version <= max_version:              # what `API_VERSION = version` refuses
        raise ValueError(f"Invalid version {version} (max version is {max_version}).")
    flexible = cls.flexible_version_q(version)
    header = _SIZE_CID_TAGS if flexible and cls.API_KEY != API_VERSIONS_KEY else _SIZE_CID
    fast = cls._struct.compiled_encode_into(version, compact=flexible, tagged=flexible) \
        if cls.encode is ApiMessage.encode else None
    entry = _ENCODING[(cls, version)] = (header, fast)
    return entry


_BUFFER_KEPT = 1 << 20                # a thread's buffer grown past this by a large answer is not kept for the next


def _encoded(body: Any, version: int, header: struct.Struct, fast: Callable | None, correlation_id: int) -> bytes:
    """The frame of an answer: its header (`header`, with `correlation_id`) then kafka-python's encoding of `body`
    (`fast`: its compiled encoder, written into one buffer after the header's place)."""
    body._version = version
    if fast is None:
        data = body.encode()
        if header is _SIZE_CID_TAGS:
            return _SIZE_CID_TAGS.pack(len(data) + 5, correlation_id, 0) + data
        return _SIZE_CID.pack(len(data) + 4, correlation_id) + data
    out = getattr(_BUFFERS, "out", None)
    if out is None:
        out = _BUFFERS.out = EncodeBuffer(4096)
    out.pos = header.size
    fast(body, out)
    buf, end = out.buf, out.pos
    if header is _SIZE_CID_TAGS:
        header.pack_into(buf, 0, end - 4, correlation_id, 0)
    else:
        header.pack_into(buf, 0, end - 4, correlation_id)
    frame = bytes(memoryview(buf)[:end])
    if len(buf) > _BUFFER_KEPT:
        _BUFFERS.out = None
    return frame


def encode_body(body: Any, version: int) -> bytes:
    """kafka-python's encoding of `body` at `version` (kept for a numbers-only answer, see ANSWERS_KEPT)."""
    cls = body.__class__
    if (cls, version) not in _ENCODING:
        _encoding(cls, version)
    body._version = version
    getter = _numbers_only[cls] if cls in _numbers_only else _numbers_of(cls)
    if getter is None:
        return bytes(body.encode())
    values = getter(body)
    if values[0] is not None or values[1] is not None:       # tagged fields: encoded every time
        return bytes(body.encode())
    key = (cls, version, values)
    data = _answers.get(key)
    if data is None:
        data = bytes(body.encode())
        if all(isinstance(v, int) for v in values[2:]):    # (an error code: an IntEnum, equal to its int)
            if len(_answers) >= ANSWERS_KEPT:
                _answers.clear()
            _answers[key] = data
    return data


def encode_response(request: Request, body: Any) -> bytes:
    """The answer's frame: kafka-python encodes the body; the response header before it is Kafka's v1 (the
    correlation id and an empty tagged-field section) at a flexible version, v0 (the correlation id) otherwise and
    always for ApiVersions - written with the frame's size here rather than through a header object per answer
    (tests/protocol/test_codec.py holds it to kafka-python's `encode(header=True, framed=True)` for every API and
    version). An answer whose body is a few numbers and nothing else (Heartbeat's) is encoded once per version and
    numbers (ANSWERS_KEPT); any other straight into the frame's buffer by kafka-python's compiled encoder."""
    version = request.api_version
    cls = body.__class__
    how = _ENCODING.get((cls, version))
    if how is None:
        how = _encoding(cls, version)
    header, fast = how
    if request.api_key == API_VERSIONS_KEY:           # header v0 always (an answer of another class: as Kafka)
        header = _SIZE_CID
    getter = _numbers_only[cls] if cls in _numbers_only else _numbers_of(cls)
    if getter is not None:
        values = getter(body)
        data = _answers.get((cls, version, values)) if values[0] is None and values[1] is None else None
        if data is None:
            data = encode_body(body, version)
        else:
            body._version = version
        if header is _SIZE_CID_TAGS:
            return _SIZE_CID_TAGS.pack(len(data) + 5, request.correlation_id, 0) + data
        return _SIZE_CID.pack(len(data) + 4, request.correlation_id) + data
    return _encoded(body, version, header, fast, request.correlation_id)


def api_versions_body(version: int, error_code: int = ErrorCode.NONE, served: ServedApis = DEFAULT_SERVED,
                      transaction_version: int | None = None, features_epoch: int = 1):
    """The ApiVersions answer of a server presenting `served`: its API ranges and, from v3, the features its
    release announces (v3 leaves out supported features whose least level is 0, as Kafka does for the clients
    that could not parse them; finalized ones at level 0 are never listed); `transaction_version`: the
    `transaction.version` level the server finalizes (--transaction-version; None: the release's);
    `features_epoch`: FinalizedFeaturesEpoch when features are finalized (a KRaft broker's is the offset of the
    metadata it has applied - every broker's the same once caught up; -1 with none finalized, as a ZooKeeper
    broker without the feature znode answers)."""
    resp_cls = DEFAULT_SERVED.specs[API_VERSIONS_KEY].response
    keys = [resp_cls.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in served.ranges()]
    body = resp_cls(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0)
    if version >= 3 and error_code == ErrorCode.NONE:
        supported, finalized = served.release.announced_features(transaction_version)
        S = resp_cls.fields["supported_features"].data_class
        F = resp_cls.fields["finalized_features"].data_class
        body.supported_features = [S(name=n, min_version=lo, max_version=hi) for n, (lo, hi) in supported.items()
                                   if version >= 4 or lo > 0]
        body.finalized_features = [F(name=n, max_version_level=hi, min_version_level=lo)
                                   for n, (lo, hi) in finalized.items()]
        body.finalized_features_epoch = features_epoch if finalized else -1
    return body


def encode_api_versions_error(correlation_id: int, code: int, served: ServedApis = DEFAULT_SERVED) -> bytes:
    """An ApiVersions error answer: a v0 body (header v0) with the code and the supported ranges. Clients
    parse an erroneous ApiVersions answer as v0 (kafka-python always, Java after trying its version)."""
    body = api_versions_body(0, code, served)
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))


def encode_unsupported_api_versions(req: UnsupportedApiVersions) -> bytes:
    """Kafka answers an unknown ApiVersions version with a v0 body (header v0) carrying error 35
    and the supported ranges, so the client can retry at a version both sides know."""
    return encode_api_versions_error(req.correlation_id, ErrorCode.UNSUPPORTED_VERSION, req.served)


__all__ = ["Request", "UnsupportedApiVersions", "decode_request", "encode_response", "heavy_request", "heavy_answer",
           "api_versions_body", "encode_api_versions_error", "encode_unsupported_api_versions", "frame"]
