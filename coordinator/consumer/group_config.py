"""A consumer group's own configs (Kafka's GroupConfig on the GROUP config resource): its members' session
timeout (`consumer.session.timeout.ms`) and heartbeat interval (`consumer.heartbeat.interval.ms`), set through
IncrementalAlterConfigs/AlterConfigs and described by DescribeConfigs. The broker checks and keeps them (the
data dir's topic catalog holds them, as Kafka's controller keeps them in its metadata log: broker/configs.py,
broker/topics.py); the coordinator reads them here, at each heartbeat, over the server's
group.consumer.session.timeout.ms / group.consumer.heartbeat.interval.ms. Kafka's GroupConfig has no
assignor: a consumer group's assignor is the one its members ask for (`group.remote.assignor`)."""
from __future__ import annotations

from typing import Any

from ..config import CoordinatorConfig

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"


def _overrides(topics: Any, group_id: str) -> dict[str, str]:
    """The group's altered configs, as the topic table keeps them (a table without configs: none)."""
    return getattr(topics, "dynamic_configs", {}).get("group", {}).get(group_id, {})


def consumer_timeouts(topics: Any, config: CoordinatorConfig, group_id: str) -> tuple[int, int]:
    """(session timeout, heartbeat interval) of the group's consumer-protocol members, in ms."""
    own = _overrides(topics, group_id)
    return (int(own.get(SESSION_TIMEOUT, config.consumer_session_timeout_ms)),
            int(own.get(HEARTBEAT_INTERVAL, config.consumer_heartbeat_interval_ms)))
