import java.io.File;
import java.nio.ByteBuffer;
import java.util.List;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.internal.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;

/**
 * Read tenure segment files with Kafka's own segment reader (kafka-clients 4.3's FileRecords, the
 * class a broker's LogSegment and kafka-dump-log use), to prove the files are byte-compatible.
 *
 * Usage: SegmentReader FILE...        (each a <20-digit base offset>.log segment file)
 *
 * Each file is opened read-only (FileRecords.open(file, false), as kafka-dump-log does) and every
 * batch from batches() is checked with ensureValid() (size, magic, CRC-32C) before its records are read.
 *
 * Output (stdout, one JSON object per line):
 *   {"type":"file","file":..,"bytes":..}
 *   {"type":"batch","file":..,"position":..,"base_offset":..,"last_offset":..,"count":..,"magic":..,
 *    "crc":..,"control":..,"records":[{"offset":..,"timestamp":..,"key":<hex>|null,"value":<hex>|null,
 *    "headers":[{"key":..,"value":<hex>|null},..]},..]}
 *   {"type":"done","files":..,"batches":..,"records":..}
 * On failure (e.g. ensureValid() throwing CorruptRecordException): {"type":"error",...}, exit 1.
 */
public class SegmentReader {
    public static void main(String[] args) {
        try {
            System.exit(run(args));
        } catch (Throwable t) {
            Json.error(t);
            System.exit(1);
        }
    }

    static String hex(ByteBuffer b) {
        if (b == null) return null;
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return Json.hex(out);
    }

    static int run(String[] args) throws Exception {
        if (args.length == 0) {
            System.err.println("usage: SegmentReader FILE...");
            return 2;
        }
        int batches = 0, records = 0;
        for (String name : args) {
            File file = new File(name);
            try (FileRecords fr = FileRecords.open(file, false)) {
                Json.obj("type", "file", "file", name, "bytes", fr.sizeInBytes()).print();
                for (FileChannelRecordBatch batch : fr.batches()) {
                    batch.ensureValid();
                    List<Object> recs = Json.list();
                    for (Record r : batch) {
                        List<Object> headers = Json.list();
                        for (Header h : r.headers()) {
                            headers.add(Json.obj("key", h.key(), "value", Json.hex(h.value())));
                        }
                        recs.add(Json.obj("offset", r.offset(), "timestamp", r.timestamp(),
                                          "key", hex(r.key()), "value", hex(r.value()), "headers", headers));
                        records++;
                    }
                    Json.obj("type", "batch", "file", name, "position", batch.position(),
                             "base_offset", batch.baseOffset(), "last_offset", batch.lastOffset(),
                             "count", batch.countOrNull(), "magic", (int) batch.magic(),
                             "crc", batch.checksum(), "control", batch.isControlBatch(),
                             "records", recs).print();
                    batches++;
                }
            }
        }
        Json.obj("type", "done", "files", args.length, "batches", batches, "records", records).print();
        return 0;
    }
}
