"""A share group's own configs (Kafka's GroupConfig on the GROUP config resource) that the coordinator uses:
its members' session timeout (`share.session.timeout.ms`) and heartbeat interval (`share.heartbeat.interval.ms`).
The broker checks and keeps them (broker/configs.py, in the data dir's topic catalog); the coordinator reads them
here at each heartbeat, over the server's group.share.session.timeout.ms / group.share.heartbeat.interval.ms, as
Kafka's GroupMetadataManager looks up a share group's timeouts in its group config before the broker's."""
from __future__ import annotations

from typing import Any

from ..config import CoordinatorConfig

SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"


def share_timeouts(topics: Any, config: CoordinatorConfig, group_id: str) -> tuple[int, int]:
    """(session timeout, heartbeat interval) of the share group's members, in ms."""
    own = getattr(topics, "dynamic_configs", {}).get("group", {}).get(group_id, {})
    return (int(own.get(SESSION_TIMEOUT, config.share_session_timeout_ms)),
            int(own.get(HEARTBEAT_INTERVAL, config.share_heartbeat_interval_ms)))
