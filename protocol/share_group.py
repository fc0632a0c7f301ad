"""The KIP-932 share group APIs kafka-python 3.0 has no classes for: ShareGroupHeartbeat (76), ShareGroupDescribe
(77), ShareFetch (78), ShareAcknowledge (79) and the share group offset admin APIs (90-92). Their JSON schemas live in protocol/schemas at the versions Kafka
4.3 serves (the heartbeat and describe v1, fetch and acknowledge v1-2; v0 was Kafka 4.0's early access, removed
in 4.1), and the classes are kafka-python `ApiMessage`s built from them (structs.py), so requests and responses
go through the one codec engine."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from .structs import LazySchemas

# the request and response classes, each built the first time it is used (structs.LazySchemas)
_S = LazySchemas(__name__, names=(
    "ShareGroupHeartbeatRequest",
    "ShareGroupHeartbeatResponse",
    "ShareGroupDescribeRequest",
    "ShareGroupDescribeResponse",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResponse",
    # the share group offset admin APIs (Kafka 4.1+): Describe v0-1, Alter v0, Delete v0
    "DescribeShareGroupOffsetsRequest",
    "DescribeShareGroupOffsetsResponse",
    "AlterShareGroupOffsetsRequest",
    "AlterShareGroupOffsetsResponse",
    "DeleteShareGroupOffsetsRequest",
    "DeleteShareGroupOffsetsResponse",
    # the share coordinator's inter-broker APIs (Kafka 4.1+; the versions Kafka 4.3 serves): a share partition's
    # state initialized, read, written, deleted and summarized at its share coordinator
    "InitializeShareGroupStateRequest",
    "InitializeShareGroupStateResponse",
    "ReadShareGroupStateRequest",
    "ReadShareGroupStateResponse",
    "WriteShareGroupStateRequest",
    "WriteShareGroupStateResponse",
    "DeleteShareGroupStateRequest",
    "DeleteShareGroupStateResponse",
    "ReadShareGroupStateSummaryRequest",
    "ReadShareGroupStateSummaryResponse",
), base=ApiMessage)
__getattr__ = _S.module_getattr()

# the acknowledge types of ShareFetch/ShareAcknowledge's AcknowledgementBatches (KIP-932; renew: KIP-1222, v2)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACK_TYPES = {GAP: "gap", ACCEPT: "accept", RELEASE: "release", REJECT: "reject", RENEW: "renew"}

__all__ = [*sorted(_S.names()), "GAP", "ACCEPT", "RELEASE", "REJECT", "RENEW", "ACK_TYPES"]
