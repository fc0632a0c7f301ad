import java.time.Duration;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * One client of a secured listener (TLS, SASL): its security settings come as CONF key=value for every client
 * (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*, ssl.keystore.*).
 *
 * Usage: SecureClients BOOTSTRAP TOPIC GROUP INSTANCE COUNT STAY_MS [CONF...]
 *   COUNT >= 0: create TOPIC (1 partition), produce COUNT records, consume them in GROUP as the static member
 *   INSTANCE, commitSync; then for STAY_MS keep polling and committing every 500 ms (traffic on the group
 *   coordinator's connection while SASL sessions expire and re-authenticate).
 *   COUNT = -1: only list the topics with an Admin (an authentication failure shows here).
 *   COUNT = -2: TOPIC is a user and GROUP its password: Admin.alterUserScramCredentials upserts its SCRAM-SHA-512
 *   credential (8192 iterations; the client salts the password), then describeUserScramCredentials.
 *
 * Output (stdout, one JSON object per line):
 *   {"type":"assigned","partitions":[..],"generation":..}
 *   {"type":"done","produced":..,"consumed":..,"generation_start":..,"generation_end":..,"assigned":..,
 *    "commits":..,"member_id":..}
 *   {"type":"listed","topics":..}
 *   {"type":"scram","user":..,"credentials":[{"mechanism":..,"iterations":..},..]}
 *   {"type":"error","exception":..,"message":..,"root_exception":..,"root_message":..,"elapsed_ms":..} (time since
 *   the program started, the JVM's own start not included) and exit status 1.
 */
public class SecureClients {
    static final int TIMEOUT_MS = 15000;
    static long started;

    public static void main(String[] args) {
        started = System.currentTimeMillis();
        try {
            System.exit(run(args));
        } catch (Throwable t) {
            Throwable top = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
            Throwable root = top;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            Json.obj("type", "error", "exception", top.getClass().getName(), "message", String.valueOf(top.getMessage()),
                     "root_exception", root.getClass().getName(), "root_message", String.valueOf(root.getMessage()),
                     "elapsed_ms", System.currentTimeMillis() - started).print();
            t.printStackTrace();
            System.exit(1);
        }
    }

    static Properties base(String bootstrap, String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", String.valueOf(TIMEOUT_MS));
        p.put("default.api.timeout.ms", String.valueOf(TIMEOUT_MS));
        for (int i = 6; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) throw new IllegalArgumentException("bad CONF (want key=value): " + args[i]);
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return p;
    }

    static int run(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], instance = args[3];
        int count = Integer.parseInt(args[4]);
        long stayMs = Long.parseLong(args[5]);
        try (Admin admin = Admin.create(base(bootstrap, args))) {
            if (count == -2) {
                admin.alterUserScramCredentials(Collections.singletonList(new UserScramCredentialUpsertion(
                    topic, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), group))).all().get();
                UserScramCredentialsDescription d = admin.describeUserScramCredentials(
                    Collections.singletonList(topic)).description(topic).get();
                List<Object> creds = Json.list();
                for (ScramCredentialInfo i : d.credentialInfos())
                    creds.add(Json.obj("mechanism", i.mechanism().mechanismName(), "iterations", i.iterations()));
                Json.obj("type", "scram", "user", d.name(), "credentials", creds).print();
                return 0;
            }
            if (count < 0) {
                Json.obj("type", "listed", "topics", admin.listTopics().names().get().size()).print();
                return 0;
            }
            try {
                admin.createTopics(Collections.singletonList(new NewTopic(topic, 1, (short) 1))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
        }
        Properties pp = base(bootstrap, args);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i)).get();
        }
        Properties cp = base(bootstrap, args);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("group.id", group);
        cp.put("group.instance.id", instance);
        cp.put("group.protocol", "classic");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        int consumed = 0, commits = 0;
        final int[] assigned = {0};
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) { }
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    assigned[0]++;
                    Json.obj("type", "assigned", "partitions", parts.size(),
                             "generation", consumer.groupMetadata().generationId()).print();
                }
            });
            long deadline = System.currentTimeMillis() + 30000;
            while (consumed < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) consumed++;
            }
            consumer.commitSync();
            commits++;
            int generationStart = consumer.groupMetadata().generationId();
            long stayUntil = System.currentTimeMillis() + stayMs;
            while (System.currentTimeMillis() < stayUntil) {
                consumer.poll(Duration.ofMillis(500));
                consumer.commitSync();
                commits++;
            }
            Json.obj("type", "done", "produced", count, "consumed", consumed, "generation_start", generationStart,
                     "generation_end", consumer.groupMetadata().generationId(), "assigned", assigned[0],
                     "commits", commits, "member_id", consumer.groupMetadata().memberId()).print();
        }
        return 0;
    }
}
