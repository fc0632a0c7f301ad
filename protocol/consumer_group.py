"""The KIP-848 consumer group APIs kafka-python 3.0 has no classes for: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69). Their JSON schemas live in protocol/schemas beside the records', and the classes
are kafka-python `ApiMessage`s built from them, so requests and responses go through the one codec engine."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from . import schemas


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas): pass      # noqa: E701
class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas): pass     # noqa: E701
class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas): pass       # noqa: E701
class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas): pass      # noqa: E701


__all__ = ["ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
           "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"]
