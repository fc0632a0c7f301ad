"""KIP-932 share groups: the coordinator's third group kind, beside classic/ and consumer/.

group.py holds the group value (built by the shard's replay from Kafka's share group records alone) and the
replay of those records, assignor.py the simple assignor (a partition may go to several members),
heartbeat.py the ShareGroupHeartbeat steps and the kind's rules for the offsets and admin parts of a shard,
describe.py ShareGroupDescribe and the group's read model. The records a share group hands out live with the
data, in the broker's share partitions (broker/share.py).
"""
