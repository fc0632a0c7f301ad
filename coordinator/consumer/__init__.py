"""KIP-848 consumer groups: the coordinator's second group kind, beside classic/.

group.py holds the group value (built by the shard's replay from Kafka's consumer group records alone),
heartbeat.py the ConsumerGroupHeartbeat steps (validation, member lookup with static membership, epoch
bumps, target assignment, reconciliation, leaving, session and rebalance timers) and ConsumerGroupDescribe,
reconcile.py the per-member reconciliation, assignors.py the uniform and range server assignors, hash.py the
KIP-1101 metadata hash.
"""
