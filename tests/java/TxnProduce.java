import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer's commit and abort, a second producer with the same transactional.id fencing
 * the first (whose open transaction is aborted), and a read_committed consumer of partition 0.
 *
 * Usage: TxnProduce BOOTSTRAP TOPIC TRANSACTIONAL_ID   (TOPIC exists, one partition is used)
 *
 * Output (stdout, one JSON object per line):
 *   {"type":"fenced","send":<class name>,"abort":<class name>}   what the first producer got once fenced
 *   {"type":"consumed","values":[..]}                 what read_committed saw, in offset order
 * On failure: {"type":"error",...} and exit status 1.
 */
public class TxnProduce {
    public static void main(String[] args) {
        try {
            run(args[0], args[1], args[2]);
            System.exit(0);
        } catch (Throwable t) {
            Json.error(t);
            System.exit(1);
        }
    }

    /** A transactional producer of string records (the other Txn* programs here use it too). */
    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("max.block.ms", "30000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static void run(String bootstrap, String topic, String txnId) throws Exception {
        KafkaProducer<String, String> first = producer(bootstrap, txnId);
        first.initTransactions();
        first.beginTransaction();
        for (int i = 0; i < 3; i++) first.send(new ProducerRecord<>(topic, 0, null, "commit-" + i));
        first.commitTransaction();
        first.beginTransaction();
        for (int i = 0; i < 2; i++) first.send(new ProducerRecord<>(topic, 0, null, "abort-" + i));
        first.flush();
        first.abortTransaction();
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, 0, null, "zombie-open")).get();

        try (KafkaProducer<String, String> second = producer(bootstrap, txnId)) {
            second.initTransactions();
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, null, "second"));
            second.commitTransaction();
        }
        // the zombie's next batch is refused INVALID_PRODUCER_EPOCH (as Kafka answers a fenced producer's
        // Produce); aborting then asks the coordinator, which answers PRODUCER_FENCED
        String send = "none", abort = "none";
        try {
            first.send(new ProducerRecord<>(topic, 0, null, "zombie-late")).get();
        } catch (java.util.concurrent.ExecutionException e) {
            send = e.getCause().getClass().getName();
        }
        try {
            first.abortTransaction();
        } catch (RuntimeException e) {
            abort = e.getClass().getName();
        }
        Json.obj("type", "fenced", "send", send, "abort", abort).print();
        first.close(Duration.ofSeconds(5));

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("isolation.level", "read_committed");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.seekToBeginning(Collections.singletonList(tp));
            long deadline = System.currentTimeMillis() + 30000, quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) values.add(r.value());
                if (values.size() >= 4 && quietUntil == Long.MAX_VALUE) quietUntil = System.currentTimeMillis() + 2000;
            }
        }
        Json.obj("type", "consumed", "values", values).print();
    }
}
