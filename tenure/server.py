"""The asyncio shell: accept connections, move frames to the sans-IO codec and the handlers, write
responses back in request order. Nothing here knows Kafka semantics beyond "one request, at most one
response, in order" - that lives in protocol/, broker/ and coordinator/.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import threading

from tenure.broker.dataplane import Broker, Node
from tenure.broker.topics import TopicRegistry
from tenure.coordinator.classic import GroupCoordinator
from tenure.protocol.codec import (
    UnsupportedApiVersions, decode_request, encode_response, encode_unsupported_api_versions,
)
from tenure.protocol.errors import ClientProtocolError
from tenure.protocol.framing import FrameDecoder
from tenure.storage.compaction import CleanStats, CompactionPolicy, Compactor, is_compacted
from tenure.storage.datadir import DataDir
from tenure.storage.durability import Durability
from tenure.storage.segments import LogConfig, SegmentLog

from .config import ServerConfig
from .runtime import GROUP_APIS, OFFSETS_TOPIC, CoordinatorRuntime

log = logging.getLogger("tenure.server")
READ_CHUNK = 256 * 1024


class Server:
    def __init__(self, config: ServerConfig = ServerConfig()) -> None:
        self.config = config
        self.node = Node(config.advertised_host or config.host, config.port)
        self.durability = Durability(config.fsync if config.data_dir else "never")
        self.data: DataDir | None = None
        self._cleaner_task: asyncio.Task | None = None   # the log cleaner (see "log cleaner" below)
        self._cleaner_lock = asyncio.Lock()
        self._cleaner_next = 0
        self._compactor: Compactor | None = None
        self.cleaner_stats = CleanStats()                 # what the log cleaner has done since start
        try:
            self._open(config)
        except BaseException:
            if self.data is not None:              # release the data dir (its lock) for a retry
                for plog in self.data.logs.values():
                    plog.close()
                self.data.close()
            raise

    def _open(self, config: ServerConfig) -> None:
        if config.data_dir is not None:
            self.data = DataDir.open(config.data_dir, LogConfig(segment_bytes=config.segment_bytes,
                                                                segment_ms=config.segment_ms))
            self.topics = TopicRegistry(config.default_partitions, self.data.open_log, self.data.catalog)
            self.topics.load()                     # opens (and verifies) every log; refuses before any cut
            self.data.finish_recovery()
            cluster_id = config.cluster_id or self.data.cluster_id()
        else:
            self.topics = TopicRegistry(config.default_partitions)
            cluster_id = config.cluster_id
        self.broker = Broker(self.node, self.topics, cluster_id=cluster_id,
                             auto_create_topics=config.auto_create_topics, durability=self.durability)
        self.handlers = dict(self.broker.handlers)
        offsets = self.topics.get(OFFSETS_TOPIC)
        if offsets is None:
            offsets = self.topics.create(OFFSETS_TOPIC, config.offsets_partitions, internal=True,
                                         configs={"cleanup.policy": "compact"})
        elif len(offsets.partitions) != config.offsets_partitions:
            log.warning("%s keeps its %d partition(s) from the data dir (--offsets-partitions %d ignored: "
                        "groups map to partitions by that count)", OFFSETS_TOPIC, len(offsets.partitions),
                        config.offsets_partitions)
        self.coordinator = GroupCoordinator(config.coordinator_config())
        self.stop_requested = asyncio.Event()
        self.fatal_error: BaseException | None = None
        self.runtime = CoordinatorRuntime(self.coordinator, offsets, self.broker, durability=self.durability,
                                          on_fatal=self._fatal)
        self.load_report = self.runtime.load()
        if self.data is not None:
            r = self.load_report
            log.info("loaded %s: %d record(s) in %d batch(es), %d group(s), in %.3fs (%d latest per key "
                     "replayed)", OFFSETS_TOPIC, r.records, r.batches, r.groups, r.seconds, r.replayed)
        self._server: asyncio.base_events.Server | None = None
        self._conns: dict[int, asyncio.Task] = {}
        self._ids = itertools.count(1)
        self.port: int | None = None
        self._admin = None                         # the HTTP admin endpoint's runner (tenure/admin.py)
        self.admin_port: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.node.host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.config.host, self.config.port,
                                                  reuse_address=True, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self.node.port = self.port
        self.runtime.start_timers()
        if self.data is not None and self.config.cleaner_interval_ms > 0:
            self._cleaner_task = asyncio.get_running_loop().create_task(self._cleaner_loop())
        if self.config.admin_port is not None:
            from .admin import serve_admin
            self._admin, self.admin_port = await serve_admin(self, self.config.host, self.config.admin_port)
            log.info("admin endpoint on http://%s:%d", self.config.host, self.admin_port)

    def _fatal(self, exc: BaseException) -> None:
        self.fatal_error = exc
        self.stop_requested.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn_id = next(self._ids)
        self._conns[conn_id] = asyncio.current_task()
        peer = writer.get_extra_info("peername")
        client_host = "/" + (peer[0] if peer else "unknown")
        try:
            await self._serve(conn_id, peer, client_host, reader, writer)
        except asyncio.CancelledError:
            pass
        except (ConnectionError, OSError) as exc:
            log.debug("connection %d from %s: %s", conn_id, peer, exc)
        except Exception:
            log.exception("connection %d from %s: internal error; closing it", conn_id, peer)
        finally:
            self._conns.pop(conn_id, None)
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            except (Exception, asyncio.CancelledError):
                pass

    async def _serve(self, conn_id: int, peer, client_host: str, reader, writer) -> None:
        decoder = FrameDecoder(self.config.max_frame_bytes)
        while True:
            data = await reader.read(READ_CHUNK)
            if not data:
                return
            try:
                frames = decoder.feed(data)
                for payload in frames:
                    req = decode_request(payload)
                    if isinstance(req, UnsupportedApiVersions):
                        log.info("connection %d: ApiVersions v%d is not served; answering v0 with error 35",
                                 conn_id, req.api_version)
                        writer.write(encode_unsupported_api_versions(req))
                        await writer.drain()
                        continue
                    if req.api_key in GROUP_APIS:
                        body = await self.runtime.handle(req, client_host)
                    else:
                        body = await self.handlers[req.api_key](req)
                    if body is not None:
                        writer.write(encode_response(req, body))
                        await writer.drain()
            except ClientProtocolError as exc:
                log.warning("connection %d from %s: closing: %s", conn_id, peer, exc)
                return

    # ------------------------------------------------------------------ log cleaner (storage/compaction.py)
    # With --data-dir, every cleaner_interval_ms one bounded pass (cleaner_pass_bytes of segment reads in
    # all) over the partitions of compacted topics, round robin; parsing runs on a worker thread, every
    # file and segment-list change on this loop. `compact_now` cleans until there is nothing left to do.
    def _compacted_logs(self) -> list[tuple[SegmentLog, CompactionPolicy]]:
        out = []
        for topic in self.topics.all():
            if is_compacted(topic.config("cleanup.policy")):
                policy = CompactionPolicy.from_configs(topic.config)
                out += [(plog, policy) for plog in topic.partitions if isinstance(plog, SegmentLog)]
        return out

    @property
    def compactor(self) -> Compactor:
        if self._compactor is None:
            self._compactor = Compactor(clock_ms=self.runtime.clock_ms,
                                        pass_bytes=self.config.cleaner_pass_bytes)
        return self._compactor

    async def _clean_pass(self, budget: int | None) -> CleanStats:
        """One pass over the compacted logs, starting where the last pass stopped."""
        total = CleanStats()
        async with self._cleaner_lock:
            logs = self._compacted_logs()
            for k in range(len(logs)):
                i = (self._cleaner_next + k) % len(logs)
                left = None if budget is None else budget - total.bytes_read
                if left is not None and left <= 0:
                    total.more = True
                    self._cleaner_next = i
                    break
                plog, policy = logs[i]
                total += await self.compactor.clean_async(plog, policy, 1 << 62 if left is None else left)
        self.cleaner_stats += total
        return total

    async def _cleaner_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.cleaner_interval_ms / 1000)
            try:
                st = await self._clean_pass(self.config.cleaner_pass_bytes)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner pass failed; the next one runs in %d ms",
                              self.config.cleaner_interval_ms)
                continue
            if st.groups_cleaned:
                log.debug("log cleaner: %d segment(s) -> %d, %d -> %d byte(s), %d tombstone(s) dropped",
                          st.segments_before, st.segments_after, st.bytes_before, st.bytes_after,
                          st.tombstones_dropped)

    async def compact_now(self) -> CleanStats:
        """Clean every compacted log until a pass finds nothing to do (call on the server's loop)."""
        total = CleanStats()
        while True:
            st = await self._clean_pass(None)
            total += st
            if not st.did_work:
                return total
    # ------------------------------------------------------------------ end of log cleaner

    def force_rebalance(self, group_id: str) -> None:
        """Start one rebalance of a static group now (the KIP-345 draft's forceStaticRebalance).
        Raises tenure.coordinator.classic.AdminError if the group is unknown, already rebalancing,
        empty, or has dynamic members. Call on the server's loop (ServerThread.force_rebalance does)."""
        self.runtime.apply(self.coordinator.force_rebalance(group_id, self.runtime.clock_ms()))

    async def close(self) -> None:
        if self._cleaner_task is not None:          # stop the log cleaner before its logs close
            self._cleaner_task.cancel()
            await asyncio.wait([self._cleaner_task], timeout=self.config.shutdown_timeout_s)
            self._cleaner_task = None
        self.runtime.close()
        if self._admin is not None:
            await self._admin.cleanup()
            self._admin = None
        if self._server is not None:
            self._server.close()
        tasks = list(self._conns.values())
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.config.shutdown_timeout_s)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), self.config.shutdown_timeout_s)
            except asyncio.TimeoutError:
                log.warning("listener did not close within %.1fs", self.config.shutdown_timeout_s)
        if self.runtime._syncing:
            await asyncio.wait(list(self.runtime._syncing), timeout=self.config.shutdown_timeout_s)
        for topic in self.topics.all():
            for plog in topic.partitions:
                if self.fatal_error is None and getattr(plog, "flush", None) is not None:
                    try:
                        plog.flush()
                    except OSError as exc:
                        log.error("flushing %s at shutdown: %s", getattr(plog, "name", topic.name), exc)
                plog.close()
        if self.data is not None:
            self.data.close()


class ServerThread:
    """An in-process server on its own event loop thread: for tests driving synchronous clients."""

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config or ServerConfig(port=0)
        self.loop = asyncio.new_event_loop()
        self.server: Server | None = None
        self._thread = threading.Thread(target=self._run, name="tenure-server", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.server = Server(self.config)
            self.loop.run_until_complete(self.server.start())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.server.close())
        self.loop.close()

    def start(self) -> "ServerThread":
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    @property
    def bootstrap(self) -> str:
        assert self.server is not None
        return self.server.bootstrap

    @property
    def port(self) -> int:
        assert self.server is not None and self.server.port is not None
        return self.server.port

    def call(self, fn, *args):
        """Run fn(*args) on the server's loop and return its result (for inspection in tests)."""
        async def run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def force_rebalance(self, group_id: str) -> None:
        assert self.server is not None
        self.call(self.server.force_rebalance, group_id)

    def compact_now(self) -> CleanStats:
        """Server.compact_now on the server's loop (log cleaner; for tests)."""
        assert self.server is not None
        return asyncio.run_coroutine_threadsafe(self.server.compact_now(), self.loop).result(120)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
