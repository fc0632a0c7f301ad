import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Java Admin calls on the cluster's metadata and log dirs, for the release tests: one JSON line each.
 *
 * Usage: QuorumAdmin BOOTSTRAP LOG_DIR TOPIC
 *   {"type":"quorum","leader":..,"epoch":..,"high_watermark":..,"voters":[{"id":..,"log_end":..},..],
 *    "observers":n,"nodes":[ids]}                                 Admin.describeMetadataQuorum
 *   {"type":"log_dirs","ok":..,"error":exception or null,"wrong_dir_error":exception}
 *                                                                  Admin.alterReplicaLogDirs (TOPIC-0 on broker 0)
 *   {"type":"config_resources","resources":["TYPE:name",..],"topics":["name",..]}
 *                                                                  Admin.listConfigResources (all, then topics)
 *   {"type":"error","exception":..,"message":..} if a call throws; exit 3.
 */
public class QuorumAdmin {
    static void print(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String q(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static Throwable cause(Throwable t) {
        return (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
    }

    static String failure(org.apache.kafka.common.KafkaFuture<Void> f) {
        try {
            f.get();
            return null;
        } catch (Exception e) {
            return cause(e).getClass().getName();
        }
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "30000");
        String logDir = args[1], topic = args[2];
        try (Admin admin = Admin.create(p)) {
            QuorumInfo qi = admin.describeMetadataQuorum().quorumInfo().get();
            StringBuilder voters = new StringBuilder();
            for (QuorumInfo.ReplicaState r : qi.voters()) {
                if (voters.length() > 0) voters.append(',');
                voters.append("{\"id\":").append(r.replicaId()).append(",\"log_end\":").append(r.logEndOffset())
                      .append('}');
            }
            StringBuilder nodes = new StringBuilder();
            for (Integer id : qi.nodes().keySet()) {
                if (nodes.length() > 0) nodes.append(',');
                nodes.append(id);
            }
            print("{\"type\":\"quorum\",\"leader\":" + qi.leaderId() + ",\"epoch\":" + qi.leaderEpoch()
                  + ",\"high_watermark\":" + qi.highWatermark() + ",\"voters\":[" + voters + "],\"observers\":"
                  + qi.observers().size() + ",\"nodes\":[" + nodes + "]}");

            TopicPartitionReplica replica = new TopicPartitionReplica(topic, 0, 0);
            String here = failure(admin.alterReplicaLogDirs(Collections.singletonMap(replica, logDir))
                                       .values().get(replica));
            String elsewhere = failure(admin.alterReplicaLogDirs(Collections.singletonMap(replica, "/no/such/dir"))
                                            .values().get(replica));
            print("{\"type\":\"log_dirs\",\"error\":" + q(here) + ",\"wrong_dir_error\":" + q(elsewhere) + "}");

            StringBuilder all = new StringBuilder();
            for (ConfigResource r : admin.listConfigResources().all().get()) {
                if (all.length() > 0) all.append(',');
                all.append(q(r.type().name() + ":" + r.name()));
            }
            StringBuilder topics = new StringBuilder();
            Set<ConfigResource.Type> only = Collections.singleton(ConfigResource.Type.TOPIC);
            for (ConfigResource r : admin.listConfigResources(only,
                    new org.apache.kafka.clients.admin.ListConfigResourcesOptions()).all().get()) {
                if (topics.length() > 0) topics.append(',');
                topics.append(q(r.name()));
            }
            print("{\"type\":\"config_resources\",\"resources\":[" + all + "],\"topics\":[" + topics + "]}");
        } catch (Exception e) {
            Throwable c = cause(e);
            print("{\"type\":\"error\",\"exception\":" + q(c.getClass().getName()) + ",\"message\":"
                  + q(String.valueOf(c.getMessage())) + "}");
            System.exit(3);
        }
    }
}
