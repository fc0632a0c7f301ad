import java.util.Arrays;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Plain and transactional offset commits of one group mixed on two partitions of TOPIC: the consumer (assigned,
 * not subscribed: a simple group) commits P1 = 5 with commitSync; a transaction sends a record to partition 0
 * and P0 = 20, P1 = 25 with sendOffsetsToTransaction(offsets, consumer.groupMetadata()); before the
 * transaction commits, the consumer commits P0 = 10 with commitSync; then commitTransaction.
 *
 * Usage: TxnMixedCommits BOOTSTRAP TOPIC GROUP TRANSACTIONAL_ID [CONF...]   (CONF: key=value consumer settings)
 *
 * Output (stdout, one JSON line): {"type":"done","p0":..,"p1":..}, what consumer.committed (read_committed:
 * stable offsets) answers afterwards (-1: none). On failure: {"type":"error",...} and exit status 1.
 */
public class TxnMixedCommits {
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
        String bootstrap = args[0], topic = args[1], group = args[2], txnId = args[3];
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        Properties extra = new Properties();
        extra.put("isolation.level", "read_committed");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(ConsumerConf.of(bootstrap, group, extra, args, 4));
             KafkaProducer<String, String> producer = TxnProduce.producer(bootstrap, txnId)) {
            consumer.assign(Arrays.asList(p0, p1));
            consumer.commitSync(Map.of(p1, new OffsetAndMetadata(5)));
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "k", "v"));
            producer.sendOffsetsToTransaction(Map.of(p0, new OffsetAndMetadata(20), p1, new OffsetAndMetadata(25)),
                                              consumer.groupMetadata());
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(10)));
            producer.commitTransaction();
            Map<TopicPartition, OffsetAndMetadata> got = consumer.committed(new HashSet<>(Arrays.asList(p0, p1)));
            Json.obj("type", "done", "p0", offset(got.get(p0)), "p1", offset(got.get(p1))).print();
        }
    }

    static long offset(OffsetAndMetadata om) {
        return om == null ? -1 : om.offset();
    }
}
