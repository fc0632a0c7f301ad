"""Hostile request frames built from the request schemas (kafka-python's JSON schemas, field by field):
a null in each string/bytes/array field of every served API and version, and arrays past the element
limit. Used by the codec tests, the bad-input integration tests and bench/amplification.py.

`filled(spec, version)` is a request with one element in every array, "s" in every string and b"b" in
every bytes field, so every field at every depth is on the wire; `null_cases` sets one such field to
None at a time and says whether the schema allows it.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs import Bytes, String
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField

from tenure.protocol.apis import SUPPORTED

ALL_VERSIONS = [(s.key, v) for s in SUPPORTED.values() for v in range(s.min_version, s.max_version + 1)]


def _value(field, version: int):
    if isinstance(field, StructArrayField):
        return [_struct(field.array_of, version)]
    if isinstance(field, ArrayField):
        return [_value(field.array_of, version)]
    if isinstance(field, StructField):
        return _struct(field, version)
    t = field._type
    if isinstance(t, String):
        return "s"
    if t is Bytes:
        return b"b"
    try:
        return field.default
    except ValueError:      # an int array's `"default": "null"` reaches its elements (AlterPartitionReassignments)
        return 0


def _struct(struct: StructField, version: int):
    return struct.data_class(version=version, **{f.name: _value(f, version) for f in struct.untagged_fields(version)})


def filled(api_key: int, version: int):
    cls = SUPPORTED[api_key].request
    return cls(version=version, **{f.name: _value(f, version) for f in cls._struct.untagged_fields(version)})


@dataclass(frozen=True)
class Case:
    api_key: int
    version: int
    path: tuple[str, ...]      # field names from the top; arrays are entered at their one element
    kafka_name: str            # the field's name as Kafka's messages print it
    nullable: bool

    @property
    def name(self) -> str:
        return f"{SUPPORTED[self.api_key].name} v{self.version} {'.'.join(self.path)}"


def _paths(struct: StructField, version: int, prefix: tuple[str, ...]):
    for f in struct.untagged_fields(version):
        path = prefix + (f.name,)
        if isinstance(f, (ArrayField, StructArrayField)) or (
                isinstance(f, SimpleField) and (isinstance(f._type, String) or f._type is Bytes)):
            yield path, f
        if isinstance(f, StructArrayField):
            yield from _paths(f.array_of, version, path)
        elif isinstance(f, StructField):
            yield from _paths(f, version, path)


def null_cases(api_key: int, version: int) -> list[Case]:
    """Every string, bytes and array field on the wire of a filled request (structs have no null on the
    wire unless the schema makes them nullable, and none of the served requests does)."""
    cls = SUPPORTED[api_key].request
    return [Case(api_key, version, path, f._name[:1].lower() + f._name[1:], f.nullable_for_version_q(version))
            for path, f in _paths(cls._struct, version, ())]


def array_cases(api_key: int, version: int) -> list[Case]:
    return [c for c in null_cases(api_key, version) if _field(c) is not None and _is_array(_field(c))]


def element_cases(api_key: int, version: int) -> list[Case]:
    """Arrays of strings or bytes: their elements are never nullable, whatever the array is."""
    out = []
    for c in array_cases(api_key, version):
        f = _field(c)
        if not isinstance(f, StructArrayField) and (isinstance(f.array_of._type, String) or f.array_of._type is Bytes):
            out.append(Case(c.api_key, c.version, c.path, c.kafka_name + " element", False))
    return out


def element_null_frame(case: Case, correlation_id: int = 1) -> bytes:
    """The filled request with the case's array holding one null element."""
    req = filled(case.api_key, case.version)
    _set(req, case.path, [None])
    return frame_of(req, case.version, correlation_id)


def _field(case: Case):
    struct = SUPPORTED[case.api_key].request._struct
    field = None
    for name in case.path:
        field = struct.fields[name]
        struct = field.array_of if isinstance(field, StructArrayField) else field
    return field


def _is_array(field) -> bool:
    return isinstance(field, (ArrayField, StructArrayField))


def _set(req, path: tuple[str, ...], value) -> None:
    node = req
    for name in path[:-1]:
        node = getattr(node, name)
        if isinstance(node, list):
            node = node[0]
    setattr(node, path[-1], value)


def frame_of(req, version: int, correlation_id: int = 1) -> bytes:
    """The request as a whole frame, encoded by the schema alone (kafka-python's MetadataRequest.encode
    would turn a null topics array into an empty one at v0)."""
    req.API_VERSION = version
    req.with_header(correlation_id=correlation_id, client_id="hostile")
    return bytes(ApiMessage.encode(req, header=True, framed=True))


def null_frame(case: Case, correlation_id: int = 1) -> bytes:
    """A whole frame (size prefix included) of the filled request with the case's field null."""
    req = filled(case.api_key, case.version)
    _set(req, case.path, None)
    return frame_of(req, case.version, correlation_id)


def repeated_frame(case: Case, count: int, correlation_id: int = 1) -> bytes:
    """The filled request with the case's array holding `count` copies of its one element."""
    req = filled(case.api_key, case.version)
    node = req
    for name in case.path[:-1]:
        node = getattr(node, name)
        if isinstance(node, list):
            node = node[0]
    one = getattr(node, case.path[-1])
    setattr(node, case.path[-1], one * count)
    return frame_of(req, case.version, correlation_id)
