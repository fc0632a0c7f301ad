import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java Admin client's share group operations (KIP-932), one per run, for the share group tests.
 *
 * Usage: ShareAdmin BOOTSTRAP COMMAND ARGS... [+ COMMAND ARGS...]...  (one line per command, in order)
 *   describe GROUP                  -> {"type":"described","state":..,"group_epoch":..,"assignment_epoch":..,
 *                                       "members":[{"member_id":..,"client_id":..,"partitions":[..]}]}
 *   offsets GROUP                   -> {"type":"offsets","partitions":[{"topic":..,"partition":..,"start_offset":..,
 *                                       "lag":..}]}   (listShareGroupOffsets: every share partition of the group)
 *   alter GROUP TOPIC PARTITION OFFSET -> {"type":"altered"}
 *   delete-offsets GROUP TOPIC      -> {"type":"deleted"}
 *   list-share-groups -             -> {"type":"listed","groups":[{"group":..,"type":..,"protocol":..,"state":..}]}
 *                                      (Admin.listGroups(ListGroupsOptions.forShareGroups()))
 * A failure prints {"type":"error","exception":..,"message":..} (the cause of an ExecutionException) and exits 0.
 */
public final class ShareAdmin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            List<String> command = new ArrayList<>();
            command.add(args[0]);
            for (int i = 1; i <= args.length; i++) {
                if (i < args.length && !args[i].equals("+")) {
                    command.add(args[i]);
                    continue;
                }
                try {
                    run(admin, command.toArray(new String[0]));
                } catch (java.util.concurrent.ExecutionException e) {
                    Throwable c = e.getCause();
                    Json.obj("type", "error", "exception", c.getClass().getName(),
                             "message", String.valueOf(c.getMessage())).print();
                }
                command = new ArrayList<>();
                command.add(args[0]);
            }
        }
    }

    private static void run(Admin admin, String[] args) throws Exception {
        String group = args[2];
        switch (args[1]) {
            case "describe": {
                ShareGroupDescription d = admin.describeShareGroups(Collections.singletonList(group)).all().get().get(group);
                List<Object> members = new ArrayList<>();
                for (ShareMemberDescription m : d.members()) {
                    List<Object> parts = new ArrayList<>();
                    for (TopicPartition tp : m.assignment().topicPartitions()) parts.add(tp.topic() + "-" + tp.partition());
                    Collections.sort(parts, (a, b) -> a.toString().compareTo(b.toString()));
                    members.add(Json.obj("member_id", m.consumerId(), "client_id", m.clientId(), "partitions", parts));
                }
                Json.obj("type", "described", "state", d.groupState().toString(), "group_epoch", d.groupEpoch(),
                         "assignment_epoch", d.targetAssignmentEpoch(), "members", members).print();
                break;
            }
            case "offsets": {
                Map<TopicPartition, SharePartitionOffsetInfo> got = admin.listShareGroupOffsets(
                    Collections.singletonMap(group, new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(group).get();
                Map<String, SharePartitionOffsetInfo> sorted = new TreeMap<>();
                for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : got.entrySet()) {
                    sorted.put(e.getKey().topic() + "\u0000" + e.getKey().partition(), e.getValue());
                }
                List<Object> parts = new ArrayList<>();
                for (Map.Entry<String, SharePartitionOffsetInfo> e : sorted.entrySet()) {
                    String[] tp = e.getKey().split("\u0000");
                    SharePartitionOffsetInfo i = e.getValue();
                    parts.add(Json.obj("topic", tp[0], "partition", Integer.parseInt(tp[1]),
                                       "start_offset", i == null ? null : i.startOffset(),
                                       "lag", i == null ? null : i.lag().orElse(null)));
                }
                Json.obj("type", "offsets", "partitions", parts).print();
                break;
            }
            case "alter": {
                admin.alterShareGroupOffsets(group, Collections.singletonMap(
                    new TopicPartition(args[3], Integer.parseInt(args[4])), Long.parseLong(args[5]))).all().get();
                Json.obj("type", "altered").print();
                break;
            }
            case "delete-offsets": {
                admin.deleteShareGroupOffsets(group, Collections.singleton(args[3])).all().get();
                Json.obj("type", "deleted").print();
                break;
            }
            case "list-share-groups": {
                List<Object> groups = new ArrayList<>();
                for (GroupListing g : admin.listGroups(ListGroupsOptions.forShareGroups()).all().get()) {
                    groups.add(Json.obj("group", g.groupId(), "type", g.type().map(Object::toString).orElse(null),
                                        "protocol", g.protocol(),
                                        "state", g.groupState().map(Object::toString).orElse(null)));
                }
                Json.obj("type", "listed", "groups", groups).print();
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + args[1]);
        }
    }
}
