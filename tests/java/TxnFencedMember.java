import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * KIP-447 with two consume-transform-produce loops and ONE group.instance.id: loop A (static consumer +
 * transactional producer GROUP-a) reads COUNT records of IN and sends them to OUT as "A:<value>" in its open
 * transaction; then loop B (a second consumer with the same group.instance.id + producer GROUP-b) joins,
 * which fences A's member, reads the same COUNT records and sends "B:<value>". 2 s later (A's heartbeats,
 * every 500 ms, are refused by then) A's sendOffsetsToTransaction(offsets, consumerA.groupMetadata()) and
 * commitTransaction() are tried (what each throws is reported), A aborts, and B sends its offsets and
 * commits.
 *
 * Usage: TxnFencedMember BOOTSTRAP IN OUT GROUP INSTANCE_ID COUNT
 *
 * Output (stdout, one JSON object per line):
 *   {"type":"fenced","send_offsets":<thrown>,"commit":<thrown>,"abort":"ok"|<thrown>,
 *    "a_joined_member":..,"a_joined_generation":..,   A's groupMetadata() before B joined
 *    "a_member":..,"a_generation":..,                 A's groupMetadata() sent with its offsets (2 s after)
 *    "b_member":..,"b_generation":..}
 *   {"type":"done","b_offsets":{"<topic>-<partition>":<next offset>,..}}   what B committed
 * (<thrown>: "none", or the exception's class [+ " caused by " + its cause's class].) On failure:
 * {"type":"error",...} and exit status 1.
 */
public class TxnFencedMember {
    public static void main(String[] args) {
        try {
            run(args);
            System.exit(0);
        } catch (Throwable t) {
            Json.error(t);
            System.exit(1);
        }
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, String instance) {
        Properties extra = new Properties();
        extra.put("group.instance.id", instance);
        extra.put("heartbeat.interval.ms", "500");
        extra.put("isolation.level", "read_committed");
        return new KafkaConsumer<>(ConsumerConf.of(bootstrap, group, extra, new String[0], 0));
    }

    /** Poll until COUNT records came, sending each as PREFIX+value in the producer's open transaction. */
    static Map<TopicPartition, OffsetAndMetadata> transform(KafkaConsumer<String, String> consumer,
                                                            KafkaProducer<String, String> producer,
                                                            String out, String prefix, int count) {
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        int consumed = 0;
        long deadline = System.currentTimeMillis() + 60000;
        while (consumed < count) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException(prefix + " consumed " + consumed + " of " + count + " in 60 s");
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                producer.send(new ProducerRecord<>(out, r.key(), prefix + r.value()));
                next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                consumed++;
            }
        }
        return next;
    }

    /** "none", or the class of what `call` threw, with its cause's class after " caused by " if it has one. */
    static String thrown(Runnable call) {
        try {
            call.run();
            return "none";
        } catch (RuntimeException e) {
            Throwable cause = e.getCause();
            return e.getClass().getName() + (cause == null ? "" : " caused by " + cause.getClass().getName());
        }
    }

    static void run(String[] args) throws Exception {
        String bootstrap = args[0], in = args[1], out = args[2], group = args[3], instance = args[4];
        int count = Integer.parseInt(args[5]);
        KafkaConsumer<String, String> consumerA = consumer(bootstrap, group, instance);
        KafkaProducer<String, String> producerA = TxnProduce.producer(bootstrap, group + "-a");
        producerA.initTransactions();
        consumerA.subscribe(Collections.singletonList(in));
        producerA.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> offsetsA = transform(consumerA, producerA, out, "A:", count);
        producerA.flush();
        ConsumerGroupMetadata joinedA = consumerA.groupMetadata();

        // the same group.instance.id joins again (a second copy of the application): A's member is fenced
        try (KafkaConsumer<String, String> consumerB = consumer(bootstrap, group, instance);
             KafkaProducer<String, String> producerB = TxnProduce.producer(bootstrap, group + "-b")) {
            producerB.initTransactions();
            consumerB.subscribe(Collections.singletonList(in));
            producerB.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsetsB = transform(consumerB, producerB, out, "B:", count);
            ConsumerGroupMetadata metaB = consumerB.groupMetadata();
            // A's heartbeat thread has had time to be told it is fenced; A sends what its consumer says now,
            // as a consume-transform-produce loop does
            Thread.sleep(2000);
            ConsumerGroupMetadata metaA = consumerA.groupMetadata();

            String sendOffsets = thrown(() -> producerA.sendOffsetsToTransaction(offsetsA, metaA));
            String commit = thrown(producerA::commitTransaction);
            String abort = thrown(producerA::abortTransaction);
            Json.obj("type", "fenced", "send_offsets", sendOffsets,
                     "commit", commit, "abort", abort.equals("none") ? "ok" : abort,
                     "a_joined_member", joinedA.memberId(), "a_joined_generation", joinedA.generationId(),
                     "a_member", metaA.memberId(), "a_generation", metaA.generationId(),
                     "b_member", metaB.memberId(), "b_generation", metaB.generationId()).print();
            producerA.close(Duration.ofSeconds(5));
            consumerA.close(Duration.ofSeconds(5));

            producerB.sendOffsetsToTransaction(offsetsB, metaB);
            producerB.commitTransaction();
            Json committed = new Json();
            offsetsB.forEach((tp, o) -> committed.put(tp.toString(), o.offset()));
            Json.obj("type", "done", "b_offsets", committed).print();
        }
    }
}
