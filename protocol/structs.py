"""kafka-python classes built from this package's JSON schemas (protocol/schemas/), and the compiled decoders
the internal topics' records are read with (records.py, consumer_group_records.py).

`schema_class(NAME, __name__)` is the class `class NAME(ApiData, load_json=schemas): pass` declares in the
calling module (kafka-python finds the schema by the class's name); with `ApiMessage` as `base`, a request or
response body. It is built with
`types.new_class` because kafka-python ships no types: mypy takes its bases for `Any` and would check the
`load_json` class keyword against `object.__init_subclass__`. The classes' attributes (`fields`, nested
structs, `max_version`, ...) come from the schema at run time, so they are typed `Any`.
"""
from __future__ import annotations

import contextlib
import struct
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from kafka.protocol.api_data import ApiData
from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

from . import schemas

_I16 = struct.Struct(">h")
_READ_TEXT_DEPRECATED = sys.version_info < (3, 13)

Decoder = Callable[[bytes, int], tuple[Any, int]]      # (data, position) -> (struct, position after it)


def schema_class(name: str, module: str, base: type = ApiData) -> Any:
    """The kafka-python class of this package's JSON schema `name`, on `base` (ApiData or ApiMessage), as
    module `module` would declare it."""
    def body(ns: dict) -> None:
        ns.update(__module__=module, __qualname__=name)
    return types.new_class(name, (base,), {"load_json": schemas}, body)


def schema_pair(record: str, module: str) -> tuple[Any, Any]:
    """The key and value classes of one record type (`<record>Key`, `<record>Value` schemas)."""
    return schema_class(f"{record}Key", module), schema_class(f"{record}Value", module)


@contextlib.contextmanager
def quiet_schema_reads() -> Iterator[None]:
    """Around building a schema class after import. kafka-python reads a schema with
    importlib.resources.read_text, which Python 3.11-3.12 deprecate: silenced as protocol/__init__.py silences it
    at import, so a suite run with `filterwarnings = error` does not fail on a class built on first use (in the
    server's thread: the request would fail). `warnings.catch_warnings` swaps the process's warning filters, which
    another thread changing them in that millisecond would see; Python 3.13 took the deprecation back, and
    there nothing is swapped."""
    if not _READ_TEXT_DEPRECATED:
        yield
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(read|open)_text is deprecated", category=DeprecationWarning)
        yield


class LazySchemas:
    """The schema classes of one module, each built the first time it is used rather than at import (building
    them all took ~25 ms of the server's start-up, most of them for records a test may never write).
    `S = LazySchemas(__name__, pairs=("OffsetCommit", ...), names=(...))`: `S.OffsetCommitKey` is
    `schema_class("OffsetCommitKey", module)`, built once (under a lock: two threads asking at once get the same
    class) and then a plain attribute. `module_getattr()` is the module's `__getattr__` (PEP 562), so
    `module.OffsetCommitKey` works from outside as it did when the module built it at import."""

    _lock = threading.Lock()

    def __init__(self, module: str, pairs: tuple[str, ...] = (), names: tuple[str, ...] = (),
                 base: type = ApiData) -> None:
        self._module = module
        self._base = base
        self._names = frozenset(names) | {f"{p}{kv}" for p in pairs for kv in ("Key", "Value")}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"module {self._module!r} has no attribute {name!r}")
        with self._lock:
            cls = self.__dict__.get(name)
            if cls is None:
                with quiet_schema_reads():
                    cls = schema_class(name, self._module, self._base)
                setattr(self, name, cls)
        return cls

    def names(self) -> frozenset[str]:
        return self._names

    def module_getattr(self) -> Callable[[str], Any]:
        def __getattr__(name: str) -> Any:
            return getattr(self, name)
        return __getattr__


def key_version(key: bytes) -> int:
    """The int16 version every key and value of a record starts with (a key's names the record type)."""
    if key is None or len(key) < 2:
        raise ValueError("record key shorter than its version prefix")
    return _I16.unpack_from(key, 0)[0]


DECODERS: dict[tuple[Any, int], Decoder] = {}       # (class, version) -> compiled decoder, the schemas' versions


def decode_struct(cls: Any, data: bytes) -> Any:
    """One key or value struct (int16 version prefix, then the struct) through kafka-python's compiled
    decoder for that struct and version - the code its ApiMessage classes decode requests with, about 8x
    faster than `ApiData.decode`'s field-by-field path and giving the same object."""
    version = key_version(data)
    fast = DECODERS.get((cls, version))
    if fast is None:
        fast = compiled_decoder(cls, version)
    return fast(data if type(data) is bytes else bytes(data), 2)[0]


def encode_struct(obj: Any, version: int) -> bytes:
    """One key or value struct as `obj.encode(version=version)` makes it (int16 version prefix, then the struct),
    through kafka-python's compiled encoder for that struct and version - the code its ApiMessage classes encode
    answers with, about 2x faster than `ApiData.encode`'s field-by-field path (a KIP-848 member subscribing
    99,999 names: its metadata record took ~150 ms of the event loop)."""
    flexible = obj.flexible_version_q(version)
    fast = obj._struct.compiled_encode_into(version, compact=flexible, tagged=flexible)
    with EncodeBufferPool.acquire() as out:
        fast(obj, out)
        return _I16.pack(version) + bytes(out.result())


def compiled_decoder(cls: Any, version: int) -> Decoder:
    """A version above the schema's newest is read as the newest (as `ApiData.decode` does: newer versions
    only add fields)."""
    v = min(version, cls.max_version)
    if v < 0:
        raise ValueError(f"{cls.__name__}: negative version {version}")
    flexible = cls.flexible_version_q(v)
    fast = cls._struct.compiled_decode_from(v, compact=flexible, tagged=flexible, data_class=cls)
    if v == version:
        DECODERS[(cls, version)] = fast
    return fast
