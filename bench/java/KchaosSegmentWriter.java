// Real Kafka segment files written with Kafka's own MemoryRecords builder, for the data-log tests
// and bench (bench/segments.py compiles and runs it; the record package is rewritten there for
// releases that moved it to record.internal).
//
//   java KchaosSegmentWriter spec <root>       lines on stdin, below
//   java KchaosSegmentWriter synth <root> <topic> <partitions> <records per partition> <per batch>
//
// spec lines:
//   segment <topic>-<p>/<name>.log                 the file the next batches go to
//   data <base> <pid> <pepoch> <lepoch> <txn 0|1> <seq> <ts> <compression> <payload> ...
//   marker <base> <pid> <pepoch> <lepoch> <COMMIT|ABORT> <ts>
//   bytes <hex>                                    raw bytes appended (a corrupt or cut tail)
// A payload is written as its text's bytes; \N is a record without a value. Records of a data
// batch take offsets base, base+1, ...
// synth: partition p's record i has value p * 1_000_000_000 + i at offset i, in batches of
// <per batch> records of producerId 1000 + p, epoch 0, sequence i, not transactional.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;

public class KchaosSegmentWriter {
    public static void main(String[] args) throws Exception {
        Path root = Path.of(args[1]);
        if (args[0].equals("spec")) {
            spec(root);
        } else {
            synth(root, args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]), Integer.parseInt(args[5]));
        }
    }

    static final Map<Path, FileChannel> open = new HashMap<>();

    static FileChannel file(Path path) throws IOException {
        FileChannel ch = open.get(path);
        if (ch == null) {
            Files.createDirectories(path.getParent());
            ch = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING);
            open.put(path, ch);
        }
        return ch;
    }

    static void write(FileChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) ch.write(b);
    }

    static void spec(Path root) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        FileChannel ch = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.split(" ");
            switch (w[0]) {
                case "segment":
                    ch = file(root.resolve(w[1]));
                    break;
                case "data": {
                    long base = Long.parseLong(w[1]);
                    int n = w.length - 9;
                    ByteBuffer buf = ByteBuffer.allocate(1024 + n * 64 + line.length() * 2);
                    MemoryRecordsBuilder b = MemoryRecords.builder(buf, RecordBatch.CURRENT_MAGIC_VALUE,
                            Compression.of(w[8]).build(), TimestampType.CREATE_TIME, base, RecordBatch.NO_TIMESTAMP,
                            Long.parseLong(w[2]), Short.parseShort(w[3]), Integer.parseInt(w[6]),
                            w[5].equals("1"), false, Integer.parseInt(w[4]));
                    long ts = Long.parseLong(w[7]);
                    for (int i = 0; i < n; i++) {
                        String p = w[9 + i];
                        byte[] value = p.equals("\\N") ? null : p.getBytes(StandardCharsets.UTF_8);
                        b.appendWithOffset(base + i, ts, "k".getBytes(StandardCharsets.UTF_8), value);
                    }
                    write(ch, b.build().buffer());
                    break;
                }
                case "marker": {
                    ControlRecordType t = w[5].equals("COMMIT") ? ControlRecordType.COMMIT : ControlRecordType.ABORT;
                    MemoryRecords m = MemoryRecords.withEndTransactionMarker(Long.parseLong(w[1]),
                            Long.parseLong(w[6]), Integer.parseInt(w[4]), Long.parseLong(w[2]),
                            Short.parseShort(w[3]), new EndTransactionMarker(t, 0));
                    write(ch, m.buffer());
                    break;
                }
                case "bytes": {
                    String hex = w.length > 1 ? w[1] : "";
                    byte[] raw = new byte[hex.length() / 2];
                    for (int i = 0; i < raw.length; i++) {
                        raw[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
                    }
                    write(ch, ByteBuffer.wrap(raw));
                    break;
                }
                default:
                    throw new IllegalArgumentException("not a spec line: " + line);
            }
        }
        for (FileChannel c : open.values()) c.close();
    }

    static void synth(Path root, String topic, int partitions, long perPartition, int perBatch) throws IOException {
        ByteBuffer buf = ByteBuffer.allocate(1024 + perBatch * 64);
        byte[] key = "k".getBytes(StandardCharsets.UTF_8);
        for (int p = 0; p < partitions; p++) {
            FileChannel ch = file(root.resolve(topic + "-" + p).resolve("00000000000000000000.log"));
            for (long base = 0; base < perPartition; base += perBatch) {
                buf.clear();
                MemoryRecordsBuilder b = MemoryRecords.builder(buf, RecordBatch.CURRENT_MAGIC_VALUE,
                        Compression.NONE, TimestampType.CREATE_TIME, base, RecordBatch.NO_TIMESTAMP,
                        1000L + p, (short) 0, (int) base, false, false, 0);
                long end = Math.min(perPartition, base + perBatch);
                for (long i = base; i < end; i++) {
                    long value = p * 1_000_000_000L + i;
                    b.appendWithOffset(i, 1_800_000_000_000L + i,
                            key, Long.toString(value).getBytes(StandardCharsets.UTF_8));
                }
                write(ch, b.build().buffer());
            }
            ch.close();
        }
    }
}
