"""Request decoding limits: a schema-driven check of a request body before kafka-python decodes it.

kafka-python's decoders build one Python object per array element (a 2-byte empty topic name becomes
a ~100-byte object, and the answer to it several more), read a null (length -1) into any field whether
the schema allows it or not, and read a string whose length runs past the end of the frame as a shorter
string. `check_body` walks the bytes of a request body with the same schema (kafka-python's field objects
for the API and version: types, `nullableVersions`, tagged fields) without building anything, and
refuses, before any object is made:

- a null in a field whose schema is not nullable at that version (Kafka's generated parser throws
  "non-nullable field X was serialized as null" and the broker closes the connection);
- a length or element count that runs past the end of the request (Kafka: "Tried to allocate a
  collection of size N, but there are only M bytes remaining.") or a varint longer than 5 bytes;
- more array elements in one request, counted over every array at every depth, than
  `max_request_elements` (`--max-request-elements`): `RequestLimitExceeded`.

Both are `ClientProtocolError`s: the server logs the reason as bad input and closes the connection,
as Kafka does for a request it cannot parse.
"""
from __future__ import annotations

from struct import unpack_from
from typing import NoReturn

from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs import UUID, BitField, Bytes, String
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField

from .errors import MalformedRequest, RequestLimitExceeded

DEFAULT_MAX_REQUEST_ELEMENTS = 100_000


class DecodeLimits:
    """What one request may hold. `max_request_elements`: array elements over all the request's
    arrays at every depth (topics, partitions, groups, partition indexes, ...). (A plain class: the decoder reads
    its field, nothing compares or prints it, and a dataclass's build cost ~0.4 ms of every server's start-up.)"""

    __slots__ = ("max_request_elements",)

    def __init__(self, max_request_elements: int = DEFAULT_MAX_REQUEST_ELEMENTS) -> None:
        self.max_request_elements = max_request_elements


# A plan is (steps, tags). Each step is a tuple whose first item says what it reads:
_FIXED, _STRING, _BYTES, _ARRAY, _STRUCT_ARRAY, _STRUCT = range(6)
# (_FIXED, size)                        fixed-width fields, adjacent ones merged
# (_STRING | _BYTES, name, nullable)
# (_ARRAY, name, nullable, element)     element: a _FIXED, _STRING or _BYTES step
# (_STRUCT_ARRAY | _STRUCT, name, nullable, plan)
# tags: {tag: step} of the struct's known tagged fields (flexible versions), or None (no tagged section)
_PLANS: dict[tuple[int, int, bool], tuple] = {}


def _kafka_name(field) -> str:
    """The field's name as Kafka's own messages print it (camelCase)."""
    name = field._name
    return name[:1].lower() + name[1:]


def _simple_step(field: SimpleField, name: str, nullable: bool) -> tuple:
    t = field._type
    if field.is_batchable():
        return (_FIXED, t.size)
    if t is UUID:
        return (_FIXED, 16)
    if t is BitField:
        return (_FIXED, 4)
    if isinstance(t, String):
        return (_STRING, name, nullable)
    if t is Bytes:
        return (_BYTES, name, nullable)
    raise AssertionError(f"no decode check for field type {field.type_str}")


def _step(field, version: int, flexible: bool) -> tuple:
    name, nullable = _kafka_name(field), field.nullable_for_version_q(version)
    if isinstance(field, StructArrayField):
        return (_STRUCT_ARRAY, name, nullable, _plan(field.array_of, version, flexible))
    if isinstance(field, ArrayField):
        return (_ARRAY, name, nullable, _simple_step(field.array_of, name + " element", False))
    if isinstance(field, StructField):
        return (_STRUCT, name, nullable, _plan(field, version, flexible))
    return _simple_step(field, name, nullable)


def _plan(struct: StructField, version: int, flexible: bool) -> tuple:
    key = (id(struct), version, flexible)
    plan = _PLANS.get(key)
    if plan is None:
        steps: list[tuple] = []
        for field in struct.untagged_fields(version):
            step = _step(field, version, flexible)
            if step[0] == _FIXED and steps and steps[-1][0] == _FIXED:
                steps[-1] = (_FIXED, steps[-1][1] + step[1])
            else:
                steps.append(step)
        # tagged fields are read compact, their structs with a tagged section of their own
        tags = ({f.tag: _step(f, version, True) for f in struct.tagged_fields(version)._fields}
                if flexible else None)
        plan = _PLANS[key] = (tuple(steps), tags)
    return plan


class _Walk:
    """One walk over one request body: the bytes, the element budget left, the API for messages."""

    __slots__ = ("data", "budget", "limit", "what")

    def __init__(self, data: memoryview, limit: int, what: str) -> None:
        self.data, self.budget, self.limit, self.what = data, limit, limit, what

    def fail(self, message: str) -> NoReturn:
        raise MalformedRequest(f"{self.what}: {message}")

    def need(self, pos: int, n: int, end: int, name: str) -> int:
        if n > end - pos:
            self.fail(f"field {name} needs {n} byte(s) at byte {pos}, only {max(end - pos, 0)} remain")
        return pos + n

    def uvarint(self, pos: int, end: int, name: str) -> tuple[int, int]:
        value = shift = 0
        for _ in range(5):
            if pos >= end:
                self.fail(f"field {name}: varint runs past the end of the request")
            b = self.data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, pos
            shift += 7
        self.fail(f"field {name}: varint is too long")

    def length(self, pos: int, end: int, name: str, width: str, compact: bool) -> tuple[int, int]:
        """A string, bytes or array length; -1 is null (any negative length is null to Kafka)."""
        if compact:
            n, pos = self.uvarint(pos, end, name)
            return n - 1, pos
        size = 2 if width == ">h" else 4
        self.need(pos, size, end, name)
        return unpack_from(width, self.data, pos)[0], pos + size

    def null(self, name: str, nullable: bool, n: int) -> None:
        if not nullable:
            self.fail(f"non-nullable field {name} was serialized as null")
        if n != -1:      # Kafka reads any negative length as null; kafka-python only -1
            self.fail(f"field {name} has invalid length {n}")

    def struct(self, plan: tuple, pos: int, end: int, compact: bool) -> int:
        steps, tags = plan
        for step in steps:
            pos = self.step(step, pos, end, compact)
        if tags is not None:
            if pos < end and self.data[pos] == 0:         # no tagged field (the usual case): one byte
                return pos + 1
            count, pos = self.uvarint(pos, end, "taggedFields")
            for _ in range(count):
                tag, pos = self.uvarint(pos, end, "taggedFields")
                size, pos = self.uvarint(pos, end, "taggedFields")
                stop = self.need(pos, size, end, f"tag {tag}")
                step = tags.get(tag)
                if step is not None:
                    self.step(step, pos, stop, True)
                pos = stop
        return pos

    def step(self, step: tuple, pos: int, end: int, compact: bool) -> int:
        kind = step[0]
        if kind == _FIXED:
            if step[1] <= end - pos:
                return pos + step[1]
            return self.need(pos, step[1], end, "of fixed width")
        name, nullable = step[1], step[2]
        if kind == _STRING or kind == _BYTES:
            if compact and pos < end and self.data[pos] < 0x80:     # a one-byte length (the usual case)
                n, pos = self.data[pos] - 1, pos + 1
            else:
                n, pos = self.length(pos, end, name, ">h" if kind == _STRING else ">i", compact)
            if n < 0:
                self.null(name, nullable, n)
                return pos
            if kind == _STRING and n > 0x7FFF:
                self.fail(f"string field {name} had invalid length {n}")
            if n <= end - pos:
                return pos + n
            return self.need(pos, n, end, name)
        if kind == _STRUCT:
            if nullable:
                self.need(pos, 1, end, name)
                if self.data[pos] == 0xFF:
                    return pos + 1
                pos += 1
            return self.struct(step[3], pos, end, compact)
        n, pos = self.length(pos, end, name, ">i", compact)
        if n < 0:
            self.null(name, nullable, n)
            return pos
        if n > end - pos:
            self.fail(f"field {name}: tried to allocate a collection of size {n}, but there are only "
                      f"{end - pos} bytes remaining")
        self.budget -= n
        if self.budget < 0:
            raise RequestLimitExceeded(f"{self.what}: more than {self.limit} array elements in one request "
                                       f"(field {name}; the limit is --max-request-elements)")
        inner = step[3]
        if kind == _ARRAY and inner[0] == _FIXED:
            return self.need(pos, n * inner[1], end, name)
        walk = self.step if kind == _ARRAY else self.struct
        for _ in range(n):
            pos = walk(inner, pos, end, compact)
        return pos


def check_body(request_cls, version: int, flexible: bool, data: memoryview, what: str,
               limits: DecodeLimits) -> None:
    """Walk one request body (`data`: the bytes after the request header) against `request_cls`'s
    schema at `version`; raise MalformedRequest or RequestLimitExceeded, or return if kafka-python may
    decode it. `what` names the request in messages ("DescribeGroups v0")."""
    walk = _Walk(data, limits.max_request_elements, what)
    walk.struct(_plan(request_cls._struct, version, flexible), 0, len(data), flexible)
