import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.DeleteShareGroupStateRequestData;
import org.apache.kafka.common.message.DeleteShareGroupStateResponseDataJsonConverter;
import org.apache.kafka.common.message.InitializeShareGroupStateRequestData;
import org.apache.kafka.common.message.InitializeShareGroupStateResponseDataJsonConverter;
import org.apache.kafka.common.message.ReadShareGroupStateRequestData;
import org.apache.kafka.common.message.ReadShareGroupStateResponseDataJsonConverter;
import org.apache.kafka.common.message.ReadShareGroupStateSummaryRequestData;
import org.apache.kafka.common.message.ReadShareGroupStateSummaryResponseDataJsonConverter;
import org.apache.kafka.common.message.WriteShareGroupStateRequestData;
import org.apache.kafka.common.message.WriteShareGroupStateResponseDataJsonConverter;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.DeleteShareGroupStateRequest;
import org.apache.kafka.common.requests.DeleteShareGroupStateResponse;
import org.apache.kafka.common.requests.InitializeShareGroupStateRequest;
import org.apache.kafka.common.requests.InitializeShareGroupStateResponse;
import org.apache.kafka.common.requests.ReadShareGroupStateRequest;
import org.apache.kafka.common.requests.ReadShareGroupStateResponse;
import org.apache.kafka.common.requests.ReadShareGroupStateSummaryRequest;
import org.apache.kafka.common.requests.ReadShareGroupStateSummaryResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.WriteShareGroupStateRequest;
import org.apache.kafka.common.requests.WriteShareGroupStateResponse;

/**
 * The share coordinator's APIs as a Kafka 4.3 broker's persister speaks them: the requests built and
 * serialized by kafka-clients' own request classes, sent over a socket, the answers parsed by its response
 * classes and printed with its JSON converters - one line per step.
 *
 * Usage: ShareStateRpc HOST:PORT STEP...
 *   init:GROUP:TOPIC_ID:PARTITION:STATE_EPOCH:START_OFFSET
 *   write:GROUP:TOPIC_ID:PARTITION:STATE_EPOCH:LEADER_EPOCH:START_OFFSET:FIRST-LAST-STATE-COUNT,...   (v1)
 *   read:GROUP:TOPIC_ID:PARTITION:LEADER_EPOCH
 *   summary:GROUP:TOPIC_ID:PARTITION:LEADER_EPOCH                                                   (v1)
 *   delete:GROUP:TOPIC_ID:PARTITION
 * Prints {"type":"response","step":"init",...,"data":{the response as Kafka's JSON converter writes it}}.
 * TOPIC_ID is Kafka's Uuid string. {"type":"error",...} if a step throws; exit 3.
 */
public final class ShareStateRpc {
    public static void main(String[] args) throws Exception {
        String[] hp = args[0].split(":");
        try (Socket s = new Socket(hp[0], Integer.parseInt(hp[1]))) {
            s.setSoTimeout(20000);
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            DataInputStream in = new DataInputStream(s.getInputStream());
            int correlation = 0;
            for (int i = 1; i < args.length; i++) {
                String[] f = args[i].split(":");
                String step = f[0];
                AbstractRequest req = request(f);
                RequestHeader header = new RequestHeader(req.apiKey(), req.version(), "share-state-rpc", ++correlation);
                ByteBuffer buf = req.serializeWithHeader(header);
                out.writeInt(buf.remaining());
                out.write(buf.array(), buf.arrayOffset() + buf.position(), buf.remaining());
                out.flush();
                byte[] answer = new byte[in.readInt()];
                in.readFully(answer);
                AbstractResponse resp = AbstractResponse.parseResponse(ByteBuffer.wrap(answer), header);
                System.out.println(String.format("{\"type\":\"response\",\"step\":\"%s\",\"version\":%d,\"data\":%s}",
                    step, req.version(), json(resp, req.version())));
                System.out.flush();
            }
        } catch (Exception e) {
            Json.obj("type", "error", "exception", e.getClass().getName(), "message", String.valueOf(e.getMessage())).print();
            System.exit(3);
        }
    }

    static AbstractRequest request(String[] f) {
        String group = f[1];
        Uuid topic = Uuid.fromString(f[2]);
        int partition = Integer.parseInt(f[3]);
        switch (f[0]) {
            case "init":
                return new InitializeShareGroupStateRequest.Builder(new InitializeShareGroupStateRequestData()
                    .setGroupId(group)
                    .setTopics(List.of(new InitializeShareGroupStateRequestData.InitializeStateData()
                        .setTopicId(topic)
                        .setPartitions(List.of(new InitializeShareGroupStateRequestData.PartitionData()
                            .setPartition(partition)
                            .setStateEpoch(Integer.parseInt(f[4]))
                            .setStartOffset(Long.parseLong(f[5]))))))).build((short) 0);
            case "write": {
                List<WriteShareGroupStateRequestData.StateBatch> batches = new ArrayList<>();
                if (f.length > 7 && !f[7].isEmpty()) {
                    for (String b : f[7].split(",")) {
                        String[] x = b.split("-");
                        batches.add(new WriteShareGroupStateRequestData.StateBatch()
                            .setFirstOffset(Long.parseLong(x[0])).setLastOffset(Long.parseLong(x[1]))
                            .setDeliveryState(Byte.parseByte(x[2])).setDeliveryCount(Short.parseShort(x[3])));
                    }
                }
                return new WriteShareGroupStateRequest.Builder(new WriteShareGroupStateRequestData()
                    .setGroupId(group)
                    .setTopics(List.of(new WriteShareGroupStateRequestData.WriteStateData()
                        .setTopicId(topic)
                        .setPartitions(List.of(new WriteShareGroupStateRequestData.PartitionData()
                            .setPartition(partition)
                            .setStateEpoch(Integer.parseInt(f[4]))
                            .setLeaderEpoch(Integer.parseInt(f[5]))
                            .setStartOffset(Long.parseLong(f[6]))
                            .setDeliveryCompleteCount(0)
                            .setStateBatches(batches)))))).build((short) 1);
            }
            case "read":
                return new ReadShareGroupStateRequest.Builder(new ReadShareGroupStateRequestData()
                    .setGroupId(group)
                    .setTopics(List.of(new ReadShareGroupStateRequestData.ReadStateData()
                        .setTopicId(topic)
                        .setPartitions(List.of(new ReadShareGroupStateRequestData.PartitionData()
                            .setPartition(partition)
                            .setLeaderEpoch(Integer.parseInt(f[4]))))))).build((short) 0);
            case "summary":
                return new ReadShareGroupStateSummaryRequest.Builder(new ReadShareGroupStateSummaryRequestData()
                    .setGroupId(group)
                    .setTopics(List.of(new ReadShareGroupStateSummaryRequestData.ReadStateSummaryData()
                        .setTopicId(topic)
                        .setPartitions(List.of(new ReadShareGroupStateSummaryRequestData.PartitionData()
                            .setPartition(partition)
                            .setLeaderEpoch(Integer.parseInt(f[4]))))))).build((short) 1);
            case "delete":
                return new DeleteShareGroupStateRequest.Builder(new DeleteShareGroupStateRequestData()
                    .setGroupId(group)
                    .setTopics(List.of(new DeleteShareGroupStateRequestData.DeleteStateData()
                        .setTopicId(topic)
                        .setPartitions(List.of(new DeleteShareGroupStateRequestData.PartitionData()
                            .setPartition(partition)))))).build((short) 0);
            default:
                throw new IllegalArgumentException("unknown step " + f[0]);
        }
    }

    static String json(AbstractResponse resp, short version) {
        if (resp instanceof InitializeShareGroupStateResponse r)
            return InitializeShareGroupStateResponseDataJsonConverter.write(r.data(), version).toString();
        if (resp instanceof WriteShareGroupStateResponse r)
            return WriteShareGroupStateResponseDataJsonConverter.write(r.data(), version).toString();
        if (resp instanceof ReadShareGroupStateResponse r)
            return ReadShareGroupStateResponseDataJsonConverter.write(r.data(), version).toString();
        if (resp instanceof ReadShareGroupStateSummaryResponse r)
            return ReadShareGroupStateSummaryResponseDataJsonConverter.write(r.data(), version).toString();
        if (resp instanceof DeleteShareGroupStateResponse r)
            return DeleteShareGroupStateResponseDataJsonConverter.write(r.data(), version).toString();
        throw new IllegalStateException("unexpected response " + resp);
    }
}
