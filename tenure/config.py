"""Server configuration: one frozen value built by the CLI, the pytest fixtures or user code."""
from __future__ import annotations

from dataclasses import dataclass

from tenure.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from tenure.protocol.limits import DEFAULT_MAX_REQUEST_ELEMENTS, DecodeLimits


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    data_dir: str | None = None
    default_partitions: int = 1
    auto_create_topics: bool = True
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_request_elements: int = DEFAULT_MAX_REQUEST_ELEMENTS   # array elements per request (protocol/limits.py)
    shutdown_timeout_s: float = 5.0
    cluster_id: str | None = None
    offsets_partitions: int = 1
    admin_port: int | None = None           # HTTP admin endpoint (tenure/control/admin.py); None = off, 0 = any
    admin_host: str = "127.0.0.1"           # where it listens: loopback unless asked, whatever `host` is
    admin_token: str | None = None          # bearer token every admin call but / and /health must send
    admin_port_fallback: bool = False       # admin_port in use: take a free one (tenure serve's default)
    fsync: str = "batch"                    # always | batch | never (with data_dir)
    segment_bytes: int = 100 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    cleaner_interval_ms: int = 15000        # log cleaner pass period (Kafka's log.cleaner.backoff.ms); 0 = off
    cleaner_pass_bytes: int = 4 * 1024 * 1024   # segment bytes one cleaner pass may read (storage/compaction.py)
    # limits (docs/limits.md)
    max_connections: int | None = None      # None: 1000, or half the descriptor limit if that is lower
    max_buffered_request_bytes: int = 256 * 1024 * 1024   # partial requests buffered, all connections together
    connections_max_idle_ms: int = 600000   # Kafka's connections.max.idle.ms; 0 = never close idle ones
    max_partitions_per_topic: int = 10000   # CreateTopics/CreatePartitions above it: INVALID_PARTITIONS
    max_partitions: int = 50000             # partitions of all topics together; above it: POLICY_VIOLATION
    log_window_ms: int = 10000              # rate-limited log lines (bad input, refused connections) ...
    log_burst: int = 5                      # ... at most this many per kind per window
    # the group coordinator (Kafka's group.* broker settings)
    # Kafka's group.initial.rebalance.delay.ms is 3000; 1000 is the smallest delay at which every measured
    # group of 2-50 real-client consumers started in a loop formed in one generation (bench/initial_delay.py,
    # docs/benchmarks.md), so a test waits about 2 s for its group instead of about 6 s
    initial_rebalance_delay_ms: int = 1000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_group_size: int | None = None
    static_expansion_timeout_ms: int | None = None
    static_registration_timeout_ms: int | None = None

    def decode_limits(self) -> DecodeLimits:
        return DecodeLimits(max_request_elements=self.max_request_elements)

    def coordinator_config(self):
        from tenure.coordinator import CoordinatorConfig
        return CoordinatorConfig(min_session_timeout_ms=self.min_session_timeout_ms,
                                 max_session_timeout_ms=self.max_session_timeout_ms,
                                 initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
                                 max_group_size=self.max_group_size,
                                 static_expansion_timeout_ms=self.static_expansion_timeout_ms,
                                 static_registration_timeout_ms=self.static_registration_timeout_ms)
