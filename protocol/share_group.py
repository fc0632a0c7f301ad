"""The KIP-932 share group APIs kafka-python 3.0 has no classes for: ShareGroupHeartbeat (76), ShareGroupDescribe
(77), ShareFetch (78), ShareAcknowledge (79) and the share group offset admin APIs (90-92). Their JSON schemas live in protocol/schemas at the versions Kafka
4.3 serves (the heartbeat and describe v1, fetch and acknowledge v1-2; v0 was Kafka 4.0's early access, removed
in 4.1), and the classes are kafka-python `ApiMessage`s built from them (structs.py), so requests and responses
go through the one codec engine."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from .structs import schema_class

ShareGroupHeartbeatRequest = schema_class("ShareGroupHeartbeatRequest", __name__, ApiMessage)
ShareGroupHeartbeatResponse = schema_class("ShareGroupHeartbeatResponse", __name__, ApiMessage)
ShareGroupDescribeRequest = schema_class("ShareGroupDescribeRequest", __name__, ApiMessage)
ShareGroupDescribeResponse = schema_class("ShareGroupDescribeResponse", __name__, ApiMessage)
ShareFetchRequest = schema_class("ShareFetchRequest", __name__, ApiMessage)
ShareFetchResponse = schema_class("ShareFetchResponse", __name__, ApiMessage)
ShareAcknowledgeRequest = schema_class("ShareAcknowledgeRequest", __name__, ApiMessage)
ShareAcknowledgeResponse = schema_class("ShareAcknowledgeResponse", __name__, ApiMessage)
# the share group offset admin APIs (Kafka 4.1+): Describe v0-1, Alter v0, Delete v0
DescribeShareGroupOffsetsRequest = schema_class("DescribeShareGroupOffsetsRequest", __name__, ApiMessage)
DescribeShareGroupOffsetsResponse = schema_class("DescribeShareGroupOffsetsResponse", __name__, ApiMessage)
AlterShareGroupOffsetsRequest = schema_class("AlterShareGroupOffsetsRequest", __name__, ApiMessage)
AlterShareGroupOffsetsResponse = schema_class("AlterShareGroupOffsetsResponse", __name__, ApiMessage)
DeleteShareGroupOffsetsRequest = schema_class("DeleteShareGroupOffsetsRequest", __name__, ApiMessage)
DeleteShareGroupOffsetsResponse = schema_class("DeleteShareGroupOffsetsResponse", __name__, ApiMessage)

# the acknowledge types of ShareFetch/ShareAcknowledge's AcknowledgementBatches (KIP-932; renew: KIP-1222, v2)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACK_TYPES = {GAP: "gap", ACCEPT: "accept", RELEASE: "release", REJECT: "reject", RENEW: "renew"}

__all__ = ["ShareGroupHeartbeatRequest", "ShareGroupHeartbeatResponse", "ShareGroupDescribeRequest",
           "ShareGroupDescribeResponse", "ShareFetchRequest", "ShareFetchResponse", "ShareAcknowledgeRequest",
           "ShareAcknowledgeResponse", "DescribeShareGroupOffsetsRequest", "DescribeShareGroupOffsetsResponse",
           "AlterShareGroupOffsetsRequest", "AlterShareGroupOffsetsResponse", "DeleteShareGroupOffsetsRequest",
           "DeleteShareGroupOffsetsResponse", "GAP", "ACCEPT", "RELEASE", "REJECT", "RENEW", "ACK_TYPES"]

# the share coordinator's inter-broker APIs (Kafka 4.1+; the versions Kafka 4.3 serves): a share partition's
# state initialized, read, written, deleted and summarized at its share coordinator
InitializeShareGroupStateRequest = schema_class("InitializeShareGroupStateRequest", __name__, ApiMessage)
InitializeShareGroupStateResponse = schema_class("InitializeShareGroupStateResponse", __name__, ApiMessage)
ReadShareGroupStateRequest = schema_class("ReadShareGroupStateRequest", __name__, ApiMessage)
ReadShareGroupStateResponse = schema_class("ReadShareGroupStateResponse", __name__, ApiMessage)
WriteShareGroupStateRequest = schema_class("WriteShareGroupStateRequest", __name__, ApiMessage)
WriteShareGroupStateResponse = schema_class("WriteShareGroupStateResponse", __name__, ApiMessage)
DeleteShareGroupStateRequest = schema_class("DeleteShareGroupStateRequest", __name__, ApiMessage)
DeleteShareGroupStateResponse = schema_class("DeleteShareGroupStateResponse", __name__, ApiMessage)
ReadShareGroupStateSummaryRequest = schema_class("ReadShareGroupStateSummaryRequest", __name__, ApiMessage)
ReadShareGroupStateSummaryResponse = schema_class("ReadShareGroupStateSummaryResponse", __name__, ApiMessage)
__all__ += ["InitializeShareGroupStateRequest", "InitializeShareGroupStateResponse", "ReadShareGroupStateRequest",
            "ReadShareGroupStateResponse", "WriteShareGroupStateRequest", "WriteShareGroupStateResponse",
            "DeleteShareGroupStateRequest", "DeleteShareGroupStateResponse", "ReadShareGroupStateSummaryRequest",
            "ReadShareGroupStateSummaryResponse"]
