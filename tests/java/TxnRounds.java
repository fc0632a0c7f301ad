import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * A consume-transform-produce loop committing one transaction per round: a STATIC read_committed consumer
 * reads PER_ROUND records of IN, a transactional producer writes them upper-cased to OUT and sends the
 * consumer's offsets with sendOffsetsToTransaction(offsets, consumer.groupMetadata()), then commits; ROUNDS
 * times with one producer (so transactions v2 bumps its epoch at every commit, v1 keeps it).
 *
 * Usage: TxnRounds BOOTSTRAP IN OUT GROUP INSTANCE_ID TRANSACTIONAL_ID ROUNDS PER_ROUND [CONF...]
 *   CONF: key=value consumer settings.
 *
 * Output (stdout, one JSON object per line): {"type":"round","n":..,"consumed":..} after each commit, then
 *   {"type":"done","rounds":..,"consumed":..}. On failure: {"type":"error",...} and exit status 1.
 */
public class TxnRounds {
    public static void main(String[] args) {
        try {
            run(args);
            System.exit(0);
        } catch (Throwable t) {
            Json.error(t);
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], instance = args[4];
        String txnId = args[5];
        int rounds = Integer.parseInt(args[6]), perRound = Integer.parseInt(args[7]);
        Properties extra = new Properties();
        extra.put("group.instance.id", instance);
        extra.put("isolation.level", "read_committed");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(ConsumerConf.of(bootstrap, group, extra, args, 8));
             KafkaProducer<String, String> producer = TxnProduce.producer(bootstrap, txnId)) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(in));
            int total = 0;
            for (int round = 1; round <= rounds; round++) {
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                int consumed = 0;
                long deadline = System.currentTimeMillis() + 60000;
                producer.beginTransaction();
                while (consumed < perRound && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                    Map<TopicPartition, Long> rewind = new HashMap<>();
                    for (ConsumerRecord<String, String> r : records) {
                        TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                        if (consumed == perRound) {          // the next round's: read again from here
                            rewind.putIfAbsent(tp, r.offset());
                            continue;
                        }
                        producer.send(new ProducerRecord<>(out, r.key(), r.value().toUpperCase()));
                        next.put(tp, new OffsetAndMetadata(r.offset() + 1));
                        consumed++;
                    }
                    rewind.forEach(consumer::seek);
                }
                if (consumed != perRound) {
                    throw new IllegalStateException("round " + round + " consumed " + consumed + " of " + perRound);
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                producer.commitTransaction();
                total += consumed;
                Json.obj("type", "round", "n", round, "consumed", consumed).print();
            }
            Json.obj("type", "done", "rounds", rounds, "consumed", total).print();
        }
    }
}
