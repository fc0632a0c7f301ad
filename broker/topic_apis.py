"""The topic APIs of the `Broker` (dataplane.py): CreateTopics (all-or-nothing, partition caps, manual
assignments), DeleteTopics and CreatePartitions. A topic's partitions (replica_manager.py) are made and dropped
with it."""
from __future__ import annotations

import logging
import uuid

from tenure.protocol.acl import ALTER, CREATE, DELETE, DESCRIBE, DESCRIBE_CONFIGS, TOPIC
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode

from .admin_apis import AdminApis
from .base import resp
from .configs import RESOURCE_TOPIC
from .topics import TopicError

log = logging.getLogger("tenure.broker")

MAX_PARTITIONS_PER_REQUEST = 10000    # Kafka's cap on a CreateTopics request's partitions in all (POLICY_VIOLATION)


class TopicApis(AdminApis):
    async def create_topics(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        R = resp(19)
        results = []
        too_many = self._partitions_requested(body.topics) > MAX_PARTITIONS_PER_REQUEST
        for t in body.topics:
            configs = {c.name: c.value for c in t.configs}
            res = R.CreatableTopicResult(name=t.name, topic_id=uuid.UUID(int=0), error_code=0,
                                         error_message=None, num_partitions=-1, replication_factor=-1,
                                         configs=[])
            try:
                if too_many:                 # Kafka's rule: the whole request is refused, before anything else
                    raise TopicError(ErrorCode.POLICY_VIOLATION,
                                     "Excessively large number of partitions per request.")
                if not (ctx.allows_cluster(CREATE) or ctx.allows(CREATE, TOPIC, t.name)):
                    raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                partitions, factor = t.num_partitions, t.replication_factor
                if t.assignments:
                    partitions, factor = self.check_assignment(t)
                n = self.topics.check_create(t.name, partitions, factor, configs)
                self.configs.check(RESOURCE_TOPIC, list(configs), configs)     # the values, as Kafka does
                if body.validate_only:
                    res.num_partitions = n
                    res.replication_factor = factor if factor != -1 else self.cluster.replication_factor
                else:
                    topic = self.topics.create(t.name, partitions, factor, configs)
                    self.place_topic(t.name, factor, 0, t.assignments)
                    res.topic_id = topic.topic_id
                    res.num_partitions = len(topic.partitions)
                    res.replication_factor = self.cluster.factor_of(t.name)
                    log.info("created topic %s with %d partitions", t.name, len(topic.partitions))
                if v >= 5 and not ctx.allows(DESCRIBE_CONFIGS, TOPIC, t.name):
                    res.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif v >= 5:       # what DescribeConfigs will say of the topic
                    res.configs = [R.CreatableTopicResult.CreatableTopicConfigs(
                        name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                        is_sensitive=False) for e in self.configs.topic_entries(configs, self.answering(ctx))]
            except TopicError as exc:
                res.error_code, res.error_message = exc.code, exc.message
            results.append(res)
        return R(throttle_time_ms=0, topics=results)

    def _partitions_requested(self, topics) -> int:
        """A CreateTopics request's partitions in all, counted as Kafka counts them against its cap."""
        total = 0
        for t in topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += self.topics.default_partitions
            elif t.num_partitions > 0:
                total += t.num_partitions
        return total

    async def delete_topics(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        R = resp(20)
        wanted = [(s.name, s.topic_id) for s in body.topics] if v >= 6 else [(n, None) for n in body.topic_names]
        out = []
        for name, topic_id in wanted:
            res = R.DeletableTopicResult(name=name, topic_id=topic_id or uuid.UUID(int=0), error_code=0,
                                         error_message=None)
            try:
                if name is None and topic_id is not None:
                    topic = self.topics.by_id(topic_id)
                    if topic is None:
                        raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
                    name = res.name = topic.name
                # as Kafka: DESCRIBE first (a topic the principal may not see is not told apart from a missing
                # one), then DELETE on one that exists
                if not ctx.allows(DESCRIBE, TOPIC, name) or (self.topics.get(name) is not None
                                                             and not ctx.allows(DELETE, TOPIC, name)):
                    raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                # the catalog and the logs; the partition table drops the topic's partitions with it (and
                # wakes their long-polling fetches); the cluster table forgets its placement
                topic = self.topics.delete(name)
                self.cluster.forget(name)
                res.topic_id = topic.topic_id
                log.info("deleted topic %s", name)
            except TopicError as exc:
                res.error_code, res.error_message = exc.code, exc.message
            out.append(res)
        return R(throttle_time_ms=0, responses=out)

    async def create_partitions(self, req: Request, ctx: RequestContext):
        body = req.body
        R = resp(37)
        out = []
        for t in body.topics:
            res = R.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
            try:
                if not ctx.allows(ALTER, TOPIC, t.name):
                    raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                existing = self.topics.get(t.name)
                before = len(existing.partitions) if existing is not None else 0
                if t.assignments:
                    self.check_new_partition_assignment(t)
                self.topics.add_partitions(t.name, t.count, body.validate_only)
                if t.assignments and not body.validate_only:
                    self.place_topic(t.name, -1, before, t.assignments)
            except TopicError as exc:
                res.error_code, res.error_message = exc.code, exc.message
            out.append(res)
        return R(throttle_time_ms=0, results=out)
