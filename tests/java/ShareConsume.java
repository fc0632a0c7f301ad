import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashSet;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

/**
 * A long-running KafkaShareConsumer (KIP-932) driven over stdin/stdout, one JVM per member, for the share
 * group tests.
 *
 * Usage: ShareConsume BOOTSTRAP GROUP TOPIC [CONF...]
 *   CONF is a consumer key=value (e.g. client.id=a), or one of this program's own settings:
 *     ack=implicit|accept|release|reject|hold  what to do with each record (default implicit: the
 *       consumer's implicit mode accepts a poll's records on the next poll; the others use the explicit
 *       mode: acknowledge each record so and commitSync() after each poll; hold acknowledges nothing and
 *       polls on, keeping its records acquired until the process is killed)
 *     release.until=N  with ack=accept: release a record while its delivery count is below N, then
 *       accept it
 *     reject.offsets=O,O  with ack=accept: reject the records at these offsets
 *     release.offsets=O,O  with ack=accept: release the records at these offsets at every delivery
 *   ack=renew: renew each record's lock the first time it is seen, accept it the next
 *
 * stdin commands (one per line; EOF = close): close -> consumer.close(), {"type":"closed"}, exit 0.
 *
 * stdout (one JSON object per line):
 *   {"type":"started"}
 *   {"type":"record","partition":..,"offset":..,"delivery_count":..,"value":..,"ack":"accept|release|..."}
 *   {"type":"committed","count":..} after each commitSync() in the explicit modes
 *   {"type":"error","exception":..,"message":..} when poll() or commitSync() throws; then exit 3
 */
public final class ShareConsume {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        String ack = "implicit";
        int releaseUntil = 0;
        Set<Long> rejectOffsets = new HashSet<>(), releaseOffsets = new HashSet<>(), renewed = new HashSet<>();
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv[0].equals("ack")) ack = kv[1];
            else if (kv[0].equals("release.until")) releaseUntil = Integer.parseInt(kv[1]);
            else if (kv[0].equals("reject.offsets")) for (String o : kv[1].split(",")) rejectOffsets.add(Long.parseLong(o));
            else if (kv[0].equals("release.offsets")) for (String o : kv[1].split(",")) releaseOffsets.add(Long.parseLong(o));
            else props.put(kv[0], kv[1]);
        }
        boolean explicit = !ack.equals("implicit");
        props.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");

        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String s;
                while ((s = in.readLine()) != null) commands.add(s.trim());
            } catch (Exception e) {
                // EOF below
            }
            commands.add("close");
        }, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props);
        consumer.subscribe(Collections.singletonList(topic));
        Json.obj("type", "started").print();
        try {
            while (true) {
                String cmd = commands.poll();
                if ("close".equals(cmd)) break;
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                int n = 0;
                for (ConsumerRecord<String, String> r : records) {
                    int count = r.deliveryCount().map(Short::intValue).orElse(-1);
                    String what = ack;
                    if (ack.equals("accept") && (count < releaseUntil || releaseOffsets.contains(r.offset()))) {
                        what = "release";
                    } else if (ack.equals("accept") && rejectOffsets.contains(r.offset())) {
                        what = "reject";
                    }
                    if (what.equals("renew") && renewed.contains(r.offset())) what = "accept-renewed";
                    Json.obj("type", "record", "partition", r.partition(), "offset", r.offset(),
                             "delivery_count", count, "value", r.value(), "ack", what).print();
                    if (what.equals("renew") || what.equals("accept-renewed")) {
                        if (renewed.add(r.offset())) {
                            consumer.acknowledge(r, AcknowledgeType.RENEW);
                        } else {
                            consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                    }
                    if (what.equals("accept")) consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    else if (what.equals("release")) consumer.acknowledge(r, AcknowledgeType.RELEASE);
                    else if (what.equals("reject")) consumer.acknowledge(r, AcknowledgeType.REJECT);
                    n++;
                }
                if (ack.equals("hold") && n > 0) {
                    // keeps its records acquired: no more polls (the background thread heartbeats) until told
                    while (!"close".equals(commands.take())) { }
                    break;
                }
                if (explicit && n > 0) {
                    consumer.commitSync();
                    Json.obj("type", "committed", "count", n).print();
                }
            }
        } catch (Exception e) {
            Json.obj("type", "error", "exception", e.getClass().getName(), "message", String.valueOf(e.getMessage()))
                .print();
            System.exit(3);
        }
        consumer.close();
        Json.obj("type", "closed").print();
    }
}
