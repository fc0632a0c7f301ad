import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DeleteAclsResult;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * ACLs through the Java Admin, and what a consumer or producer the ACLs refuse sees.
 *
 * Usage: AclOps BOOTSTRAP COMMAND ARGS...
 *   create TYPE NAME PATTERN PRINCIPAL HOST OPERATION PERMISSION  -> {"type":"created"} or {"type":"error",...}
 *   describe [TYPE]                                            -> {"type":"acl",...} per binding, {"type":"described","count":n}
 *   delete TYPE NAME PATTERN                                   -> {"type":"deleted","binding":...} per binding, {"type":"deleted_count",...}
 *   consume GROUP TOPIC                                        -> {"type":"consumed","count":n} or {"type":"error","exception":...}
 *   produce TOPIC                                              -> {"type":"produced","offset":o} or {"type":"error","exception":...}
 *   topics                                                     -> {"type":"topics","names":[...]} (Admin listTopics)
 *   transact TRANSACTIONAL_ID TOPIC                            -> {"type":"committed"} or {"type":"error","exception":...}
 * TYPE, PATTERN, OPERATION, PERMISSION are the Java enums' names (TOPIC, PREFIXED, READ, DENY, ...).
 */
public final class AclOps {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String command = args[1];
        try {
            switch (command) {
                case "create": create(bootstrap, args); break;
                case "describe": describe(bootstrap, args.length > 2 ? ResourceType.valueOf(args[2]) : ResourceType.ANY); break;
                case "delete": delete(bootstrap, args); break;
                case "consume": consume(bootstrap, args[2], args[3]); break;
                case "produce": produce(bootstrap, args[2]); break;
                case "transact": transact(bootstrap, args[2], args[3]); break;
                case "topics": topics(bootstrap); break;
                default: throw new IllegalArgumentException("unknown command " + command);
            }
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            Json.obj("type", "error", "exception", cause.getClass().getSimpleName(),
                     "message", String.valueOf(cause.getMessage())).print();
        }
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("default.api.timeout.ms", "20000");
        p.put("request.timeout.ms", "15000");
        return Admin.create(p);
    }

    static Json json(AclBinding b) {
        return Json.obj("resource_type", b.pattern().resourceType().name(), "name", b.pattern().name(),
                        "pattern", b.pattern().patternType().name(), "principal", b.entry().principal(),
                        "host", b.entry().host(), "operation", b.entry().operation().name(),
                        "permission", b.entry().permissionType().name());
    }

    static void create(String bootstrap, String[] a) throws Exception {
        AclBinding b = new AclBinding(
            new ResourcePattern(ResourceType.valueOf(a[2]), a[3], PatternType.valueOf(a[4])),
            new AccessControlEntry(a[5], a[6], AclOperation.valueOf(a[7]), AclPermissionType.valueOf(a[8])));
        try (Admin admin = admin(bootstrap)) {
            admin.createAcls(Collections.singletonList(b)).all().get();
            Json.obj("type", "created").print();
        }
    }

    static void describe(String bootstrap, ResourceType type) throws Exception {
        AclBindingFilter filter = new AclBindingFilter(
            new ResourcePatternFilter(type, null, PatternType.ANY), AccessControlEntryFilter.ANY);
        try (Admin admin = admin(bootstrap)) {
            Collection<AclBinding> found = admin.describeAcls(filter).values().get();
            for (AclBinding b : found) json(b).put("type", "acl").print();
            Json.obj("type", "described", "count", found.size()).print();
        }
    }

    static void delete(String bootstrap, String[] a) throws Exception {
        AclBindingFilter filter = new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.valueOf(a[2]), a[3], PatternType.valueOf(a[4])),
            AccessControlEntryFilter.ANY);
        try (Admin admin = admin(bootstrap)) {
            Collection<AclBinding> gone = admin.deleteAcls(Collections.singletonList(filter)).all().get();
            for (AclBinding b : gone) json(b).put("type", "deleted").print();
            Json.obj("type", "deleted_count", "count", gone.size()).print();
        }
    }

    static void consume(String bootstrap, String group, String topic) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(Collections.singletonList(topic));
            int count = 0;
            long deadline = System.currentTimeMillis() + 20000;
            while (count == 0 && System.currentTimeMillis() < deadline) {
                count += c.poll(Duration.ofMillis(500)).count();
            }
            c.commitSync();
            Json.obj("type", "consumed", "count", count).print();
        } catch (Exception e) {
            Json.obj("type", "error", "exception", e.getClass().getSimpleName(),
                     "message", String.valueOf(e.getMessage())).print();
        }
    }

    static void produce(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            long offset = producer.send(new ProducerRecord<>(topic, "k", "v")).get().offset();
            Json.obj("type", "produced", "offset", offset).print();
        }
    }

    static void transact(String bootstrap, String transactionalId, String topic) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "k", "v"));
            producer.commitTransaction();
            Json.obj("type", "committed").print();
        }
    }

    static void topics(String bootstrap) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            List<String> names = new ArrayList<>(admin.listTopics().names().get());
            Collections.sort(names);
            Json.obj("type", "topics", "names", names).print();
        }
    }
}
