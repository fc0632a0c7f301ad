import java.util.Properties;

import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The consumer settings the group test programs in this directory share: a classic-protocol consumer of
 * string records that commits only when told to and starts from the earliest offset, with key=value
 * overrides from the command line.
 */
public final class ConsumerConf {
    private ConsumerConf() {
    }

    /** Defaults for BOOTSTRAP and GROUP, then `extra` (defaults the caller adds), then args[from..] as key=value. */
    public static Properties of(String bootstrap, String group, Properties extra, String[] args, int from) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", "classic");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.putAll(extra);
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) throw new IllegalArgumentException("bad CONF (want key=value): " + args[i]);
            p.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return p;
    }
}
