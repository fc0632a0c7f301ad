"""Requests for the SASL state machine, encoded and decoded as the server decodes them."""
from __future__ import annotations

import struct

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from tenure.protocol.codec import decode_request
from tests.support.wire import request_bytes


def decoded(req, version: int, cid: int = 1):
    """A request as the server's connection hands it on (kafka-python encoded, tenure decoded)."""
    return decode_request(request_bytes(req, version, cid)[4:])


def handshake(mechanism: str, version: int = 1):
    return decoded(SaslHandshakeRequest(mechanism=mechanism), version)


def authenticate(token: bytes, version: int = 2):
    return decoded(SaslAuthenticateRequest(auth_bytes=token), version)


def api_versions():
    return decoded(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)


def metadata():
    return decoded(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9)


def response(frame: bytes, req):
    """The response frame decoded with the request's response class."""
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    return req.spec.response.decode(frame, version=req.api_version, header=True, framed=True)
