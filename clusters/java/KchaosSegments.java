// The brokers' queue-topic segments decoded with Kafka's own record classes into fixed-width
// little-endian rows (clusters/data_logs.py runs it; docs/history.md, "Files beside the history",
// has the layout; checkers/families/data_log/segments.py reads it).
//
//   java KchaosSegments <out-dir> <broker>=<raw-dir> ...
//
// For each broker, every <raw-dir>/<topic>-<p>/<segment>.log in (partition, segment) order is read
// a batch at a time, and three files are written into <out-dir>:
//   <broker>.batches.bin  one 80-byte row per batch (BATCH_ROW below)
//   <broker>.records.bin  one 16-byte row per data record: offset, value (int64 each)
//   <broker>.decoded.json the segments read, what could not be read, and the payloads that are
//                         not decimal int64s; written last, so its presence says the rows are whole
// Brokers are decoded on threads of their own (at most one per core). A segment that cannot be
// read whole is a note, never an exit: a batch whose records do not decode is left out, a file
// whose next batch header is corrupt or cut short is read up to there. The Kafka release's record
// package is rewritten by clusters/data_logs.py where it moved to record.internal (4.x).

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.FileLogInputStream;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;

public class KchaosSegments {
    static final String FORMAT = "kchaos-segments 1";
    // Batch row: position, base, last, producerId, maxTimestamp, first record row (int64);
    // partition, segment, partitionLeaderEpoch, baseSequence, count, data records (int32);
    // producerEpoch (int16); flags (uint8: 1 transactional, 2 control, 4 CRC mismatch,
    // 8 LogAppendTime); marker (int8: 0 none, 1 COMMIT, 2 ABORT, 3 another control record); 4 pad.
    static final int BATCH_ROW = 80;
    static final int RECORD_ROW = 16;
    // Payload texts kept for evidence, and how much of each (the rows are flagged all the same).
    static final int ODD_TEXTS = 1000;
    static final int ODD_CHARS = 200;

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: KchaosSegments <out-dir> <broker>=<raw-dir> ...");
            System.exit(2);
        }
        Path out = Path.of(args[0]);
        Files.createDirectories(out);
        int threads = Math.max(1, Math.min(args.length - 1, Runtime.getRuntime().availableProcessors()));
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<?>> done = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            String broker = args[i].substring(0, eq);
            Path raw = Path.of(args[i].substring(eq + 1));
            done.add(pool.submit(() -> {
                new Broker(broker, raw, out).decode();
                return null;
            }));
        }
        int failed = 0;
        for (Future<?> f : done) {
            try {
                f.get();
            } catch (Exception e) {
                failed++;
                Throwable cause = e.getCause() != null ? e.getCause() : e;
                System.err.println("KchaosSegments: " + cause);
            }
        }
        pool.shutdown();
        System.exit(failed == 0 ? 0 : 1);
    }

    /** One broker's segments into its three files. */
    static final class Broker {
        final String name;
        final Path raw;
        final Path out;
        final Rows batches;
        final Rows records;
        final StringBuilder segments = new StringBuilder();
        final StringBuilder notes = new StringBuilder();
        final StringBuilder odd = new StringBuilder();
        long nBatches = 0, nRecords = 0, nOdd = 0;
        String topic = null;

        Broker(String name, Path raw, Path out) throws IOException {
            this.name = name;
            this.raw = raw;
            this.out = out;
            this.batches = new Rows(out.resolve(name + ".batches.bin"));
            this.records = new Rows(out.resolve(name + ".records.bin"));
        }

        void decode() throws IOException {
            List<Segment> files = Segment.under(raw, this);
            int seg = 0;
            for (Segment s : files) {
                read(s, seg++);
            }
            batches.close();
            records.close();
            StringBuilder json = new StringBuilder();
            json.append("{\"format\": ").append(quote(FORMAT))
                .append(", \"broker\": ").append(quote(name))
                .append(", \"topic\": ").append(topic == null ? "null" : quote(topic))
                .append(", \"batches\": ").append(nBatches)
                .append(", \"records\": ").append(nRecords)
                .append(", \"odd_payloads\": ").append(nOdd)
                .append(",\n \"segments\": [").append(segments).append("]")
                .append(",\n \"notes\": [").append(notes).append("]")
                .append(",\n \"odd\": [").append(odd).append("]}\n");
            Path json_ = out.resolve(name + ".decoded.json");
            Path tmp = out.resolve(name + ".decoded.json.partial");
            Files.writeString(tmp, json.toString());
            Files.move(tmp, json_, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        }

        void note(String file, String what) {
            if (notes.length() > 0) notes.append(",\n  ");
            notes.append(quote("data/" + name + "-raw/" + file + ": " + what));
        }

        void read(Segment s, int seg) throws IOException {
            long firstBatch = nBatches, firstRecord = nRecords;
            long fileSize = Files.size(s.path);
            long end = 0; // where the last whole batch read ends
            String stopped = null;
            try (FileRecords fr = FileRecords.open(s.path.toFile(), false)) {
                Iterator<FileLogInputStream.FileChannelRecordBatch> it = fr.batches().iterator();
                while (true) {
                    FileLogInputStream.FileChannelRecordBatch fb;
                    try {
                        if (!it.hasNext()) break;
                        fb = it.next();
                    } catch (RuntimeException e) {
                        stopped = "position " + end + ": " + e.getMessage();
                        break;
                    }
                    end = (long) fb.position() + fb.sizeInBytes();
                    batch(s, seg, fb);
                }
            } catch (RuntimeException e) {
                stopped = "cannot open: " + e.getMessage();
            }
            if (stopped != null) {
                note(s.rel, stopped + "; the " + (fileSize - end) + " bytes from position " + end
                        + " are not decoded");
            } else if (end < fileSize) {
                note(s.rel, "the " + (fileSize - end) + " bytes from position " + end
                        + " are not a whole batch (the file was cut short): not decoded");
            }
            if (segments.length() > 0) segments.append(",\n  ");
            segments.append("{\"file\": ").append(quote(s.rel))
                .append(", \"partition\": ").append(s.partition)
                .append(", \"bytes\": ").append(fileSize)
                .append(", \"decoded_bytes\": ").append(end)
                .append(", \"first_batch\": ").append(firstBatch)
                .append(", \"batches\": ").append(nBatches - firstBatch)
                .append(", \"first_record\": ").append(firstRecord)
                .append(", \"records\": ").append(nRecords - firstRecord).append("}");
        }

        void batch(Segment s, int seg, FileLogInputStream.FileChannelRecordBatch b) throws IOException {
            int flags = 0;
            int marker = 0;
            long first = nRecords;
            int n = 0;
            // Records decoded before a failure are left out with the batch: rows are written only
            // once the whole batch has decoded.
            long[] offsets;
            long[] values;
            int count;
            try {
                if (b.isTransactional()) flags |= 1;
                if (b.isControlBatch()) flags |= 2;
                if (!b.isValid()) flags |= 4;
                if (b.timestampType().id == 1) flags |= 8;
                Integer c = b.countOrNull();
                count = c == null ? -1 : c;
                int cap = Math.max(1, Math.min(count < 0 ? 16 : count, 1 << 20));
                offsets = new long[cap];
                values = new long[cap];
                List<Object[]> oddHere = null;
                for (Record r : b) {
                    if (b.isControlBatch()) {
                        ControlRecordType t = ControlRecordType.parse(r.key());
                        marker = t == ControlRecordType.COMMIT ? 1 : t == ControlRecordType.ABORT ? 2 : 3;
                        continue;
                    }
                    if (n == offsets.length) {
                        offsets = java.util.Arrays.copyOf(offsets, n * 2);
                        values = java.util.Arrays.copyOf(values, n * 2);
                    }
                    offsets[n] = r.offset();
                    ByteBuffer v = r.value();
                    long parsed = v == null ? BAD : decimal(v);
                    if (parsed == BAD) {
                        if (oddHere == null) oddHere = new ArrayList<>();
                        oddHere.add(new Object[] {first + n, v == null ? null : text(v)});
                        parsed = 0;
                    }
                    values[n] = parsed;
                    n++;
                }
                if (oddHere != null) {
                    for (Object[] o : oddHere) {
                        if (odd.length() > 0) odd.append(",\n  ");
                        String t = nOdd < ODD_TEXTS ? (String) o[1] : null;
                        odd.append("[").append(o[0]).append(", ").append(t == null ? "null" : quote(t)).append("]");
                        nOdd++;
                    }
                }
            } catch (RuntimeException e) {
                note(s.rel, "batch at position " + b.position() + " (offsets " + b.baseOffset() + ".."
                        + b.lastOffset() + ") does not decode: " + e.getMessage() + "; left out");
                return;
            }
            if ((flags & 4) != 0) {
                note(s.rel, "batch at position " + b.position() + " (offsets " + b.baseOffset() + ".."
                        + b.lastOffset() + ") fails its CRC check; its records are kept as they read");
            }
            for (int i = 0; i < n; i++) {
                records.putLong(offsets[i]);
                records.putLong(values[i]);
            }
            nRecords += n;
            batches.putLong(b.position());
            batches.putLong(b.baseOffset());
            batches.putLong(b.lastOffset());
            batches.putLong(b.producerId());
            batches.putLong(b.maxTimestamp());
            batches.putLong(first);
            batches.putInt(s.partition);
            batches.putInt(seg);
            batches.putInt(b.partitionLeaderEpoch());
            batches.putInt(b.baseSequence());
            batches.putInt(count);
            batches.putInt(n);
            batches.putShort(b.producerEpoch());
            batches.putByte((byte) flags);
            batches.putByte((byte) marker);
            batches.putInt(0);
            nBatches++;
        }
    }

    static final long BAD = Long.MIN_VALUE;

    /** The payload as a decimal int64 written as Python's str(int) writes it, else BAD (which
     * Long.MIN_VALUE's own text is too: no kchaos value is that). */
    static long decimal(ByteBuffer v) {
        int p = v.position(), end = v.limit();
        if (p == end) return BAD;
        boolean neg = v.get(p) == '-';
        if (neg) p++;
        if (p == end || end - p > 19) return BAD;
        if (v.get(p) == '0' && (end - p > 1 || neg)) return BAD; // leading zero, or -0
        long acc = 0; // accumulated negative, so that Long.MIN_VALUE fits
        for (int i = p; i < end; i++) {
            int d = v.get(i) - '0';
            if (d < 0 || d > 9) return BAD;
            if (acc < (Long.MIN_VALUE + d) / 10) return BAD;
            acc = acc * 10 - d;
        }
        if (neg) return acc;
        if (acc == Long.MIN_VALUE) return BAD;
        return -acc;
    }

    static String text(ByteBuffer v) {
        ByteBuffer d = v.duplicate();
        int len = Math.min(d.remaining(), ODD_CHARS * 4);
        byte[] bytes = new byte[len];
        d.get(bytes);
        String s = new String(bytes, StandardCharsets.UTF_8);
        return s.length() > ODD_CHARS ? s.substring(0, ODD_CHARS) : s;
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || (c >= 0xd800 && c <= 0xdfff)) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    /** One segment file: <raw>/<topic>-<p>/<name>.log. */
    static final class Segment {
        final Path path;
        final String rel;
        final int partition;
        final String topic;

        Segment(Path path, String rel, String topic, int partition) {
            this.path = path;
            this.rel = rel;
            this.topic = topic;
            this.partition = partition;
        }

        static List<Segment> under(Path raw, Broker broker) throws IOException {
            List<Segment> out = new ArrayList<>();
            if (!Files.isDirectory(raw)) return out;
            List<Path> dirs = new ArrayList<>();
            try (var s = Files.list(raw)) {
                s.filter(Files::isDirectory).forEach(dirs::add);
            }
            for (Path dir : dirs) {
                String d = dir.getFileName().toString();
                int dash = d.lastIndexOf('-');
                int partition;
                try {
                    partition = Integer.parseInt(d.substring(dash + 1));
                } catch (RuntimeException e) {
                    broker.note(d, "not a <topic>-<partition> directory: skipped");
                    continue;
                }
                String topic = d.substring(0, dash);
                if (broker.topic == null) broker.topic = topic;
                else if (!broker.topic.equals(topic)) {
                    broker.note(d, "a second topic " + topic + " after " + broker.topic + ": skipped");
                    continue;
                }
                List<Path> logs = new ArrayList<>();
                try (var s = Files.list(dir)) {
                    s.filter(p -> p.getFileName().toString().endsWith(".log")).forEach(logs::add);
                }
                for (Path p : logs) {
                    out.add(new Segment(p, d + "/" + p.getFileName(), topic, partition));
                }
            }
            // Partition order, then the segments' names: their base offsets, zero-padded.
            out.sort((a, b) -> a.partition != b.partition ? Integer.compare(a.partition, b.partition)
                    : a.path.getFileName().toString().compareTo(b.path.getFileName().toString()));
            return out;
        }
    }

    /** Little-endian rows written through a 1 MB buffer. */
    static final class Rows implements AutoCloseable {
        final FileChannel ch;
        final ByteBuffer buf = ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.LITTLE_ENDIAN);

        Rows(Path path) throws IOException {
            ch = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING);
        }

        void room(int n) throws IOException {
            if (buf.remaining() < n) flush();
        }

        void flush() throws IOException {
            buf.flip();
            while (buf.hasRemaining()) ch.write(buf);
            buf.clear();
        }

        void putLong(long v) throws IOException { room(8); buf.putLong(v); }
        void putInt(int v) throws IOException { room(4); buf.putInt(v); }
        void putShort(short v) throws IOException { room(2); buf.putShort(v); }
        void putByte(byte v) throws IOException { room(1); buf.put(v); }

        @Override
        public void close() throws IOException {
            flush();
            ch.close();
        }
    }
}
