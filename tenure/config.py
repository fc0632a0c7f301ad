"""Server configuration: one frozen value built by the CLI, the pytest fixtures or user code.

Each setting is one field of `ServerConfig`; its metadata (`setting(...)`) is what `tenure serve` shows
for it - the flag, its help and the least value it takes - so a new setting is one field here: the CLI
flag (`add_serve_flags` below, which tenure/tools/cli.py calls), its check (`check_settings`), the pytest marker's keywords
(`@pytest.mark.tenure(field=...)`) and `ServerThread(ServerConfig(...))` all follow from it."""
from __future__ import annotations

from tenure.gcpause import gc_paused

# imported with automatic collection held off (modules and classes live as long as the process: tenure/gcpause.py),
# as `import tenure.server` and `tenure serve` import
with gc_paused():
    import dataclasses
    from dataclasses import dataclass, field
    from typing import TYPE_CHECKING

    from tenure.deferred import deferred
    from tenure.protocol.apis import ServedApis, served_apis
    from tenure.protocol.framing import DEFAULT_MAX_FRAME_BYTES
    from tenure.protocol.limits import DEFAULT_MAX_REQUEST_ELEMENTS, DecodeLimits
    from tenure.protocol.releases import RELEASES, Release, release

if TYPE_CHECKING:                  # (the command line's parser: tenure/tools/cli.py imports argparse)
    import argparse

DEFAULT_ADMIN_PORT = 9644                    # `tenure serve`'s admin endpoint (tenure/control/http_server.py)
ADMIN_TOKEN_ENV = "TENURE_ADMIN_TOKEN"       # `tenure serve` and `tenure groups/fault`: the bearer token
security_acls = deferred("tenure.security.acls")    # the --acl texts' parser: when one is given (tenure/deferred.py)


def setting(default, help: str | None = None, *, least: int | None = None, choices: tuple | None = None,
            flag: str | None = None, cli_default=dataclasses.MISSING, repeat: bool = False):
    """A ServerConfig field's default and how `tenure serve` offers it: `help` (None: no flag), the flag
    (default: --field-name; a bool field True by default is offered as --no-field-name), `least` (a
    smaller value is refused), `choices`, and `cli_default` where the command line's default differs
    from the field's (the admin port: on by default for `tenure serve`, off for code and tests); `repeat`: the
    flag may be given several times (a tuple of its values)."""
    return field(default=default, metadata={"help": help, "least": least, "choices": choices, "flag": flag,
                                            "cli_default": cli_default, "repeat": repeat})


@dataclass(frozen=True)
class ServerConfig:
    """Every setting of one server, a field each (its `setting(...)` metadata: the flag, help and least value)."""
    host: str = setting("127.0.0.1", "address to bind (default 127.0.0.1)")
    port: int = setting(9092, "port to bind; 0 picks a free one (default 9092)")
    advertised_host: str | None = setting(None, "host clients are told to connect to (default: --host)")
    data_dir: str | None = setting(None, "keep every log (user topics and the group state in __consumer_offsets) "
                                         "on disk here, reloaded on start (default: in memory)")
    load_in_background: bool = setting(False, "with --data-dir: listen as soon as the logs are open and load "
                                              "__consumer_offsets on a worker thread meanwhile, as Kafka does: a "
                                              "group request for a partition still loading is answered "
                                              "COORDINATOR_LOAD_IN_PROGRESS (14), which clients retry (default: "
                                              "load, then listen)")
    fsync: str = setting("batch", "with --data-dir: when a write is durable before it is acknowledged. always: "
                                  "fsync each write; batch (default): one fsync covers every write waiting for it; "
                                  "never: leave it to the OS (survives a killed process, not a power loss)",
                         choices=("always", "batch", "never"))
    segment_bytes: int = setting(100 * 1024 * 1024, "roll a segment file when it would pass this size (default "
                                                    "100 MiB)", least=1024)
    segment_ms: int = setting(7 * 24 * 3600 * 1000, "roll a segment file older than this (default 7 days)")
    # log cleaner pass period (Kafka's log.cleaner.backoff.ms); 0 = off
    cleaner_interval_ms: int = setting(15000, "with --data-dir: run one bounded log-cleaner pass over the compacted "
                                              "topics (e.g. __consumer_offsets) this often; 0 turns the cleaner off "
                                              "(default 15000)", least=0)
    # segment bytes one cleaner pass may read (storage/compaction.py)
    cleaner_pass_bytes: int = setting(4 * 1024 * 1024, "segment bytes one log-cleaner pass may read (default 4 MiB)",
                                      least=1)
    default_partitions: int = setting(1, "partitions of auto-created topics and of CreateTopics with -1 (default 1)",
                                      least=1)
    auto_create_topics: bool = setting(True, "answer Metadata for unknown topics with UNKNOWN_TOPIC_OR_PARTITION "
                                                       "(default: a topic Metadata names is created)")
    max_frame_bytes: int = setting(DEFAULT_MAX_FRAME_BYTES, "largest request frame accepted; larger ones close the "
                                                            "connection (default 100 MiB)")
    # array elements per request (protocol/limits.py)
    max_request_elements: int = setting(DEFAULT_MAX_REQUEST_ELEMENTS, "most array elements (topics, partitions, "
                                        "groups, ... at every depth) one request may hold; a request with more "
                                        "closes the connection (default 100000)", least=1)
    # limits (docs/limits.md)
    max_connections: int | None = setting(None, "client connections open at once; more are closed right after "
                                                "accept (default 1000, or half the descriptor limit if that is "
                                                "lower)", least=1)
    # Kafka's max.connections.per.ip and max.connections.per.ip.overrides (tenure/server/listener.py)
    max_connections_per_ip: int | None = setting(None, "Kafka's max.connections.per.ip: connections one client "
                                                       "address may have open at once on a broker; more are closed "
                                                       "right after accept, so one host cannot take the whole "
                                                       "--max-connections budget (default unlimited, as Kafka; 0, "
                                                       "with overrides: only the addresses listed may connect)",
                                                 least=0)
    max_connections_per_ip_overrides: str | None = setting(None, "Kafka's max.connections.per.ip.overrides: "
                                                                 "HOST:N,... per address or host name (names "
                                                                 "resolved at start), e.g. 127.0.0.1:200 (default "
                                                                 "none)")
    max_buffered_request_bytes: int = setting(256 * 1024 * 1024, "bytes of not yet served requests all connections "
                                              "together may hold; a connection that would pass it is closed "
                                              "(default 256 MiB)", least=1)
    connections_max_idle_ms: int = setting(600000, "close a connection that sent nothing for this long while none "
                                                   "of its requests was being served (Kafka's "
                                                   "connections.max.idle.ms; default 600000; 0: never)", least=0)
    max_partitions_per_topic: int = setting(10000, "CreateTopics/CreatePartitions asking a topic to have more: "
                                                   "INVALID_PARTITIONS (default 10000)", least=1)
    max_partitions: int = setting(50000, "partitions of all topics together; a creation that would pass it: "
                                         "POLICY_VIOLATION (default 50000)", least=1)
    log_window_ms: int = setting(10000, "lines a client can cause (bad input, refused or idle connections) are "
                                        "logged at most --log-burst times per kind in this window, then counted "
                                        "(default 10000)", least=1)
    log_burst: int = setting(5, "see --log-window-ms (default 5)", least=1)
    offsets_partitions: int | None = setting(None, "partitions of __consumer_offsets (default 1 with one broker, 8 "
                                                   "with several)", least=1)
    # the cluster in one process (docs/cluster.md)
    brokers: int = setting(1, "brokers in this one process, node ids 0..N-1, each with its own listener (on "
                              "--port, --port+1, ...; all free ones with --port 0) (default 1)", least=1)
    racks: tuple[str, ...] | None = setting(None, "the rack of each broker, comma-separated, one per broker "
                                                  "(default none)")
    replication_factor: int | None = setting(None, "replicas of every partition, placed rack-aware round robin as "
                                                   "Kafka places them (metadata only: one storage) (default "
                                                   "min(3, --brokers); at most --brokers)", least=1)
    broker_ports: tuple[int, ...] | None = None     # each broker's port (a restart keeps them); None: from `port`
    retention_check_interval_ms: int = setting(300000, "log.retention.check.interval.ms: how often the segments of "
                                                       "cleanup.policy=delete topics past their retention.ms or "
                                                       "retention.bytes are removed (default 300000; 0: never)",
                                               least=0)
    log_flush_offset_checkpoint_interval_ms: int = setting(
        60000, "log.flush.offset.checkpoint.interval.ms: with --data-dir, how often each log's recovery point (below "
               "it every record was fsynced) is written to recovery-point-offset-checkpoint, as it also is after "
               "each segment roll's flush; after a kill the next start verifies only the segments from it on "
               "(default 60000; 0: only at rolls)", least=0)
    replica_selector_class: str | None = setting(None, "replica.selector.class: with org.apache.kafka.common."
                                                       "replica.RackAwareReplicaSelector a consumer with client.rack "
                                                       "is sent to a replica in its rack (preferred_read_replica, "
                                                       "KIP-392) (default none: the leader serves every fetch)",
                                                 choices=("org.apache.kafka.common.replica.RackAwareReplicaSelector",))
    # the group coordinator (Kafka's group.* broker settings)
    # Kafka's group.initial.rebalance.delay.ms is 3000; 1000 is the smallest delay at which every measured
    # group of 2-50 real-client consumers started in a loop formed in one generation (bench/initial_delay.py,
    # docs/benchmarks.md), so a test waits about 2 s for its group instead of about 6 s
    initial_rebalance_delay_ms: int = setting(1000, "group.initial.rebalance.delay.ms: how long the first rebalance "
                                              "of an empty group waits for more members, re-armed while they keep "
                                              "arriving (default %(default)s: consumers started together form one "
                                              "generation; Kafka's is 3000; 0 = no wait)")
    min_session_timeout_ms: int = setting(6000, "group.min.session.timeout.ms (default 6000)")
    max_session_timeout_ms: int = setting(1800000, "group.max.session.timeout.ms (default 1800000)")
    max_group_size: int | None = setting(None, "group.max.size (default unlimited)", least=1)
    static_expansion_timeout_ms: int | None = setting(None, "KIP-345 draft: batch new static members joining a "
                                                            "stable group into one rebalance this long after the "
                                                            "first (default off)")
    static_registration_timeout_ms: int | None = setting(None, "KIP-345 draft: replaces the session timeout of "
                                                               "static members: one whose session expired is kept "
                                                               "(offline) until the earliest offline member's last "
                                                               "heartbeat is this old, then all offline ones are "
                                                               "removed in one rebalance (default off)")
    # KIP-848 consumer groups (group.protocol=consumer)
    consumer_session_timeout_ms: int = setting(45000, "group.consumer.session.timeout.ms: a consumer group member "
                                                      "with no heartbeat this long is fenced (default 45000)", least=1)
    # 250 (Kafka 5000): a member learns it must give partitions up only at its next heartbeat, so a group settles in
    # about one interval; 250 ms is the smallest measured interval at which every group of Java and confluent-kafka
    # members (N = 2, 10, 50) settled with one epoch bump per join (bench/settle_time.py, docs/benchmarks.md)
    consumer_heartbeat_interval_ms: int = setting(250, "group.consumer.heartbeat.interval.ms: how often consumer "
                                                       "group members are told to heartbeat (default 250; Kafka's "
                                                       "5000)", least=1)
    # the transaction coordinator (docs/transactions.md)
    transaction_version: int = setting(2, "the transaction.version feature level finalized in ApiVersions: 2 "
                                          "(default, as Kafka 4.x): clients run transactions v2 (KIP-890: an epoch "
                                          "bump at every commit or abort, partitions added by Produce); 1 or 0: "
                                          "clients run transactions v1", least=0, choices=(0, 1, 2))
    # KIP-932 share groups
    share_session_timeout_ms: int = setting(45000, "group.share.session.timeout.ms: a share group member with no "
                                                   "heartbeat this long is removed (default 45000)", least=1)
    share_heartbeat_interval_ms: int = setting(5000, "group.share.heartbeat.interval.ms: how often share group "
                                                     "members are told to heartbeat (default 5000)", least=1)
    share_state_partitions: int = setting(50, "share.coordinator.state.topic.num.partitions: partitions of "
                                              "__share_group_state, made on first use (default 50, as Kafka); a data "
                                              "dir's keeps its count", least=1)
    consumer_migration_policy: str = setting("bidirectional", "group.consumer.migration.policy: online conversion "
                                                            "of a live group between the classic and the consumer "
                                                            "protocol: bidirectional (default, as Kafka 4.x), "
                                                            "upgrade, downgrade or disabled",
                                             choices=("bidirectional", "upgrade", "downgrade", "disabled"))
    # HTTP admin endpoint (tenure/control/http_server.py); None = off, 0 = any
    admin_port: int | None = setting(None, "port of the HTTP admin endpoint (groups, faults, clock, restart, "
                                           "/metrics; what `tenure groups/fault` talk to): default "
                                           f"{DEFAULT_ADMIN_PORT}, or a free one if that is in use or --port is 0; "
                                           "0 picks a free one; -1 turns it off", cli_default=None)
    # where it listens: loopback unless asked, whatever `host` is
    admin_host: str = setting("127.0.0.1", "address the admin endpoint binds, whatever --host is (default "
                                           "127.0.0.1: this machine only); another address lets other machines "
                                           "change this server: set a token")
    # bearer token every admin call but / and /health must send
    admin_token: str | None = setting(None, f"bearer token every admin call but / and /health must send (default "
                                            f"${ADMIN_TOKEN_ENV}; none: any local process may call it)")
    capture_requests: int = setting(10000, "requests (with their answers) the server keeps for inspection, the "
                                           "oldest dropped first (GET /requests; default 10000; 0: none)", least=0)
    # the event loop the server runs on (tenure/server/eventloop.py)
    event_loop: str = setting("auto", "the event loop: uvloop, asyncio (the standard library's) or auto (default: "
                                      "$TENURE_EVENT_LOOP if set, else uvloop when installed)",
                              choices=("auto", "uvloop", "asyncio"))
    # listeners and security (security/, docs/security.md)
    listeners: tuple[str, ...] | None = setting(None, "a listener NAME://HOST:PORT, repeatable (NAME: PLAINTEXT, SSL, "
                                                      "SASL_PLAINTEXT, SASL_SSL or a name of "
                                                      "--listener-security-protocol-map; HOST empty: --host; broker i "
                                                      "takes PORT+i); the first is the ready line's (default: "
                                                      "PLAINTEXT on --host/--port)", flag="--listener", repeat=True)
    listener_security_protocol_map: str | None = setting(None, "security protocol of custom listener names: "
                                                               "NAME:PROTOCOL,... (Kafka's "
                                                               "listener.security.protocol.map; default: none)")
    listener_ports: tuple[tuple[int, ...], ...] | None = None   # each listener's port per broker (a restart keeps them)
    ssl_cert_file: str | None = setting(None, "the server certificate (PEM, with its chain) of SSL and SASL_SSL "
                                              "listeners (default: one generated at start, with its CA, in --tls-dir)")
    ssl_key_file: str | None = setting(None, "the key of --ssl-cert-file (PEM; default: in --ssl-cert-file)")
    ssl_ca_file: str | None = setting(None, "the CA that signs client certificates (with --ssl-cert-file; default: "
                                            "the generated CA)")
    ssl_client_auth: str = setting("none", "client certificates on SSL listeners (Kafka's ssl.client.auth): none, "
                                           "requested or required; the principal is User: and the certificate's "
                                           "subject (default none)", choices=("none", "requested", "required"))
    tls_dir: str | None = setting(None, "where the generated CA (ca.pem) and server certificate are written and "
                                        "kept (default: DATA_DIR/tls with --data-dir, else a new temporary dir)")
    sasl_mechanisms: str = setting("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
                                   "SASL mechanisms SASL listeners enable (Kafka's sasl.enabled.mechanisms) "
                                   "(default %(default)s)")
    users: tuple[str, ...] | None = setting(None, "a SASL user NAME:PASSWORD, repeatable (PLAIN and both SCRAM "
                                                  "credentials; salted, the password is not kept; default: none)", flag="--user",
                                            repeat=True)
    users_file: str | None = setting(None, "SASL users to add at start: JSON {\"name\": \"password\"} or lines "
                                           "NAME:PASSWORD (default: none)")
    scram_iterations: int = setting(4096, "iterations of the SCRAM credentials made from --user (default 4096, "
                                          "Kafka's least)", least=4096)
    connections_max_reauth_ms: int = setting(0, "a SASL session's lifetime: the client re-authenticates before it "
                                                "ends, else its connection is closed (Kafka's "
                                                "connections.max.reauth.ms; default 0: none)", least=0)
    sasl_max_receive_bytes: int = setting(524288, "largest frame a connection may send before it has authenticated "
                                                  "(Kafka's sasl.server.max.receive.size; default 524288)", least=64)
    failed_authentication_delay_ms: int = setting(100, "a failed authentication is answered, and its connection "
                                                       "closed, this much later (Kafka's "
                                                       "connection.failed.authentication.delay.ms; default 100)",
                                                  least=0)
    oauth_jwks_file: str | None = setting(None, "OAUTHBEARER: verify signed tokens against this JWKS file (default: "
                                                "Kafka's unsecured-token validation)")
    oauth_audience: str | None = setting(None, "OAUTHBEARER with --oauth-jwks-file: the audience tokens must name "
                                                "(default: any)")
    oauth_issuer: str | None = setting(None, "OAUTHBEARER with --oauth-jwks-file: the issuer tokens must name "
                                              "(default: any)")
    # ACLs (security/, docs/security.md#acls)
    authorizer: bool = setting(False, "check every request against the ACLs with Kafka's StandardAuthorizer rules "
                                      "(default off, unless --acl, --super-user or "
                                      "--allow-everyone-if-no-acl is given: everything is allowed and the ACL APIs "
                                      "answer SECURITY_DISABLED)")
    super_users: tuple[str, ...] = setting((), "a principal (User:NAME, or NAME) allowed "
                                               "everything (Kafka's super.users); repeatable (default: none)",
                                           flag="--super-user")
    allow_everyone_if_no_acl: bool = setting(False, "a resource no ACL names is open to "
                                                    "everyone (Kafka's allow.everyone.if.no.acl.found; default: "
                                                    "refused)")
    acls: tuple[str, ...] = setting((), "an ACL created at start, 'allow|deny PRINCIPAL "
                                        "OPERATION TYPE:[prefixed:]NAME [from HOST]' (e.g. 'allow User:* read "
                                        "topic:prefixed:logs-'); repeatable (default: none)", flag="--acl")
    # the Kafka release presented (protocol/releases.py); None: tenure's whole table, as Kafka 4.3
    kafka_version: str | None = setting(None, "present this Kafka release (X.Y, 2.8 to 4.3): the API versions, "
                                              "features and behaviour of that release's brokers, as clients "
                                              "negotiate with them (default: tenure's whole table, announced as "
                                              "Kafka 4.3 with the older versions 4.0 dropped still served)",
                                      choices=tuple(RELEASES))
    admin_port_fallback: bool = False       # admin_port in use: take a free one (tenure serve's default)
    shutdown_timeout_s: float = 5.0         # a stop's bound: connections drained, tasks awaited, for at most this
    cluster_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("super_users", "acls"):        # a list (the CLI's appended flags, a marker's list) or None
            value = getattr(self, name)
            object.__setattr__(self, name, tuple([value] if isinstance(value, str) else value or ()))
        if self.acls:
            for spec in self.acls:
                try:
                    security_acls.parse_acl(spec)
                except security_acls.AclError as exc:
                    raise ValueError(f"--acl {spec!r}: {exc}") from None
        racks = self.racks
        if isinstance(racks, str):                  # the CLI's and the pytest marker's "r1,r2,r3"
            racks = tuple(r.strip() for r in racks.split(","))
            object.__setattr__(self, "racks", racks)
        if racks is not None and (len(racks) != self.brokers or not all(racks)):
            raise ValueError(f"--racks names {len(racks)} rack(s) for {self.brokers} broker(s): give one "
                             "non-empty rack per broker")
        if self.max_connections_per_ip_overrides is not None:
            parse_ip_overrides(self.max_connections_per_ip_overrides)       # ValueError naming the flag
        if self.max_connections_per_ip == 0 and not self.max_connections_per_ip_overrides:
            raise ValueError("--max-connections-per-ip 0 needs --max-connections-per-ip-overrides (the addresses "
                             "that may connect), as Kafka's max.connections.per.ip")
        if self.admin_token is not None and not self.admin_token.strip():
            raise ValueError("--admin-token is empty: give a token, or leave it out for none (then any local "
                             "process may call the admin endpoint)")
        for name in ("listeners", "users"):         # the CLI's repeated flags, the marker's lists
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, (value,))
            elif isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        from tenure.security.listeners import parse_listeners
        from tenure.security.users import parse_user
        parse_listeners(self.listeners, self.listener_security_protocol_map, self.host, self.port)   # or ValueError
        for user in self.users or ():
            parse_user(user)
        from tenure.security.sasl_names import MECHANISMS
        mechanisms = [m.strip().upper() for m in self.sasl_mechanisms.split(",") if m.strip()]
        unknown = [m for m in mechanisms if m not in MECHANISMS]
        if unknown or not mechanisms:
            raise ValueError(f"--sasl-mechanisms: {', '.join(unknown) or 'none given'}; tenure serves "
                             f"{', '.join(MECHANISMS)}")
        if self.transaction_version not in (0, 1, 2):
            raise ValueError(f"--transaction-version {self.transaction_version}: Kafka's transaction.version "
                             "levels are 0, 1 and 2")
        if self.kafka_version is not None:
            release(self.kafka_version)             # an unknown release: ValueError listing the known ones
        if self.broker_ports is not None and len(self.broker_ports) != self.brokers:
            raise ValueError(f"broker_ports names {len(self.broker_ports)} port(s) for {self.brokers} broker(s)")

    @property
    def acls_checked(self) -> bool:
        """Whether requests are checked against ACLs: --authorizer, or any of --acl, --super-user and
        --allow-everyone-if-no-acl given (they mean nothing without it)."""
        return self.authorizer or bool(self.acls or self.super_users or self.allow_everyone_if_no_acl)

    @property
    def offsets_partition_count(self) -> int:
        """__consumer_offsets' partitions: --offsets-partitions, else 1 with one broker and 8 with several."""
        if self.offsets_partitions is not None:
            return self.offsets_partitions
        return 1 if self.brokers == 1 else 8

    @property
    def replicas(self) -> int:
        """The replication factor of every partition: --replication-factor (at most the brokers), else
        min(3, brokers)."""
        return min(self.replication_factor or 3, self.brokers)

    def ports(self) -> tuple[int, ...]:
        """The port of each broker: broker_ports, else port, port+1, ... (all 0 - each a free one - with 0)."""
        if self.broker_ports is not None:
            return self.broker_ports
        return tuple(0 if self.port == 0 else self.port + i for i in range(self.brokers))

    def served_apis(self) -> ServedApis:
        """The APIs, versions and features this server presents (protocol/apis.py ServedApis)."""
        return served_apis(self.kafka_version)

    @property
    def release(self) -> Release:
        """The Kafka release presented (protocol/releases.py Release): --kafka-version, else 4.3."""
        return self.served_apis().release

    @property
    def finalized_transaction_version(self) -> int:
        """The `transaction.version` level the server finalizes and its transaction coordinator follows:
        --transaction-version, at most what the release presented finalizes (none before 4.0: transactions v1)."""
        return min(self.transaction_version, self.release.transaction_version)

    def decode_limits(self) -> DecodeLimits:
        return DecodeLimits(max_request_elements=self.max_request_elements)

    def coordinator_config(self):
        from tenure.coordinator import CoordinatorConfig
        return CoordinatorConfig(min_session_timeout_ms=self.min_session_timeout_ms,
                                 max_session_timeout_ms=self.max_session_timeout_ms,
                                 initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
                                 max_group_size=self.max_group_size,
                                 static_expansion_timeout_ms=self.static_expansion_timeout_ms,
                                 static_registration_timeout_ms=self.static_registration_timeout_ms,
                                 consumer_session_timeout_ms=self.consumer_session_timeout_ms,
                                 consumer_heartbeat_interval_ms=self.consumer_heartbeat_interval_ms,
                                 share_session_timeout_ms=self.share_session_timeout_ms,
                                 share_heartbeat_interval_ms=self.share_heartbeat_interval_ms,
                                 consumer_migration_policy=self.consumer_migration_policy,
                                 consumer_group_metadata_hash=self.release.consumer_group_metadata_hash)


def parse_ip_overrides(text: str) -> dict[str, int]:
    """--max-connections-per-ip-overrides "HOST:N,HOST:N" (Kafka's max.connections.per.ip.overrides; an IPv6
    address as [::1]:N or ::1:N) -> {host: N}; ValueError naming the flag for a malformed entry."""
    out: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, colon, count = item.rpartition(":")
        host = host.strip().removeprefix("[").removesuffix("]")
        if not colon or not host or not count.strip().isdigit():
            raise ValueError(f"--max-connections-per-ip-overrides: {item!r} is not HOST:N (e.g. 127.0.0.1:200)")
        out[host] = int(count)
    return out


# a field's type as written (this module's annotations are strings) -> the flag's argparse type
_TYPES = {"int": int, "int | None": int, "str": str, "str | None": str, "float": float,
          "tuple[str, ...] | None": str,     # racks: "r1,r2,..." (split by ServerConfig); repeated flags
          "tuple[str, ...]": str}            # a repeatable flag (--super-user, --acl): one value each time


def flag_settings() -> list[dataclasses.Field]:
    """The fields `tenure serve` offers as flags, in the order its help lists them."""
    return [f for f in dataclasses.fields(ServerConfig) if f.metadata.get("help") is not None]


def flag_of(f: dataclasses.Field) -> str:
    if f.metadata["flag"]:
        return f.metadata["flag"]
    name = f.name.replace("_", "-")
    return f"--no-{name}" if f.type == "bool" and f.default is True else f"--{name}"


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting (its name, type, default, choices and help from the field)."""
    for f in flag_settings():
        m = f.metadata
        if f.type == "bool":
            parser.add_argument(flag_of(f), dest=f.name, action="store_false" if f.default else "store_true",
                                help=m["help"])
            continue
        if str(f.type) == "tuple[str, ...]":
            parser.add_argument(flag_of(f), dest=f.name, action="append", default=None, help=m["help"],
                                metavar=flag_of(f).lstrip("-").replace("-", "_").upper())
            continue
        default = f.default if m["cli_default"] is dataclasses.MISSING else m["cli_default"]
        if m.get("repeat"):
            parser.add_argument(flag_of(f), dest=f.name, type=_TYPES[str(f.type)], action="append", default=default,
                                help=m["help"], metavar=flag_of(f).lstrip("-").upper().replace("-", "_"))
            continue
        parser.add_argument(flag_of(f), dest=f.name, type=_TYPES[str(f.type)], default=default, help=m["help"],
                            **({"choices": m["choices"]} if m["choices"] else {}))


def check_settings(values: dict) -> None:
    """Refuse (ValueError naming the flag) a setting below its least value; None passes (the default)."""
    for f in flag_settings():
        least, value = f.metadata["least"], values.get(f.name)
        if least is not None and value is not None and value < least:
            raise ValueError(f"{flag_of(f)} must be at least {least}")
