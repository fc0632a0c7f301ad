"""docker/ run for real on a Docker engine: the images built with `docker build --network host`, the server
container used by confluent-kafka and the Java client through ports published on 127.0.0.1, and the compose
environment (three scaled static consumers, a consumer restart with no rebalance, a server restart on its
volume with the groups and offsets back, the audit profile's report, `down -v`). Every run has its own image
tags, compose project name and free ports. Skipped, with the reason, only where no Docker engine answers."""
from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from tests.support.clients import confluent_round_trip
from tests.support.docker import Stack, docker, free_port, http_json
from tests.support.groups import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

GROUP, TOPIC, PARTITIONS, CONSUMERS = "demo-static", "demo", 6, 3   # as docker/docker-compose.yml sets them


# ---------------------------------------------------------------------- the image
def test_server_image_is_small_non_root_and_declares_its_interface(docker_images, record_property):
    info = docker("image", "inspect", docker_images.server, "--format",
                  '{"user": {{json .Config.User}}, "volumes": {{json .Config.Volumes}}, '
                  '"ports": {{json .Config.ExposedPorts}}, "health": {{json .Config.Healthcheck}}, '
                  '"size": {{.Size}}}').stdout
    info = json.loads(info)
    assert info["user"] == "tenure"
    assert "/data" in info["volumes"]
    assert {"9092/tcp", "9644/tcp"} <= set(info["ports"])
    assert "/health" in " ".join(info["health"]["Test"])
    base_image = docker("image", "inspect", "--format", "{{.Size}}", "python:3.11-slim", check=False).stdout.strip()
    added = info["size"] - int(base_image) if base_image else None
    record_property("server_image_mb", round(info["size"] / 1e6, 1))
    record_property("added_to_python_3_11_slim_mb", None if added is None else round(added / 1e6, 1))
    record_property("build_seconds_all_three_images", round(docker_images.build_seconds, 1))
    if added is not None:
        # tenure and its dependencies (kafka-python, aiohttp, ...) on top of the Python base image
        assert added < 60e6, f"the server image adds {added / 1e6:.1f} MB to python:3.11-slim"


# ---------------------------------------------------------------------- the server container, real clients
@pytest.fixture
def server_container(docker_images):
    """The server image alone (`docker run`), on a network of its own (an engine without a default bridge
    has none), Kafka and the admin endpoint published on free ports of 127.0.0.1. The Kafka port inside is
    the published one, so the advertised 127.0.0.1:PORT works from the host."""
    name = f"tenure-test-{uuid.uuid4().hex[:10]}"
    port, admin = free_port(), free_port()
    docker("network", "create", name)
    try:
        docker("run", "-d", "--name", name, "--network", name,
               "-p", f"127.0.0.1:{port}:{port}", "-p", f"127.0.0.1:{admin}:9644",
               "-e", f"TENURE_PORT={port}", "-e", "TENURE_ADVERTISED_HOST=127.0.0.1",
               docker_images.server, "--default-partitions", "3")

        def ready():
            try:
                return http_json(f"http://127.0.0.1:{admin}/health", timeout=3) == {"status": "ok"}
            except (OSError, ValueError):
                return False
        try:
            wait_for(ready, 60, "the server container's admin endpoint on the published port", interval=0.2)
        except AssertionError:
            raise AssertionError(docker("logs", name, check=False).stderr[-3000:]) from None
        yield name, f"127.0.0.1:{port}", f"http://127.0.0.1:{admin}"
    finally:
        docker("rm", "--force", "--volumes", name, check=False)
        docker("network", "rm", name, check=False)


@pytest.mark.java
def test_server_container_serves_confluent_kafka_and_java(server_container):
    from confluent_kafka import Consumer

    from tests.support.java import run_java

    name, bootstrap, admin = server_container
    produced, consumed = confluent_round_trip(bootstrap, "ck-docker", 3)
    assert len(produced) == len(consumed) == 30
    assert sorted((p, o) for p, o, _ in produced) == sorted((p, o) for p, o, *_ in consumed)

    lines = run_java("ProduceConsume", bootstrap, "java-docker", "3", "30")
    assert [ln["type"] for ln in lines][0] == "topic_created" and lines[-1]["type"] == "done"
    java_produced = sorted((ln["partition"], ln["offset"]) for ln in lines if ln["type"] == "produced")
    java_consumed = sorted((ln["partition"], ln["offset"]) for ln in lines if ln["type"] == "consumed")
    assert len(java_produced) == 30 and java_produced == java_consumed

    # a static member through the container: it reads everything, commits, and the admin endpoint sees it
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "docker-static", "group.instance.id": "ck-1",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 10000})
    try:
        c.subscribe(["ck-docker"])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 30 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                seen += 1
        assert seen == 30
        c.commit(asynchronous=False)
        g = http_json(f"{admin}/groups/docker-static")
        assert g["state"] == "Stable" and list(g["static_members"]) == ["ck-1"]
        assert {(o["topic"], o["partition"]): o["offset"] for o in g["offsets"]} == \
            {("ck-docker", p): 10 for p in range(3)}
    finally:
        c.close()

    docker("stop", "--time", "15", name, timeout=60)     # SIGTERM reaches tenure itself (exec): exit 0
    assert docker("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "0"
    logs = docker("logs", name).stdout
    assert logs.splitlines()[0] == f"tenure listening on {bootstrap}"     # the advertised address


# ---------------------------------------------------------------------- the compose environment
@pytest.fixture(scope="module")
def stack(docker_images):
    """`docker compose up --scale consumer=3` of docker/docker-compose.yml (the compose network, ports
    published on 127.0.0.1), with the session's images; `down -v` at the end whatever happened."""
    s = Stack(docker_images)
    try:
        s.compose("up", "-d", "--no-build", "--scale", f"consumer={CONSUMERS}", "tenure", "consumer", timeout=300)
        yield s
    finally:
        s.down()


def instance_of(container_id: str) -> str:
    return "consumer-" + container_id[:12]      # docker/consumer.py's default group.instance.id


def settled(stack: Stack, timeout: float = 120) -> dict:
    """The group once it is Stable with every consumer container's instance assigned a share of the
    partitions, and still the same a moment later."""
    want = {instance_of(c) for c in stack.containers("consumer")}
    last = {}

    def check():
        g = stack.group(GROUP)
        last["view"] = g
        if not g or g["state"] != "Stable" or set(g["static_members"]) != want:
            return None
        parts = [p for m in g["members"] for ps in (m["assignment"] or {}).values() for p in ps]
        if sorted(parts) != list(range(PARTITIONS)) or any(not m["assignment"] for m in g["members"]):
            return None
        return g
    try:
        first = wait_for(check, timeout, f"group {GROUP} settled with {want}", interval=1)
        again = wait_for(check, 30, f"group {GROUP} still settled", interval=1)
    except AssertionError as e:
        raise AssertionError(f"{e}\nlast view: {last.get('view')}\n{stack.logs()}") from None
    if again["generation"] != first["generation"]:
        return settled(stack, timeout)
    return again


def by_instance(view: dict) -> dict[str, tuple[str, dict]]:
    return {m["group_instance_id"]: (m["member_id"], m["assignment"]) for m in view["members"]}


def offsets(view: dict) -> dict[tuple[str, int], int]:
    return {(o["topic"], o["partition"]): o["offset"] for o in view["offsets"]}


def test_compose_consumer_restart_is_no_rebalance(stack):
    before = settled(stack)
    assert before["rebalances"] >= 1
    rebalances = stack.rebalances_metric(GROUP)
    assert rebalances == before["rebalances"]
    victim = stack.containers("consumer")[0]
    instance = instance_of(victim)
    old_member, assignment = by_instance(before)[instance]

    docker("restart", "--time", "15", victim, timeout=120)

    def back():
        g = stack.group(GROUP)
        if g and g["state"] == "Stable" and instance in by_instance(g) and by_instance(g)[instance][0] != old_member:
            return g
        return None
    after = wait_for(back, 120, f"{instance} rejoined with a new member id", interval=1)
    assert after["generation"] == before["generation"], "the restart rebalanced the group"
    assert after["rebalances"] == before["rebalances"] and stack.rebalances_metric(GROUP) == rebalances
    assert by_instance(after)[instance][1] == assignment, "the same partitions came back"
    others = {i: v for i, v in by_instance(before).items() if i != instance}
    assert {i: v for i, v in by_instance(after).items() if i != instance} == others


def test_compose_server_restart_on_its_volume_keeps_groups_and_offsets(stack):
    settled(stack)
    # stop the consumers (static members: no LeaveGroup; their last offsets are committed on close), so
    # that the state is still while the server restarts
    stack.compose("stop", "--timeout", "15", "consumer", timeout=120)
    before = stack.group(GROUP)
    assert before["state"] == "Stable" and len(before["members"]) == CONSUMERS
    committed = offsets(before)
    assert committed and sum(committed.values()) > 0, before["offsets"]
    topics = http_json(f"{stack.admin}/groups")

    stack.compose("restart", "--timeout", "15", "tenure", timeout=120)
    wait_for(lambda: stack.group(GROUP), 90, "the restarted server's admin endpoint", interval=0.5)
    after = stack.group(GROUP)
    assert after["state"] == "Stable"
    assert after["generation"] == before["generation"]
    assert after["static_members"] == before["static_members"]
    assert by_instance(after) == by_instance(before)
    assert offsets(after) == committed
    assert [g["group_id"] for g in http_json(f"{stack.admin}/groups")] == [g["group_id"] for g in topics]
    assert after["rebalances"] == 0, "a new server process: counters start again"

    # the consumers come back one by one (same containers, same instance ids) within their session: no
    # rebalance. (All three at once, kafka-python's restarted leader now and then rejoins a second time
    # with its member id, which is a rebalance in Kafka's rules too: `leader_rejoined`.)
    old = {i: m for i, (m, _) in by_instance(before).items()}
    for container in stack.containers("consumer"):
        instance = instance_of(container)
        docker("start", container, timeout=60)

        def rejoined(instance=instance):
            g = stack.group(GROUP)
            if g and g["state"] == "Stable" and by_instance(g).get(instance, (old[instance],))[0] != old[instance]:
                return g
            return None
        wait_for(rejoined, 120, f"{instance} rejoined", interval=1)
    back = stack.group(GROUP)
    assert all(by_instance(back)[i][0] != m for i, m in old.items())
    assert (back["generation"], back["rebalance_causes"]) == (before["generation"], {}), stack.logs()
    assert {i: a for i, (_, a) in by_instance(back).items()} == {i: a for i, (_, a) in by_instance(before).items()}


def test_compose_audit_profile_writes_report(stack, tmp_path):
    import pyarrow.parquet as pq

    from tenure.audit.report import slug

    settled(stack)
    r = stack.compose("run", "--rm", "audit", timeout=900)
    assert "member_map_history" in r.stdout + r.stderr
    out = tmp_path / "reports"
    out.mkdir()
    stack.compose("run", "--rm", "--user", f"{os.getuid()}:{os.getgid()}", "-v", f"{out}:/out", "audit",
                  "cp", "-r", "/reports/.", "/out/", timeout=120)
    report = out / "report.html"
    assert report.is_file()
    page = report.read_text()
    history = pq.read_table(out / "member_map_history").to_pylist()
    instances = {instance_of(c) for c in stack.containers("consumer")}
    assert {row["instance_id"] for row in history if row["group"] == GROUP} == instances
    # the report draws a timeline lane for each consumer's instance id
    for iid in instances:
        assert f'id="lane-{slug(GROUP, iid)}"' in page, iid


def test_compose_down_removes_containers_volumes_and_network(stack):
    assert stack.leftovers()["volumes"], "the stack has its volumes before down"
    r = stack.down()
    assert r.returncode == 0, r.stderr
    assert stack.leftovers() == {"containers": [], "volumes": [], "networks": []}
