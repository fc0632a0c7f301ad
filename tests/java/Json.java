import java.util.ArrayList;
import java.util.List;

/**
 * Tiny hand-rolled JSON writer shared by the test programs in this directory.
 * Usage: Json.obj("type", "produced", "partition", 0, "key", "k0").print();
 * Values may be String, Number, Boolean, null, Json (nested object) or List.
 */
public final class Json {
    private final StringBuilder sb = new StringBuilder("{");
    private boolean first = true;

    public static Json obj(Object... kv) {
        Json j = new Json();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            j.put(String.valueOf(kv[i]), kv[i + 1]);
        }
        return j;
    }

    public Json put(String key, Object value) {
        if (!first) sb.append(',');
        first = false;
        quote(sb, key);
        sb.append(':');
        value(sb, value);
        return this;
    }

    @Override
    public String toString() {
        return sb.toString() + "}";
    }

    /** Print as one line on stdout and flush. */
    public void print() {
        System.out.println(this);
        System.out.flush();
    }

    static void value(StringBuilder out, Object v) {
        if (v == null) {
            out.append("null");
        } else if (v instanceof Json) {
            out.append(v.toString());
        } else if (v instanceof Number || v instanceof Boolean) {
            out.append(v);
        } else if (v instanceof Iterable) {
            out.append('[');
            boolean f = true;
            for (Object o : (Iterable<?>) v) {
                if (!f) out.append(',');
                f = false;
                value(out, o);
            }
            out.append(']');
        } else {
            quote(out, v.toString());
        }
    }

    static void quote(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
            }
        }
        out.append('"');
    }

    public static String hex(byte[] b) {
        if (b == null) return null;
        StringBuilder out = new StringBuilder(b.length * 2);
        for (byte x : b) out.append(String.format("%02x", x & 0xff));
        return out.toString();
    }

    public static List<Object> list() {
        return new ArrayList<>();
    }

    /** Report an exception as {"type":"error",...} on stdout, stack trace on stderr. */
    public static void error(Throwable t) {
        Throwable root = t;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        obj("type", "error",
            "exception", t.getClass().getName(),
            "message", String.valueOf(t.getMessage()),
            "root_exception", root.getClass().getName(),
            "root_message", String.valueOf(root.getMessage())).print();
        t.printStackTrace();
    }
}
