import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import java.util.Optional;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupResult;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Java Admin (and a producer) operations for the group tests, one subcommand per run.
 *
 * Usage: AdminOps BOOTSTRAP COMMAND ARGS... [-- COMMAND ARGS...]...
 *   Several commands separated by "--" run in order with one Admin client (one JVM start).
 *   create-topic TOPIC PARTITIONS        -> {"type":"topic_created",...}
 *   produce TOPIC PARTITIONS PER_PARTITION [PREFIX]
 *                                        -> {"type":"produced","partition":p,"count":n,"last_offset":o} per partition
 *   describe-many PREFIX N GROUP...      -> {"type":"described_many","asked":..,"states":{group: state},
 *                                           "errors":{exception: count}}: Admin.describeConsumerGroups of the N
 *                                           ids PREFIX00000.. and the GROUPs in one call (one request per API);
 *                                           states are those of the GROUPs
 *   describe GROUP...                    -> {"type":"group","group":..,"state":..,"assignor":..,"simple":..,
 *                                             "members":[{"member_id","instance_id","client_id","host","partitions"}]}
 *   list-groups                          -> {"type":"groups","groups":[{"group","state","protocol","type"}]}
 *   list-offsets GROUP                   -> {"type":"offsets","group":..,"offsets":[{"topic","partition","offset","metadata"}]}
 *   alter-offsets GROUP TOPIC P=OFF...   -> {"type":"altered"} | {"type":"alter_error",...}
 *   delete-groups GROUP...               -> {"type":"deleted","group":g} | {"type":"delete_error","group":g,...} each
 *   remove-members GROUP INSTANCE...     -> {"type":"removed","instance":i} | {"type":"remove_error","instance":i,...}
 *                                           each, then {"type":"remove_all","error":null|exception}
 *   remove-all-members GROUP             -> {"type":"remove_all","error":null|exception}
 *   delete-topics TOPIC...               -> {"type":"topic_deleted","topic":t} | {"type":"topic_delete_error","topic":t,...} each
 *   create-partitions TOPIC TOTAL        -> {"type":"partitions_created",...} | {"type":"partitions_error","topic":t,...}
 *   create-assigned TOPIC B[,B][;B...]   -> {"type":"create_assigned","error":null|"failed",...} (replicas per partition)
 *   describe-configs TYPE NAME [KEY...]  -> {"type":"configs","entries":[{name,value,source,read_only,type,doc,synonyms}]}
 *   alter-config TYPE NAME OP KEY [VALUE] [validate] -> {"type":"altered_config","error":null|"failed",...}
 *   delete-records TOPIC P OFFSET        -> {"type":"deleted_records","low_watermark":n} | delete_records_error,
 *                                           then {"type":"earliest","offset":n}
 *   log-dirs                             -> {"type":"log_dir","path",..,"partitions":[{topic,partition,size,lag}]} each
 *   describe-topics TOPIC...             -> {"type":"topic","topic",..,"partitions":[{partition,leader,replicas,isr}]}
 *   elect PREFERRED|UNCLEAN TOPIC P      -> {"type":"elected","error":null|"failed",...}
 *   reassign TOPIC P B[,B]|cancel        -> {"type":"reassigned",...} then {"type":"ongoing","count":n}
 *   authorized-ops TOPIC GROUP           -> {"type":"authorized_ops","cluster":[..],"topic":[..],"group":[..]}
 *                                           (sorted AclOperation names, each asked with includeAuthorizedOperations)
 * Expected per-item errors are reported as *_error lines with exit 0 ("exception" = the cause's
 * class name); anything else prints {"type":"error",...} and exits 1.
 */
public class AdminOps {
    static final int TIMEOUT_MS = 15000;

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Throwable t) {
            Json.error(t);
            System.exit(1);
        }
    }

    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", String.valueOf(TIMEOUT_MS));
        p.put("default.api.timeout.ms", String.valueOf(TIMEOUT_MS));
        return p;
    }

    static Throwable cause(Throwable t) {
        return (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
    }

    static Json err(Json j, Throwable t) {
        Throwable c = cause(t);
        return j.put("exception", c.getClass().getName()).put("message", String.valueOf(c.getMessage()));
    }

    static <T> Throwable failure(KafkaFuture<T> f) {
        try {
            f.get();
            return null;
        } catch (Exception e) {
            return cause(e);
        }
    }

    static int run(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: AdminOps BOOTSTRAP COMMAND ARGS... [-- COMMAND ARGS...]...");
            return 2;
        }
        String bootstrap = args[0];
        List<List<String>> commands = new ArrayList<>();
        List<String> cur = new ArrayList<>();
        for (String a : Arrays.asList(args).subList(1, args.length)) {
            if (a.equals("--")) {
                if (!cur.isEmpty()) commands.add(cur);
                cur = new ArrayList<>();
            } else {
                cur.add(a);
            }
        }
        if (!cur.isEmpty()) commands.add(cur);
        try (Admin admin = Admin.create(base(bootstrap))) {
            for (List<String> c : commands) {
                int rc = c.get(0).equals("produce")
                    ? produce(bootstrap, c.subList(1, c.size()))
                    : one(admin, c.get(0), c.subList(1, c.size()));
                if (rc != 0) return rc;
            }
        }
        return 0;
    }

    static List<Object> names(Set<AclOperation> ops) {
        List<Object> out = Json.list();
        if (ops == null) return null;
        List<String> sorted = new ArrayList<>();
        for (AclOperation op : ops) sorted.add(op.name());
        Collections.sort(sorted);
        out.addAll(sorted);
        return out;
    }

    static int one(Admin admin, String cmd, List<String> rest) throws Exception {
        switch (cmd) {
            case "authorized-ops": {
                String topic = rest.get(0), group = rest.get(1);
                Set<AclOperation> cluster = admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations().get();
                Set<AclOperation> topicOps = admin.describeTopics(Collections.singletonList(topic),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true))
                    .allTopicNames().get().get(topic).authorizedOperations();
                Set<AclOperation> groupOps = admin.describeConsumerGroups(Collections.singletonList(group),
                    new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true))
                    .all().get().get(group).authorizedOperations();
                Json.obj("type", "authorized_ops", "cluster", names(cluster), "topic", names(topicOps),
                         "group", names(groupOps)).print();
                return 0;
            }
            case "describe-features": {        // Admin.describeFeatures (ApiVersions): supported, finalized, epoch
                FeatureMetadata fm = admin.describeFeatures().featureMetadata().get();
                List<Object> supported = new ArrayList<>();
                for (Map.Entry<String, SupportedVersionRange> e : new java.util.TreeMap<>(fm.supportedFeatures()).entrySet())
                    supported.addAll(Arrays.asList(e.getKey(), Arrays.asList((Object) (int) e.getValue().minVersion(),
                                                                             (int) e.getValue().maxVersion())));
                List<Object> finalized = new ArrayList<>();
                for (Map.Entry<String, FinalizedVersionRange> e : new java.util.TreeMap<>(fm.finalizedFeatures()).entrySet())
                    finalized.addAll(Arrays.asList(e.getKey(), (int) e.getValue().maxVersionLevel()));
                Json.obj("type", "features", "supported", Json.obj(supported.toArray()),
                         "finalized", Json.obj(finalized.toArray()),
                         "epoch", fm.finalizedFeaturesEpoch().orElse(-1L)).print();
                return 0;
            }
            case "create-topic": {
                String topic = rest.get(0);
                int n = Integer.parseInt(rest.get(1));
                admin.createTopics(Collections.singletonList(new NewTopic(topic, n, (short) 1))).all().get();
                Json.obj("type", "topic_created", "topic", topic, "partitions", n).print();
                return 0;
            }
            case "describe-many": {
                List<String> ids = new ArrayList<>();
                int n = Integer.parseInt(rest.get(1));
                for (int i = 0; i < n; i++) ids.add(String.format("%s%05d", rest.get(0), i));
                List<String> named = rest.subList(2, rest.size());
                ids.addAll(named);
                Map<String, KafkaFuture<ConsumerGroupDescription>> got =
                    admin.describeConsumerGroups(ids).describedGroups();
                Json states = Json.obj();
                Map<String, Integer> errors = new HashMap<>();
                for (String g : ids) {
                    Throwable t = failure(got.get(g));
                    if (t != null) {
                        errors.merge(t.getClass().getSimpleName(), 1, Integer::sum);
                    } else if (named.contains(g)) {
                        states.put(g, String.valueOf(got.get(g).get().groupState()));
                    }
                }
                Json counts = Json.obj();
                for (Map.Entry<String, Integer> e : errors.entrySet()) counts.put(e.getKey(), e.getValue());
                Json.obj("type", "described_many", "asked", got.size(), "states", states, "errors", counts).print();
                return 0;
            }
            case "describe": {
                Map<String, ConsumerGroupDescription> all = admin.describeConsumerGroups(rest).all().get();
                for (String g : rest) {
                    ConsumerGroupDescription d = all.get(g);
                    List<Object> members = Json.list();
                    for (MemberDescription m : d.members()) {
                        List<Integer> ps = new ArrayList<>();
                        for (TopicPartition tp : m.assignment().topicPartitions()) ps.add(tp.partition());
                        Collections.sort(ps);
                        members.add(Json.obj("member_id", m.consumerId(),
                            "instance_id", m.groupInstanceId().orElse(null),
                            "client_id", m.clientId(), "host", m.host(),
                            "partitions", new ArrayList<Object>(ps)));
                    }
                    Json.obj("type", "group", "group", d.groupId(), "state", String.valueOf(d.groupState()),
                             "assignor", d.partitionAssignor(), "simple", d.isSimpleConsumerGroup(),
                             "members", members).print();
                }
                return 0;
            }
            case "list-groups": {
                List<Object> gs = Json.list();
                for (GroupListing l : admin.listGroups().all().get()) {
                    gs.add(Json.obj("group", l.groupId(),
                        "state", l.groupState().map(String::valueOf).orElse(null),
                        "type", l.type().map(String::valueOf).orElse(null),
                        "protocol", l.protocol()));
                }
                Json.obj("type", "groups", "groups", gs).print();
                return 0;
            }
            case "list-offsets": {
                String g = rest.get(0);
                Map<TopicPartition, OffsetAndMetadata> offs =
                    admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
                List<Object> out = Json.list();
                List<TopicPartition> keys = new ArrayList<>(offs.keySet());
                keys.sort((a, b) -> a.topic().equals(b.topic())
                    ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
                for (TopicPartition tp : keys) {
                    OffsetAndMetadata om = offs.get(tp);
                    out.add(Json.obj("topic", tp.topic(), "partition", tp.partition(),
                        "offset", om == null ? null : om.offset(),
                        "metadata", om == null ? null : om.metadata()));
                }
                Json.obj("type", "offsets", "group", g, "offsets", out).print();
                return 0;
            }
            case "alter-offsets": {
                String g = rest.get(0);
                String topic = rest.get(1);
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                for (String kv : rest.subList(2, rest.size())) {
                    String[] parts = kv.split("=", 2);
                    offs.put(new TopicPartition(topic, Integer.parseInt(parts[0])),
                             new OffsetAndMetadata(Long.parseLong(parts[1]), "altered"));
                }
                Throwable t = failure(admin.alterConsumerGroupOffsets(g, offs).all());
                if (t == null) Json.obj("type", "altered", "group", g).print();
                else err(Json.obj("type", "alter_error", "group", g), t).print();
                return 0;
            }
            case "delete-groups": {
                Map<String, KafkaFuture<Void>> res = admin.deleteConsumerGroups(rest).deletedGroups();
                for (String g : rest) {
                    Throwable t = failure(res.get(g));
                    if (t == null) Json.obj("type", "deleted", "group", g).print();
                    else err(Json.obj("type", "delete_error", "group", g), t).print();
                }
                return 0;
            }
            case "remove-members": {
                String g = rest.get(0);
                List<MemberToRemove> ms = new ArrayList<>();
                for (String inst : rest.subList(1, rest.size())) ms.add(new MemberToRemove(inst));
                RemoveMembersFromConsumerGroupResult res = admin.removeMembersFromConsumerGroup(
                    g, new RemoveMembersFromConsumerGroupOptions(ms));
                for (MemberToRemove m : ms) {
                    Throwable t = failure(res.memberResult(m));
                    if (t == null) Json.obj("type", "removed", "group", g, "instance", m.groupInstanceId()).print();
                    else err(Json.obj("type", "remove_error", "group", g, "instance", m.groupInstanceId()), t).print();
                }
                Throwable t = failure(res.all());
                Json j = Json.obj("type", "remove_all", "group", g);
                (t == null ? j.put("error", null) : err(j.put("error", "failed"), t)).print();
                return 0;
            }
            case "remove-all-members": {
                String g = rest.get(0);
                Throwable t = failure(admin.removeMembersFromConsumerGroup(
                    g, new RemoveMembersFromConsumerGroupOptions()).all());
                Json j = Json.obj("type", "remove_all", "group", g);
                (t == null ? j.put("error", null) : err(j.put("error", "failed"), t)).print();
                return 0;
            }
            case "delete-topics": {
                Map<String, KafkaFuture<Void>> res = admin.deleteTopics(rest).topicNameValues();
                for (String t : rest) {
                    Throwable e = failure(res.get(t));
                    if (e == null) Json.obj("type", "topic_deleted", "topic", t).print();
                    else err(Json.obj("type", "topic_delete_error", "topic", t), e).print();
                }
                return 0;
            }
            case "create-partitions": {
                String t = rest.get(0);
                int total = Integer.parseInt(rest.get(1));
                Throwable e = failure(admin.createPartitions(
                    Collections.singletonMap(t, NewPartitions.increaseTo(total))).values().get(t));
                if (e == null) Json.obj("type", "partitions_created", "topic", t, "total", total).print();
                else err(Json.obj("type", "partitions_error", "topic", t), e).print();
                return 0;
            }
            case "create-assigned": {          // TOPIC BROKERS[;BROKERS...] e.g. "0;0" = two partitions on node 0
                String topic = rest.get(0);
                Map<Integer, List<Integer>> assignment = new HashMap<>();
                String[] parts = rest.get(1).split(";");
                for (int i = 0; i < parts.length; i++) {
                    List<Integer> ids = new ArrayList<>();
                    for (String b : parts[i].split(",")) ids.add(Integer.parseInt(b));
                    assignment.put(i, ids);
                }
                Throwable t = failure(admin.createTopics(Collections.singletonList(new NewTopic(topic, assignment)))
                    .all());
                Json j = Json.obj("type", "create_assigned", "topic", topic);
                (t == null ? j.put("error", null) : err(j.put("error", "failed"), t)).print();
                return 0;
            }
            case "describe-configs": {         // TYPE(topic|broker|group) NAME [KEY...]: with synonyms and docs
                ConfigResource res = new ConfigResource(ConfigResource.Type.valueOf(rest.get(0).toUpperCase()),
                                                        rest.get(1));
                Config config = admin.describeConfigs(Collections.singletonList(res),
                    new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all().get().get(res);
                Set<String> keys = new java.util.HashSet<>(rest.subList(2, rest.size()));
                List<Object> entries = Json.list();
                for (ConfigEntry e : config.entries()) {
                    if (!keys.isEmpty() && !keys.contains(e.name())) continue;
                    List<Object> syn = Json.list();
                    for (ConfigEntry.ConfigSynonym s : e.synonyms())
                        syn.add(Json.obj("name", s.name(), "value", s.value(), "source", s.source().name()));
                    entries.add(Json.obj("name", e.name(), "value", e.value(), "source", e.source().name(),
                        "read_only", e.isReadOnly(), "type", e.type().name(), "doc", e.documentation(),
                        "synonyms", syn));
                }
                Json.obj("type", "configs", "entries", entries).print();
                return 0;
            }
            case "alter-config": {             // TYPE NAME OP(SET|DELETE|APPEND|SUBTRACT) KEY [VALUE] [validate]
                ConfigResource res = new ConfigResource(ConfigResource.Type.valueOf(rest.get(0).toUpperCase()),
                                                        rest.get(1));
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry(rest.get(3), rest.size() > 4 ? rest.get(4) : null),
                                                     AlterConfigOp.OpType.valueOf(rest.get(2)));
                boolean validate = rest.size() > 5 && rest.get(5).equals("validate");
                Throwable t = failure(admin.incrementalAlterConfigs(
                    Collections.singletonMap(res, Collections.singletonList(op)),
                    new AlterConfigsOptions().validateOnly(validate)).all());
                Json j = Json.obj("type", "altered_config");
                (t == null ? j.put("error", null) : err(j.put("error", "failed"), t)).print();
                return 0;
            }
            case "delete-records": {           // TOPIC PARTITION OFFSET
                TopicPartition tp = new TopicPartition(rest.get(0), Integer.parseInt(rest.get(1)));
                try {
                    DeletedRecords d = admin.deleteRecords(Collections.singletonMap(tp,
                        RecordsToDelete.beforeOffset(Long.parseLong(rest.get(2))))).lowWatermarks().get(tp).get();
                    Json.obj("type", "deleted_records", "low_watermark", d.lowWatermark()).print();
                } catch (ExecutionException e) {
                    err(Json.obj("type", "delete_records_error"), e).print();
                }
                ListOffsetsResult.ListOffsetsResultInfo earliest = admin.listOffsets(
                    Collections.singletonMap(tp, OffsetSpec.earliest())).partitionResult(tp).get();
                Json.obj("type", "earliest", "offset", earliest.offset()).print();
                return 0;
            }
            case "log-dirs": {
                Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(
                    Collections.singletonList(0)).allDescriptions().get();
                for (Map.Entry<String, LogDirDescription> d : dirs.get(0).entrySet()) {
                    List<Object> parts = Json.list();
                    for (Map.Entry<TopicPartition, ReplicaInfo> r : d.getValue().replicaInfos().entrySet())
                        parts.add(Json.obj("topic", r.getKey().topic(), "partition", r.getKey().partition(),
                                           "size", r.getValue().size(), "lag", r.getValue().offsetLag()));
                    Json.obj("type", "log_dir", "path", d.getKey(), "error",
                             d.getValue().error() == null ? null : d.getValue().error().getClass().getName(),
                             "total", d.getValue().totalBytes().orElse(-1L),
                             "usable", d.getValue().usableBytes().orElse(-1L), "partitions", parts).print();
                }
                return 0;
            }
            case "describe-topics": {          // TOPIC...: Admin.describeTopics (DescribeTopicPartitions)
                Map<String, TopicDescription> ds = admin.describeTopics(rest).allTopicNames().get();
                for (String topic : rest) {
                    TopicDescription d = ds.get(topic);
                    List<Object> parts = Json.list();
                    for (TopicPartitionInfo p : d.partitions()) {
                        List<Object> replicas = Json.list(), isr = Json.list();
                        for (Node n : p.replicas()) replicas.add(n.id());
                        for (Node n : p.isr()) isr.add(n.id());
                        parts.add(Json.obj("partition", p.partition(), "leader", p.leader().id(),
                                           "replicas", replicas, "isr", isr));
                    }
                    Json.obj("type", "topic", "topic", d.name(), "internal", d.isInternal(),
                             "id", d.topicId().toString(), "partitions", parts).print();
                }
                return 0;
            }
            case "elect": {                    // PREFERRED|UNCLEAN TOPIC PARTITION
                TopicPartition tp = new TopicPartition(rest.get(1), Integer.parseInt(rest.get(2)));
                Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(ElectionType.valueOf(rest.get(0)),
                    Collections.singleton(tp)).partitions().get();
                Throwable t = r.get(tp).orElse(null);
                Json j = Json.obj("type", "elected");
                (t == null ? j.put("error", null) : err(j.put("error", "failed"), t)).print();
                return 0;
            }
            case "reassign": {                 // TOPIC PARTITION BROKERS|cancel, then list the ongoing ones
                TopicPartition tp = new TopicPartition(rest.get(0), Integer.parseInt(rest.get(1)));
                Optional<NewPartitionReassignment> target = Optional.empty();
                if (!rest.get(2).equals("cancel")) {
                    List<Integer> ids = new ArrayList<>();
                    for (String b : rest.get(2).split(",")) ids.add(Integer.parseInt(b));
                    target = Optional.of(new NewPartitionReassignment(ids));
                }
                Throwable t = failure(admin.alterPartitionReassignments(Collections.singletonMap(tp, target)).all());
                Json j = Json.obj("type", "reassigned");
                (t == null ? j.put("error", null) : err(j.put("error", "failed"), t)).print();
                Map<TopicPartition, PartitionReassignment> ongoing =
                    admin.listPartitionReassignments().reassignments().get();
                Json.obj("type", "ongoing", "count", ongoing.size()).print();
                return 0;
            }
            case "list-transactions": {        // PATTERN: listTransactions filtered on the transactional id pattern
                org.apache.kafka.clients.admin.ListTransactionsOptions o =
                    new org.apache.kafka.clients.admin.ListTransactionsOptions().filterOnTransactionalIdPattern(rest.get(0));
                List<Object> listed = Json.list();
                Throwable t = null;
                try {
                    for (org.apache.kafka.clients.admin.TransactionListing l : admin.listTransactions(o).all().get()) {
                        listed.add(l.transactionalId());
                    }
                } catch (ExecutionException e) {
                    t = e;
                }
                Json j = Json.obj("type", "listed", "transactions", listed);
                (t == null ? j.put("error", null) : err(j, t)).print();
                return 0;
            }
            case "transactions": {             // TXN_ID TOPIC PARTITION: list, describe TXN_ID, producers of TOPIC-PARTITION
                List<Object> listed = Json.list();
                for (org.apache.kafka.clients.admin.TransactionListing l : admin.listTransactions().all().get()) {
                    listed.add(Json.obj("id", l.transactionalId(), "producer_id", l.producerId(),
                                        "state", l.state().toString()));
                }
                Json.obj("type", "listed", "transactions", listed).print();
                org.apache.kafka.clients.admin.TransactionDescription d =
                    admin.describeTransactions(Collections.singletonList(rest.get(0))).all().get().get(rest.get(0));
                List<String> parts = new ArrayList<>();
                for (TopicPartition tp : d.topicPartitions()) parts.add(tp.toString());
                Collections.sort(parts);
                Json.obj("type", "described", "state", d.state().toString(), "producer_id", d.producerId(),
                         "epoch", d.producerEpoch(), "timeout_ms", d.transactionTimeoutMs(),
                         "partitions", new ArrayList<Object>(parts)).print();
                TopicPartition tp = new TopicPartition(rest.get(1), Integer.parseInt(rest.get(2)));
                List<Object> producers = Json.list();
                for (org.apache.kafka.clients.admin.ProducerState ps :
                         admin.describeProducers(Collections.singletonList(tp)).all().get().get(tp).activeProducers()) {
                    producers.add(Json.obj("producer_id", ps.producerId(), "epoch", ps.producerEpoch(),
                                           "last_sequence", ps.lastSequence(),
                                           "txn_start_offset", ps.currentTransactionStartOffset().orElse(-1)));
                }
                Json.obj("type", "producers", "producers", producers).print();
                return 0;
            }
            default:
                System.err.println("unknown command " + cmd);
                return 2;
        }
    }

    static int produce(String bootstrap, List<String> rest) throws Exception {
        String topic = rest.get(0);
        int partitions = Integer.parseInt(rest.get(1));
        int per = Integer.parseInt(rest.get(2));
        String prefix = rest.size() > 3 ? rest.get(3) : "k";
        Properties pp = base(bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("delivery.timeout.ms", String.valueOf(TIMEOUT_MS * 2));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            Map<Integer, List<Future<RecordMetadata>>> futures = new HashMap<>();
            for (int p = 0; p < partitions; p++) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < per; i++) {
                    fs.add(producer.send(new ProducerRecord<>(topic, p, prefix + "-" + p + "-" + i, "v" + i)));
                }
                futures.put(p, fs);
            }
            producer.flush();
            for (int p = 0; p < partitions; p++) {
                long last = -1;
                for (Future<RecordMetadata> f : futures.get(p)) last = f.get().offset();
                Json.obj("type", "produced", "topic", topic, "partition", p, "count", per,
                         "last_offset", last).print();
            }
        }
        return 0;
    }
}
