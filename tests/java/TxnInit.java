import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer's initTransactions(), timed: tenure serves no transactions and must say so
 * at once.
 *
 * Usage: TxnInit BOOTSTRAP TRANSACTIONAL_ID
 *
 * Output (stdout, one JSON object per line):
 *   {"type":"refused","exception":<class name>,"message":..,"ms":<elapsed>}   initTransactions threw
 *   {"type":"initialised","ms":..}                                           it did not
 */
public class TxnInit {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("transactional.id", args[1]);
        p.put("max.block.ms", "60000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        long t0 = System.currentTimeMillis();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            try {
                producer.initTransactions();
                Json.obj("type", "initialised", "ms", System.currentTimeMillis() - t0).print();
            } catch (RuntimeException e) {
                Json.obj("type", "refused", "exception", e.getClass().getName(), "message", e.getMessage(),
                         "ms", System.currentTimeMillis() - t0).print();
            }
        }
        System.exit(0);
    }
}
