"""An example static-membership (KIP-345) consumer for the compose environment (docker/docker-compose.yml).

It subscribes to TOPIC in GROUP_ID with a stable group.instance.id and prints one line each time its
assignment or generation changes:

    instance=consumer-3f2a9c1b04de generation=2 member=consumer-3f2a...-<uuid> assigned=demo:0,1

Restart it (docker restart ..., or SIGTERM and start again) within SESSION_TIMEOUT_MS and the group does
not rebalance: it comes back with a new member id, the same generation and the same partitions.
It runs until SIGTERM/SIGINT; a static member's close() sends no LeaveGroup.

Environment (all optional):
    BOOTSTRAP_SERVERS   tenure:9092
    TOPIC               demo          created with PARTITIONS partitions if missing
    PARTITIONS          6
    GROUP_ID            demo-static
    GROUP_INSTANCE_ID   default: consumer-<container id> (stable across restarts of the container, also
                        under network_mode: host), else consumer-<hostname>
    SESSION_TIMEOUT_MS  30000
    PRODUCE_INTERVAL_S  1.0           send one record this often (0: do not produce)
    SECURITY_PROTOCOL   PLAINTEXT     or SSL, SASL_PLAINTEXT, SASL_SSL (docker-compose.sasl.yml)
    SASL_MECHANISM      PLAIN         with SASL_*: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    SASL_USERNAME, SASL_PASSWORD      with SASL_*
    SSL_CAFILE                        with SSL / SASL_SSL: the CA certificate to trust (the server's ca.pem)
"""
from __future__ import annotations

import os
import re
import signal
import socket
import sys
import time

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError

TOPIC_ALREADY_EXISTS = 36


def default_instance_id() -> str:
    """consumer-<first 12 hex digits of the container id>, read from the bind mounts Docker makes for
    /etc/hostname etc. (the hostname is the host's own under network_mode: host), else the hostname."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            m = re.search(r"/containers/([0-9a-f]{64})/", f.read())
        if m:
            return "consumer-" + m.group(1)[:12]
    except OSError:
        pass
    return "consumer-" + socket.gethostname()


def security() -> dict:
    """The clients' security settings from the environment (none for PLAINTEXT)."""
    protocol = os.environ.get("SECURITY_PROTOCOL", "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return {}
    out: dict = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        out["ssl_cafile"] = os.environ.get("SSL_CAFILE") or None
    if protocol.startswith("SASL_"):
        out.update(sasl_mechanism=os.environ.get("SASL_MECHANISM", "PLAIN"),
                   sasl_plain_username=os.environ.get("SASL_USERNAME"),
                   sasl_plain_password=os.environ.get("SASL_PASSWORD"))
    return out


def wait_for_file(path: str | None, deadline: float) -> None:
    """The CA file the server writes at its start (a shared volume): bounded wait."""
    while path and not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} did not appear")
        time.sleep(0.5)


def ensure_topic(bootstrap: str, topic: str, partitions: int, deadline: float) -> None:
    while True:
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="demo-consumer-admin", **security())
            break
        except (KafkaTimeoutError, KafkaConnectionError):     # the server is not up (yet): bounded retry
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    try:
        result = admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                                     raise_errors=False)
        for t in result["topics"]:
            if t["error_code"] not in (0, TOPIC_ALREADY_EXISTS):
                raise SystemExit(f"cannot create topic {topic}: error {t['error_code']} {t.get('error_message')}")
    finally:
        admin.close()


def main() -> int:
    bootstrap = os.environ.get("BOOTSTRAP_SERVERS", "tenure:9092")
    topic = os.environ.get("TOPIC", "demo")
    group = os.environ.get("GROUP_ID", "demo-static")
    instance = os.environ.get("GROUP_INSTANCE_ID") or default_instance_id()
    interval = float(os.environ.get("PRODUCE_INTERVAL_S", "1.0"))

    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))

    print(f"instance={instance} starting: group={group} topic={topic} bootstrap={bootstrap}", flush=True)
    wait_for_file(security().get("ssl_cafile"), time.monotonic() + 60)
    ensure_topic(bootstrap, topic, int(os.environ.get("PARTITIONS", "6")), time.monotonic() + 60)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, group_instance_id=instance, client_id=instance,
        session_timeout_ms=int(os.environ.get("SESSION_TIMEOUT_MS", "30000")), heartbeat_interval_ms=3000,
        auto_offset_reset="earliest", **security())

    class Log(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            # called after every join, with the generation already set; one line per (re)join
            meta = consumer.group_metadata()
            parts: dict[str, list[str]] = {}
            for tp in sorted(consumer.assignment()):
                parts.setdefault(tp.topic, []).append(str(tp.partition))
            text = " ".join(f"{t}:{','.join(ps)}" for t, ps in sorted(parts.items())) or "-"
            print(f"instance={instance} generation={meta.generation_id} member={meta.member_id} "
                  f"assigned={text}", flush=True)

    consumer.subscribe([topic], listener=Log())
    consumer.topics()   # fill the metadata snapshot before the first join (kafka-python 3.0.12 rejoin bug)
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=instance + "-producer",
                             **security()) if interval > 0 else None

    consumed, sent, next_send = 0, 0, time.monotonic()
    while not stop:
        try:
            batches = consumer.poll(timeout_ms=200)
        except KafkaError as exc:
            print(f"instance={instance} poll error: {exc!r}", file=sys.stderr, flush=True)
            time.sleep(0.5)
            continue
        consumed += sum(len(records) for records in batches.values())
        if producer is not None and time.monotonic() >= next_send:
            producer.send(topic, f"{instance} #{sent}".encode())
            sent, next_send = sent + 1, time.monotonic() + interval

    print(f"instance={instance} stopping: consumed={consumed} produced={sent}", flush=True)
    # bounded even when the server is already gone; a static member's close() sends no LeaveGroup, so a
    # restart within the session timeout is no rebalance
    try:
        if producer is not None:
            producer.close(timeout=2)
    except KafkaError as exc:
        print(f"instance={instance} producer close: {exc!r}", file=sys.stderr, flush=True)
    consumer.close(timeout_ms=3000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
