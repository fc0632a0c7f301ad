import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;

/**
 * A long-running classic-protocol group consumer driven over stdin/stdout, one JVM per member,
 * for the static-membership (KIP-345) tests.
 *
 * Usage: StaticConsumer BOOTSTRAP GROUP TOPIC [CONF...]
 *   TOPIC "re2:PATTERN" subscribes with a SubscriptionPattern (KIP-848: the coordinator resolves the RE2/J
 *   expression; group.protocol=consumer only), "pattern:PATTERN" with a java.util.regex.Pattern (resolved by
 *   the client); anything else is one topic name.
 *   CONF is a consumer key=value, e.g. group.instance.id=m0 session.timeout.ms=10000.
 *   Defaults: group.protocol=classic, enable.auto.commit=false, auto.offset.reset=earliest,
 *   heartbeat.interval.ms=1000 (not with group.protocol=consumer: the coordinator sets it).
 *   commit.each.poll=true (this program's own setting, not passed to the consumer): after every poll
 *   that returned records, commitSync() the positions of the partitions those records came from and
 *   print a "committed" line (the commit was acknowledged) or a "commit_error" line.
 *
 * stdin commands (one per line; EOF = close):
 *   status   -> {"type":"status","partitions":[..],"generation":..,"member_id":..}
 *   commit   -> commitSync() of the current positions of every assigned partition, then
 *               {"type":"committed","offsets":[{"partition":..,"offset":..},..]}
 *               (or {"type":"commit_error","exception":..} if the commit throws)
 *   close    -> consumer.close() (a static member does NOT leave the group), {"type":"closed"}, exit 0
 *   leave    -> close with GroupMembershipOperation.LEAVE_GROUP, {"type":"closed"}, exit 0
 *
 * stdout (one JSON object per line; every line carries "instance", "ts" = epoch millis):
 *   {"type":"started"}
 *   {"type":"assigned"|"revoked"|"lost","partitions":[..],"topic_partitions":[{"topic":..,"partition":..},..],
 *    "generation":..,"member_id":..}
 *   {"type":"record","partition":..,"offset":..,"key":..,"value":..}
 *   {"type":"committed","offsets":[..],"generation":..,"member_id":..,"auto":true} for commit.each.poll
 *   {"type":"error",...} when poll() throws (e.g. FencedInstanceIdException); the consumer is then
 *   closed and the program exits 3.
 */
public class StaticConsumer {
    static final Duration POLL = Duration.ofMillis(100);
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(10);

    static String instance;
    static KafkaConsumer<String, String> consumer;

    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Throwable t) {
            emit(errorJson(t));
            t.printStackTrace();
            System.exit(1);
        }
    }

    static Json line(String type) {
        return Json.obj("type", type, "instance", instance, "ts", System.currentTimeMillis());
    }

    static synchronized void emit(Json j) {
        j.print();
    }

    static Json errorJson(Throwable t) {
        return errorJson("error", t);
    }

    static Json errorJson(String type, Throwable t) {
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        return line(type)
            .put("exception", t.getClass().getName())
            .put("message", String.valueOf(t.getMessage()))
            .put("root_exception", root.getClass().getName());
    }

    static List<Object> topicPartitions(Collection<TopicPartition> tps) {
        List<TopicPartition> sorted = new ArrayList<>(tps);
        sorted.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition())
                                                          : a.topic().compareTo(b.topic()));
        List<Object> out = Json.list();
        for (TopicPartition tp : sorted) out.add(Json.obj("topic", tp.topic(), "partition", tp.partition()));
        return out;
    }

    static Json callback(String type, Collection<TopicPartition> tps) {
        return withGroup(line(type).put("partitions", partitions(tps)).put("topic_partitions", topicPartitions(tps)));
    }

    static List<Object> partitions(Collection<TopicPartition> tps) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : tps) ps.add(tp.partition());
        Collections.sort(ps);
        return new ArrayList<>(ps);
    }

    static Json withGroup(Json j) {
        ConsumerGroupMetadata md = consumer.groupMetadata();
        return j.put("generation", md.generationId()).put("member_id", md.memberId());
    }

    /** commitSync() the position after the last record of each partition in this poll's batch. */
    static void commitBatch(ConsumerRecords<String, String> recs) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        List<Object> out = Json.list();
        for (TopicPartition tp : recs.partitions()) {
            List<ConsumerRecord<String, String>> rs = recs.records(tp);
            long next = rs.get(rs.size() - 1).offset() + 1;
            offsets.put(tp, new OffsetAndMetadata(next));
            out.add(Json.obj("partition", tp.partition(), "offset", next));
        }
        try {
            consumer.commitSync(offsets);
            emit(withGroup(line("committed").put("offsets", out).put("auto", true)));
        } catch (Exception e) {
            emit(errorJson("commit_error", e).put("offsets", out));
            e.printStackTrace();
        }
    }

    static int run(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: StaticConsumer BOOTSTRAP GROUP TOPIC [CONF...]");
            return 2;
        }
        Properties defaults = new Properties();
        // the consumer protocol (KIP-848) takes its heartbeat interval from the coordinator and refuses the setting
        if (!java.util.Arrays.asList(args).contains("group.protocol=consumer")) {
            defaults.put("heartbeat.interval.ms", "1000");
        }
        Properties p = ConsumerConf.of(args[0], args[1], defaults, args, 3);
        boolean commitEachPoll = Boolean.parseBoolean((String) p.remove("commit.each.poll"));
        String topic = args[2];
        instance = p.getProperty("group.instance.id");

        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String s;
                while ((s = in.readLine()) != null) {
                    s = s.trim();
                    if (!s.isEmpty()) commands.add(s);
                }
            } catch (Exception e) {
                // fall through: treat as EOF
            }
            commands.add("close");
        }, "stdin");
        reader.setDaemon(true);
        reader.start();

        consumer = new KafkaConsumer<>(p);
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                emit(callback("revoked", tps));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                emit(callback("assigned", tps));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> tps) {
                emit(callback("lost", tps));
            }
        };
        if (topic.startsWith("re2:")) {
            consumer.subscribe(new SubscriptionPattern(topic.substring(4)), listener);
        } else if (topic.startsWith("pattern:")) {
            consumer.subscribe(java.util.regex.Pattern.compile(topic.substring(8)), listener);
        } else {
            consumer.subscribe(Collections.singletonList(topic), listener);
        }
        emit(line("started"));

        while (true) {
            String cmd;
            while ((cmd = commands.poll()) != null) {
                switch (cmd) {
                    case "status":
                        emit(withGroup(line("status").put("partitions", partitions(consumer.assignment()))));
                        break;
                    case "commit": {
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        List<Object> out = Json.list();
                        for (TopicPartition tp : consumer.assignment()) {
                            long pos = consumer.position(tp);
                            offsets.put(tp, new OffsetAndMetadata(pos));
                            out.add(Json.obj("partition", tp.partition(), "offset", pos));
                        }
                        try {
                            consumer.commitSync(offsets);
                            emit(withGroup(line("committed").put("offsets", out)));
                        } catch (Exception e) {
                            emit(errorJson("commit_error", e));
                            e.printStackTrace();
                        }
                        break;
                    }
                    case "close":
                        consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT));
                        emit(line("closed"));
                        return 0;
                    case "leave":
                        consumer.close(CloseOptions.timeout(CLOSE_TIMEOUT).withGroupMembershipOperation(
                            CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
                        emit(line("closed"));
                        return 0;
                    default:
                        emit(line("unknown_command").put("command", cmd));
                }
            }
            ConsumerRecords<String, String> recs;
            try {
                recs = consumer.poll(POLL);
            } catch (Exception e) {
                emit(errorJson(e));
                e.printStackTrace();
                try {
                    consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
                } catch (Exception ignored) {
                    // already fenced/broken
                }
                emit(line("closed"));
                return 3;
            }
            for (ConsumerRecord<String, String> r : recs) {
                emit(line("record").put("partition", r.partition()).put("offset", r.offset())
                    .put("key", r.key()).put("value", r.value()));
            }
            if (commitEachPoll && !recs.isEmpty()) commitBatch(recs);
        }
    }
}
