"""A tiny raw Kafka wire client for tests: kafka-python's codecs over a plain socket.

Used where a test must send exactly chosen bytes (malformed frames, odd versions) or where a
real client library would hide what the server answered.
"""
from __future__ import annotations

import asyncio
import socket
import struct

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsResponse
from kafka.record.default_records import DefaultRecordBatchBuilder


def request_bytes(req: ApiMessage, version: int, correlation_id: int = 1, client_id: str = "wire") -> bytes:
    req.API_VERSION = version
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(req.encode(header=True, framed=True))


def response_class(req: ApiMessage):
    from kafka.protocol.api_header import ResponseClassRegistry
    return ResponseClassRegistry._response_class_registry[req.API_KEY]


def build_batch(records: list[tuple[bytes | None, bytes | None]], base_timestamp: int = 1_700_000_000_000,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=2**30)
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=base_timestamp + i, key=k, value=v, headers=[])
    return bytes(b.build())


class WireClient:
    """Blocking client: one request at a time, answers decoded with the matching response class."""

    def __init__(self, host: str, port: int, timeout: float = 10.0, source: str | None = None) -> None:
        """`source`: the local address to connect from (e.g. 127.0.0.3: another client host on loopback)."""
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=None if source is None else (source, 0))
        self._cid = 0

    @classmethod
    def to(cls, bootstrap: str, timeout: float = 10.0, source: str | None = None) -> WireClient:
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), timeout, source)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            buf += chunk
        return bytes(buf)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def call(self, req: ApiMessage, version: int):
        self._cid += 1
        self.send_raw(request_bytes(req, version, self._cid))
        payload = self.read_frame()
        resp_cls = response_class(req)
        if resp_cls is ApiVersionsResponse:
            return ApiVersionsResponse.decode(struct.pack(">i", len(payload)) + payload, version=version,
                                              header=True, framed=True)
        resp = resp_cls.decode(struct.pack(">i", len(payload)) + payload, version=version, header=True, framed=True)
        assert resp.header.correlation_id == self._cid
        return resp

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncWireClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._cid = 0

    @classmethod
    async def connect(cls, bootstrap: str) -> AsyncWireClient:
        host, port = bootstrap.rsplit(":", 1)
        r, w = await asyncio.open_connection(host, int(port))
        return cls(r, w)

    async def call(self, req: ApiMessage, version: int):
        self._cid += 1
        self.writer.write(request_bytes(req, version, self._cid))
        await self.writer.drain()
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        payload = await self.reader.readexactly(size)
        resp = response_class(req).decode(struct.pack(">i", size) + payload, version=version, header=True,
                                          framed=True)
        assert resp.header.correlation_id == self._cid
        return resp

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except Exception:
            pass


def produce_request(topic: str, partition: int, records: bytes, acks: int = -1):
    from kafka.protocol.producer import ProduceRequest as P
    T = P.TopicProduceData
    return P(transactional_id=None, acks=acks, timeout_ms=10000,
             topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])])


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int = 0, min_bytes: int = 0,
                  topic_id=None, isolation_level: int = 0):
    from kafka.protocol.consumer import FetchRequest as F
    T = F.FetchTopic
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
             isolation_level=isolation_level,
             session_id=0, session_epoch=-1,
             topics=[T(topic=topic, topic_id=topic_id, partitions=[T.FetchPartition(
                 partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                 log_start_offset=-1, partition_max_bytes=1 << 20)])],
             forgotten_topics_data=[], rack_id="")


def metadata_request(*topics: str, auto_create: bool = True):
    from kafka.protocol.metadata import MetadataRequest as M
    return M(topics=[M.MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=auto_create)


def create_topic(c: WireClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    """CreateTopics over the wire (a topic must exist before offsets are committed for it, as on Kafka)."""
    from kafka.protocol.admin import CreateTopicsRequest as C
    T = C.CreatableTopic
    r = c.call(C(topics=[T(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                           configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
                 timeout_ms=10000, validate_only=False), 5)
    assert r.topics[0].error_code in (0, 36), r          # 36: TOPIC_ALREADY_EXISTS
