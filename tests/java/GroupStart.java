import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * N consumers of one group in ONE JVM, started one after another in a loop the way a test starts them (each
 * on its own polling thread), for the initial-rebalance-delay and settle-time benchmarks (classic protocol
 * unless group.protocol=consumer is given).
 *
 * Usage: GroupStart BOOTSTRAP GROUP TOPIC N [CONF...]
 *   CONF is a consumer key=value applied to every member, e.g. session.timeout.ms=10000.
 *   Defaults: group.protocol=classic, enable.auto.commit=false, auto.offset.reset=earliest.
 *
 * stdout (one JSON object per line, "ts" = epoch millis):
 *   {"type":"started","n":N}            once every member's thread has been started
 *   {"type":"assigned","member":i,"generation":..,"partitions":[..]}
 *   {"type":"revoked","member":i,"partitions":[..]}
 *   {"type":"error","member":i,...}     a member's poll() threw; that member stops
 *   {"type":"closed"}                   after stdin reaches EOF and every member has closed
 */
public class GroupStart {
    static final Duration POLL = Duration.ofMillis(100);

    static synchronized void emit(Json j) {
        j.print();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: GroupStart BOOTSTRAP GROUP TOPIC N [CONF...]");
            System.exit(2);
        }
        Properties p = ConsumerConf.of(args[0], args[1], new Properties(), args, 4);
        String topic = args[2];
        int n = Integer.parseInt(args[3]);

        AtomicBoolean stop = new AtomicBoolean(false);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int member = i;
            Properties mp = (Properties) p.clone();
            mp.put("client.id", "java-" + i);
            Thread t = new Thread(() -> runMember(member, mp, topic, stop), "member-" + i);
            t.start();
            threads.add(t);
        }
        emit(Json.obj("type", "started", "n", n, "ts", System.currentTimeMillis()));

        InputStream in = System.in;
        while (in.read() >= 0) {
            // anything on stdin is ignored; EOF closes the members
        }
        stop.set(true);
        for (Thread t : threads) t.join(30000);
        emit(Json.obj("type", "closed", "ts", System.currentTimeMillis()));
        System.exit(0);
    }

    static void runMember(int member, Properties p, String topic, AtomicBoolean stop) {
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        try {
            consumer.subscribe(Collections.singletonList(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    List<Object> ps = new ArrayList<>();
                    for (TopicPartition tp : tps) ps.add(tp.partition());
                    emit(Json.obj("type", "revoked", "member", member, "partitions", ps,
                                  "ts", System.currentTimeMillis()));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    List<Object> ps = new ArrayList<>();
                    for (TopicPartition tp : tps) ps.add(tp.partition());
                    emit(Json.obj("type", "assigned", "member", member, "partitions", ps,
                                  "generation", consumer.groupMetadata().generationId(),
                                  "ts", System.currentTimeMillis()));
                }
            });
            while (!stop.get()) consumer.poll(POLL);
        } catch (Exception e) {
            emit(Json.obj("type", "error", "member", member, "exception", e.getClass().getName(),
                          "message", String.valueOf(e.getMessage()), "ts", System.currentTimeMillis()));
        } finally {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        }
    }
}
