import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
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
 * A consume-transform-produce loop in one transaction: a STATIC read_committed consumer reads COUNT records
 * of IN, a transactional producer writes them upper-cased to OUT and sends the consumer's offsets with
 * sendOffsetsToTransaction(offsets, consumer.groupMetadata()), then commits or aborts (MODE).
 *
 * Usage: TxnTransform BOOTSTRAP IN OUT GROUP INSTANCE_ID TRANSACTIONAL_ID MODE COUNT [CONF...]
 *   MODE: commit | abort | hold (records flushed and offsets sent, then {"type":"sent","consumed":..} is
 *   printed and the transaction stays open until a line on stdin says commit or abort - or the process is
 *   killed); CONF: key=value consumer settings.
 *
 * Output (stdout, one JSON object per line):
 *   {"type":"done","mode":..,"consumed":..,"generation":..,"member_id":..}
 * On failure: {"type":"error",...} and exit status 1.
 */
public class TxnTransform {
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
        String txnId = args[5], mode = args[6];
        int count = Integer.parseInt(args[7]);
        Properties extra = new Properties();
        extra.put("group.instance.id", instance);
        extra.put("isolation.level", "read_committed");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(ConsumerConf.of(bootstrap, group, extra, args, 8));
             KafkaProducer<String, String> producer = TxnProduce.producer(bootstrap, txnId)) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(in));
            Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
            int consumed = 0;
            long deadline = System.currentTimeMillis() + 60000;
            producer.beginTransaction();
            while (consumed < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>(out, r.key(), r.value().toUpperCase()));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    consumed++;
                }
            }
            producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
            if (mode.equals("hold")) {
                producer.flush();
                Json.obj("type", "sent", "consumed", consumed).print();
                String line = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
                if (line == null) throw new IllegalStateException("stdin closed while holding the transaction open");
                mode = line.trim();
            }
            if (mode.equals("commit")) {
                producer.commitTransaction();
            } else if (mode.equals("abort")) {
                producer.abortTransaction();
            } else {
                throw new IllegalArgumentException("MODE must be commit, abort or hold: " + mode);
            }
            Json.obj("type", "done", "mode", mode, "consumed", consumed,
                     "generation", consumer.groupMetadata().generationId(),
                     "member_id", consumer.groupMetadata().memberId()).print();
        }
    }
}
