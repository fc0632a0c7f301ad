"""The KIP-848 consumer group APIs kafka-python 3.0 has no classes for: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69). Their JSON schemas live in protocol/schemas beside the records', and the classes
are kafka-python `ApiMessage`s built from them (structs.py), so requests and responses go through the one codec
engine."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from .structs import LazySchemas

# the request and response classes, each built the first time it is used (structs.LazySchemas)
_S = LazySchemas(__name__, names=(
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
), base=ApiMessage)
__getattr__ = _S.module_getattr()


__all__ = sorted(_S.names())
