import java.time.Duration;
import java.util.Collections;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A classic consumer group's commit and fetch of offsets: produce COUNT records to TOPIC-0, consume them in GROUP
 * (subscribe), commitSync with metadata "cf"; then a second consumer of GROUP reads the committed offset
 * (committed()) and starts from it (position()).
 *
 * Usage: CommitFetch BOOTSTRAP TOPIC GROUP COUNT PROTOCOL (group.protocol: classic|consumer)
 * Output: {"type":"committed","offset":..} then {"type":"fetched","offset":..,"metadata":..,"position":..}
 */
public class CommitFetch {
    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Throwable t) {
            Json.error(t);
            System.exit(1);
        }
    }

    static Properties consumerProps(String bootstrap, String group, String protocol) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return p;
    }

    static int run(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        String protocol = args[4];
        TopicPartition tp = new TopicPartition(topic, 0);
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
            producer.flush();
        }
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, group, protocol))) {
            c.subscribe(Collections.singletonList(topic));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60000;
            while (seen < count) {
                if (System.currentTimeMillis() > deadline) throw new RuntimeException("consumed " + seen);
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                seen += recs.count();
            }
            c.commitSync(Collections.singletonMap(tp, new OffsetAndMetadata(seen, "cf")));
            Json.obj("type", "committed", "offset", seen).print();
        }
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, group, protocol))) {
            Map<TopicPartition, OffsetAndMetadata> got = c.committed(Collections.singleton(tp));
            OffsetAndMetadata om = got.get(tp);
            c.assign(Collections.singletonList(tp));
            Json.obj("type", "fetched", "offset", om.offset(), "metadata", om.metadata(),
                     "position", c.position(tp)).print();
        }
        return 0;
    }
}
