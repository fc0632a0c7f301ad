import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.kafka.clients.Metadata;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.utils.LogContext;

/**
 * One Metadata request by topic ids, built, sent, read and parsed by kafka-clients' own classes (as a consumer
 * subscribed with a SubscriptionPattern asks for the topics of its assignment), and the answer then given to the
 * client's Metadata cache exactly as its NetworkClient does (Metadata.update).
 *
 * Usage: MetadataByTopicId HOST:PORT TOPIC_ID... (Kafka's base64 form)
 *
 * stdout: {"type":"topic","topic_id":..,"name":..|null,"error":"NONE"|..} per topic of the answer, then
 *         {"type":"update","outcome":"ok"} or {"type":"update","outcome":"<exception class>","at":"<frame>"}
 */
public class MetadataByTopicId {
    public static void main(String[] args) throws Exception {
        String[] hp = args[0].split(":");
        Set<Uuid> ids = new HashSet<>();
        for (int i = 1; i < args.length; i++) ids.add(Uuid.fromString(args[i]));
        short version = 12;
        RequestHeader header = new RequestHeader(ApiKeys.METADATA, version, "java-metadata", 1);
        MetadataRequest request = MetadataRequest.Builder.forTopicIds(ids).build(version);
        ByteBuffer out = request.serializeWithHeader(header);
        MetadataResponse response;
        try (Socket s = new Socket(hp[0], Integer.parseInt(hp[1]))) {
            OutputStream os = s.getOutputStream();
            byte[] body = new byte[out.remaining()];
            out.get(body);
            os.write(ByteBuffer.allocate(4).putInt(body.length).array());
            os.write(body);
            os.flush();
            DataInputStream in = new DataInputStream(s.getInputStream());
            byte[] frame = new byte[in.readInt()];
            in.readFully(frame);
            response = (MetadataResponse) AbstractResponse.parseResponse(ByteBuffer.wrap(frame), header);
        }
        for (MetadataResponseData.MetadataResponseTopic t : response.data().topics()) {
            Json.obj("type", "topic", "topic_id", t.topicId().toString(), "name", t.name(),
                     "error", org.apache.kafka.common.protocol.Errors.forCode(t.errorCode()).name()).print();
        }
        Metadata metadata = new Metadata(100, 1000, 300000, new LogContext(), new ClusterResourceListeners());
        try {
            metadata.updateWithCurrentRequestVersion(response, false, System.currentTimeMillis());
            List<Object> names = new ArrayList<>(metadata.topicNames().values());
            Json.obj("type", "update", "outcome", "ok", "names", names).print();
        } catch (RuntimeException e) {
            String at = "";
            for (StackTraceElement f : e.getStackTrace()) {
                if (f.getClassName().startsWith("org.apache.kafka")) {
                    at = f.getClassName() + "." + f.getMethodName();
                    break;
                }
            }
            Json.obj("type", "update", "outcome", e.getClass().getName(), "at", at).print();
        }
    }
}
