"""The KIP-848 consumer group APIs kafka-python 3.0 has no classes for: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69). Their JSON schemas live in protocol/schemas beside the records', and the classes
are kafka-python `ApiMessage`s built from them (structs.py), so requests and responses go through the one codec
engine."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from .structs import schema_class

ConsumerGroupHeartbeatRequest = schema_class("ConsumerGroupHeartbeatRequest", __name__, ApiMessage)
ConsumerGroupHeartbeatResponse = schema_class("ConsumerGroupHeartbeatResponse", __name__, ApiMessage)
ConsumerGroupDescribeRequest = schema_class("ConsumerGroupDescribeRequest", __name__, ApiMessage)
ConsumerGroupDescribeResponse = schema_class("ConsumerGroupDescribeResponse", __name__, ApiMessage)


__all__ = ["ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
           "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse"]
