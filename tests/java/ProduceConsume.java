import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Create a topic, produce COUNT records with the default (idempotent, acks=all)
 * producer, then read them back with a group-less assign()ed consumer.
 *
 * Usage: ProduceConsume BOOTSTRAP TOPIC PARTITIONS COUNT [CONF...]
 *   CONF is key=value applied to all clients, or admin.key=value /
 *   producer.key=value / consumer.key=value applied to just one of them
 *   (e.g. producer.compression.type=zstd).
 *
 * Output (stdout, one JSON object per line):
 *   {"type":"topic_created","topic":..,"partitions":..}
 *   {"type":"produced","partition":..,"offset":..,"key":..}        x COUNT
 *   {"type":"consumed","partition":..,"offset":..,"key":..,"value":..,
 *    "timestamp":..,"headers":[{"key":..,"value":<hex>},..]}        x COUNT
 *   {"type":"done","produced":..,"consumed":..}
 * On failure: {"type":"error",...} and exit status 1.
 */
public class ProduceConsume {
    static final int TIMEOUT_MS = 15000;
    static final long CONSUME_DEADLINE_MS = 30000;

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Throwable t) {
            Json.error(t);
            System.exit(1);
        }
    }

    static Properties base(String bootstrap, String[] args, String prefix) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", String.valueOf(TIMEOUT_MS));
        p.put("default.api.timeout.ms", String.valueOf(TIMEOUT_MS));
        for (int i = 4; i < args.length; i++) {
            String a = args[i];
            int eq = a.indexOf('=');
            if (eq < 0) throw new IllegalArgumentException("bad CONF (want key=value): " + a);
            String k = a.substring(0, eq), v = a.substring(eq + 1);
            if (k.startsWith(prefix)) {
                p.put(k.substring(prefix.length()), v);
            } else if (!k.startsWith("admin.") && !k.startsWith("producer.") && !k.startsWith("consumer.")) {
                p.put(k, v);
            }
        }
        return p;
    }

    static int run(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: ProduceConsume BOOTSTRAP TOPIC PARTITIONS COUNT [CONF...]");
            return 2;
        }
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int count = Integer.parseInt(args[3]);

        // 1. create the topic
        try (Admin admin = Admin.create(base(bootstrap, args, "admin."))) {
            admin.createTopics(Collections.singletonList(new NewTopic(topic, partitions, (short) 1)))
                 .all().get();
        }
        Json.obj("type", "topic_created", "topic", topic, "partitions", partitions).print();

        // 2. produce
        Properties pp = base(bootstrap, args, "producer.");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.putIfAbsent("delivery.timeout.ms", String.valueOf(TIMEOUT_MS * 2));
        int produced = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            List<String> keys = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                List<Header> headers = new ArrayList<>();
                headers.add(new RecordHeader("h1", ("x" + i).getBytes(StandardCharsets.UTF_8)));
                headers.add(new RecordHeader("h2", new byte[] {0, 1, 2}));
                String key = "k" + i;
                keys.add(key);
                futures.add(producer.send(new ProducerRecord<>(
                    topic, i % partitions, null, key, "v" + i, headers)));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata md = futures.get(i).get();
                Json.obj("type", "produced", "partition", md.partition(), "offset", md.offset(),
                         "key", keys.get(i)).print();
                produced++;
            }
        }

        // 3. consume (no group.id: assign + seekToBeginning)
        Properties cp = base(bootstrap, args, "consumer.");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        int consumed = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + CONSUME_DEADLINE_MS;
            while (consumed < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new RuntimeException("timed out after " + CONSUME_DEADLINE_MS
                        + "ms: consumed " + consumed + " of " + count + " records");
                }
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : recs) {
                    List<Object> hs = Json.list();
                    for (Header h : r.headers()) {
                        hs.add(Json.obj("key", h.key(), "value", Json.hex(h.value())));
                    }
                    Json.obj("type", "consumed", "partition", r.partition(), "offset", r.offset(),
                             "key", r.key(), "value", r.value(), "timestamp", r.timestamp(),
                             "headers", hs).print();
                    consumed++;
                }
            }
        }
        Json.obj("type", "done", "produced", produced, "consumed", consumed).print();
        return 0;
    }
}
