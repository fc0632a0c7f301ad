"""Request decoding and response encoding around kafka-python's ApiMessage bodies.

`decode_request(payload)` turns one frame payload into a `Request` or raises a
`ClientProtocolError` - nothing else (the fuzz tests hold it to that). `encode_response` frames a
response body with the header version its API/version calls for; ApiVersions always uses header v0.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_header import RequestHeader

from .apis import API_VERSIONS_KEY, SUPPORTED, ApiSpec, api_version_ranges
from .errors import ErrorCode, MalformedRequest, UnsupportedApi
from .framing import frame

_PREFIX = struct.Struct(">hhi")


@dataclass(frozen=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    spec: ApiSpec

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class UnsupportedApiVersions:
    """An ApiVersions request at a version we do not serve: answered in v0 form with error 35."""

    correlation_id: int
    api_version: int


def peek_prefix(payload: bytes) -> tuple[int, int, int]:
    if len(payload) < _PREFIX.size:
        raise MalformedRequest(f"request of {len(payload)} bytes is shorter than a request header")
    return _PREFIX.unpack_from(payload, 0)


def decode_request(payload: bytes) -> Request | UnsupportedApiVersions:
    api_key, api_version, correlation_id = peek_prefix(payload)
    spec = SUPPORTED.get(api_key)
    if spec is None:
        raise UnsupportedApi(api_key, api_version, "API not served by tenure")
    if not spec.supports(api_version):
        if api_key == API_VERSIONS_KEY and api_version > spec.max_version:
            return UnsupportedApiVersions(correlation_id, api_version)
        raise UnsupportedApi(api_key, api_version,
                             f"{spec.name} is served at versions {spec.min_version}-{spec.max_version}")
    flexible = spec.flexible(api_version)
    try:
        stream = io.BytesIO(payload)
        header = RequestHeader.decode(stream, flexible=flexible)
        body = spec.request.decode(memoryview(payload)[stream.tell():], version=api_version)
    except Exception as exc:  # the codec raises struct/Index/Value/Unicode errors on bad bytes
        raise MalformedRequest(f"{spec.name} v{api_version}: undecodable body: {exc!r}") from exc
    return Request(api_key, api_version, correlation_id, header.client_id, body, spec)


def encode_response(request: Request, body: Any) -> bytes:
    body.API_VERSION = request.api_version
    body.with_header(correlation_id=request.correlation_id)
    return bytes(body.encode(header=True, framed=True))


def api_versions_body(version: int, error_code: int = ErrorCode.NONE):
    resp_cls = SUPPORTED[API_VERSIONS_KEY].response
    keys = [resp_cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in api_version_ranges()]
    return resp_cls(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0)


def encode_api_versions_error(correlation_id: int, code: int) -> bytes:
    """An ApiVersions error answer: a v0 body (header v0) with the code and the supported ranges. Clients
    parse an erroneous ApiVersions answer as v0 (kafka-python always, Java after trying its version)."""
    body = api_versions_body(0, code)
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))


def encode_unsupported_api_versions(req: UnsupportedApiVersions) -> bytes:
    """Kafka answers an unknown ApiVersions version with a v0 body (header v0) carrying error 35
    and the supported ranges, so the client can retry at a version both sides know."""
    return encode_api_versions_error(req.correlation_id, ErrorCode.UNSUPPORTED_VERSION)


__all__ = ["Request", "UnsupportedApiVersions", "decode_request", "encode_response",
           "api_versions_body", "encode_api_versions_error", "encode_unsupported_api_versions", "frame"]
