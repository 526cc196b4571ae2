// The queue workload's final reads with Kafka's own consumer, run whole in the JVM (docs/history.md,
// "Final reads"; the harness side is workloads/java_client.py final_reads_java).
//
// Through the line protocol every poll's records crossed as a JSON reply and were written again
// by the harness's recorder: ~25,000 records/s. Here the loop runs in the JVM: it assigns every
// partition from the beginning, takes each partition's end offset (its high watermark) once, and
// polls until every acknowledged send was read and every partition reached its end, or until
// the deadline (which extends while records are still being read: workloads/readback.py
// ReadDeadline, the same rule) or the harness's `fstop`. Each poll is an invoke op and an ok op
// (an info op, and a fresh process id after it, when poll() throws), the ops the harness's final
// polls were, written as binary records into the side file final.ops (SideWriter; the format is
// history/sidefiles.py's: an ok poll's records read, then its op record) from which the harness
// builds history.parquet with the other side files (history/build.py).
//
// The harness learns only counts: the acknowledged sends come in as one file of int64 values
// per key, sorted (workloads/readback.py write_wanted); each value read is looked up in its
// key's array and marked, so the answer to `fstop` names the first missing sends and how many
// there are. Memory: 9 bytes per acknowledged send, and a poll's records.

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.channels.FileChannel;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

final class KchaosFinal {
    static final Set<KchaosFinal> OPEN = ConcurrentHashMap.newKeySet();
    static final int MISSING_NAMED = 50;
    // After a poll that threw: a consumer that throws at once (closed, misconfigured) would
    // otherwise write lines as fast as it can until the deadline.
    private static final long AFTER_ERROR_NS = 100_000_000L;

    // history/sidefiles.py POLL_DTYPE, TYPES, and a record's kinds.
    static final int RECORD = 32;
    static final int INVOKE = 0;
    static final int OK = 1;
    static final int INFO = 3;
    static final int ELEMENT = 0;
    static final int OP = 1;

    // Settings (the harness's, from the `final` request) ---------------------------------------
    private final String topic;
    private final int keys;
    private final long t0;
    private final long startedNs;
    private final long endNs;
    private final long windowNs;
    private final long mostNs;
    private final long pollMs;
    private final long endsMs;
    private final Properties conf = new Properties();
    private final long monoRef;
    private final long wallRef;

    final SideWriter ops;
    private final Thread loop;
    private KafkaConsumer<String, String> consumer;
    private volatile boolean stopping;
    private volatile String error;

    // The loop's; read by `fstats` as they are (volatile), by `fstop` after the loop ended.
    private final long[][] wanted;
    private final boolean[][] hit;
    private final long acknowledged;
    private volatile long remaining;
    private volatile long process;
    private volatile long polls;
    private volatile long oks;
    private volatile long infos;
    private volatile long records;
    private long[] ends;

    // One poll's records, reused.
    private int[] parts = new int[0];
    private long[] offsets = new long[0];
    private long[] values = new long[0];

    /** The reads from the `final` request's key=value arguments (workloads/java_client.py
     * final_args): kchaos.* are the reads' own, the rest the consumer's configuration. */
    KchaosFinal(String[] f, int from) throws IOException {
        Properties own = new Properties();
        for (int i = from; i < f.length; i++) {
            int eq = f[i].indexOf('=');
            String k = f[i].substring(0, eq);
            String v = f[i].substring(eq + 1);
            if (k.startsWith("kchaos.")) {
                own.setProperty(k.substring(7), v);
            } else {
                conf.setProperty(k, v);
            }
        }
        conf.setProperty("key.deserializer",
            "org.apache.kafka.common.serialization.StringDeserializer");
        conf.setProperty("value.deserializer",
            "org.apache.kafka.common.serialization.StringDeserializer");
        topic = own.getProperty("topic");
        keys = Integer.parseInt(own.getProperty("keys"));
        t0 = Long.parseLong(own.getProperty("t0_ns"));
        startedNs = Long.parseLong(own.getProperty("started_ns"));
        endNs = startedNs + Long.parseLong(own.getProperty("timeout_ns"));
        windowNs = Long.parseLong(own.getProperty("window_ns"));
        mostNs = Long.parseLong(own.getProperty("most_ns"));
        pollMs = Long.parseLong(own.getProperty("poll_ms", "500"));
        endsMs = Long.parseLong(own.getProperty("ends_ms", "5000"));
        process = Long.parseLong(own.getProperty("process"));
        wanted = readWanted(own.getProperty("wanted"), own.getProperty("wanted_counts"), keys);
        hit = new boolean[keys][];
        long n = 0;
        for (int k = 0; k < keys; k++) {
            hit[k] = new boolean[wanted[k].length];
            n += wanted[k].length;
        }
        acknowledged = n;
        remaining = n;
        Instant now = Instant.now();
        monoRef = System.nanoTime();
        wallRef = now.getEpochSecond() * 1_000_000_000L + now.getNano();
        ops = new SideWriter(own.getProperty("dir") + "/final.ops", "kchaos-final",
            SideWriter.POLLS, RECORD);
        loop = new Thread(this::run, "kchaos-final");
        loop.setDaemon(true);
    }

    /** Each key's sorted values, from one file of little-endian int64, key after key. */
    static long[][] readWanted(String path, String counts, int keys) throws IOException {
        long[][] out = new long[keys][];
        String[] c = counts.isEmpty() ? new String[0] : counts.split(",");
        try (RandomAccessFile f = new RandomAccessFile(path, "r");
             FileChannel ch = f.getChannel()) {
            LongBuffer lb = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size())
                .order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
            for (int k = 0; k < keys; k++) {
                out[k] = new long[k < c.length ? Integer.parseInt(c[k]) : 0];
                lb.get(out[k]);
            }
        }
        return out;
    }

    /** Makes the consumer (a bad configuration is the request's error), then starts the loop. */
    void start() {
        try {
            consumer = new KafkaConsumer<>(conf);
        } catch (RuntimeException e) {
            ops.close();
            throw e;
        }
        OPEN.add(this);
        loop.start();
    }

    private boolean over(long now, long lastProgress) {
        if (now < endNs) {
            return false;
        }
        return now - lastProgress >= windowNs || now >= endNs + mostNs;
    }

    private void run() {
        List<TopicPartition> tps = new ArrayList<>();
        for (int k = 0; k < keys; k++) {
            tps.add(new TopicPartition(topic, k));
        }
        long[] high = new long[keys];
        Arrays.fill(high, -1);
        try {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            try {
                for (Map.Entry<TopicPartition, Long> e
                        : consumer.endOffsets(tps, Duration.ofMillis(endsMs)).entrySet()) {
                    int p = e.getKey().partition();
                    if (p >= 0 && p < keys) {
                        high[p] = e.getValue();
                    }
                }
            } catch (RuntimeException e) {
                Arrays.fill(high, -1);  // unknown: the reads go on until every send was read
            }
            ends = high;
            long lastProgress = startedNs - windowNs;  // reads that read nothing stop at the budget
            while (!stopping && !over(System.nanoTime(), lastProgress)) {
                line(INVOKE, null);
                ConsumerRecords<String, String> recs;
                try {
                    recs = consumer.poll(Duration.ofMillis(pollMs));
                } catch (RuntimeException e) {
                    String msg = KchaosClient.category(e) + ": " + KchaosClient.describe(e);
                    if (msg.length() > KchaosRecorded.MAX_ERROR) {
                        msg = msg.substring(0, KchaosRecorded.MAX_ERROR);
                    }
                    line(INFO, msg);
                    infos++;
                    process++;  // as any process that saw an indefinite outcome
                    LockSupport.parkNanos(AFTER_ERROR_NS);
                    continue;
                }
                int n = take(recs);
                synchronized (ops) {
                    ops.reserve();
                    long now = System.nanoTime();
                    writeOk(ops, now - t0, process, wall(now), parts, offsets, values, n);
                }
                oks++;
                polls++;
                records += n;
                if (n > 0) {
                    lastProgress = System.nanoTime();
                    tally(n);
                } else if (remaining == 0 && caughtUp(tps, high)) {
                    break;
                }
            }
        } catch (Throwable t) {
            error = "final reads: " + KchaosClient.describe(t);
        } finally {
            try {
                consumer.close(Duration.ZERO);
            } catch (RuntimeException e) {
                // Dropped either way.
            }
        }
    }

    /** The poll's records of the run's topic whose values are numbers, grouped by partition,
     * into parts/offsets/values; their count. */
    private int take(ConsumerRecords<String, String> recs) {
        int n = recs.count();
        if (parts.length < n) {
            parts = new int[n];
            offsets = new long[n];
            values = new long[n];
        }
        int i = 0;
        for (TopicPartition tp : recs.partitions()) {
            if (!tp.topic().equals(topic)) {
                continue;  // never: only the run's topic is assigned
            }
            for (ConsumerRecord<String, String> r : recs.records(tp)) {
                long v = number(r.value());
                if (v < 0) {
                    continue;  // not a value of the run, as the harness's reads skipped it
                }
                parts[i] = tp.partition();
                offsets[i] = r.offset();
                values[i] = v;
                i++;
            }
        }
        return i;
    }

    private void tally(int n) {
        long left = remaining;
        for (int i = 0; i < n; i++) {
            int p = parts[i];
            if (p < 0 || p >= keys) {
                continue;
            }
            int at = Arrays.binarySearch(wanted[p], values[i]);
            if (at >= 0 && !hit[p][at]) {
                hit[p][at] = true;
                left--;
            }
        }
        remaining = left;
    }

    private boolean caughtUp(List<TopicPartition> tps, long[] high) {
        try {
            for (TopicPartition tp : tps) {
                if (consumer.position(tp, Duration.ofSeconds(5)) < high[tp.partition()]) {
                    return false;
                }
            }
        } catch (RuntimeException e) {
            return false;
        }
        return true;
    }

    /** A decimal value of at most 18 digits, else -1 (KchaosClient.number's rule). */
    static long number(String v) {
        if (v == null || v.isEmpty() || v.length() > 18) {
            return -1;
        }
        long out = 0;
        for (int i = 0; i < v.length(); i++) {
            char ch = v.charAt(i);
            if (ch < '0' || ch > '9') {
                return -1;
            }
            out = out * 10 + (ch - '0');
        }
        return out;
    }

    private long wall(long now) {
        return wallRef + (now - monoRef);
    }

    /** An invoke (`error` null) or info op. */
    private void line(int type, String err) throws IOException {
        synchronized (ops) {
            ops.reserve();
            int e = ops.string(err);
            long now = System.nanoTime();
            record(ops, OP, type, now - t0, wall(now) / 1000, process, e);
        }
    }

    /** An ok poll: its `n` records, in the order read (one partition's together), then its op.
     * Called under w's monitor after reserve(); reserves again per record, so a poll of any
     * size fits the writer's buffers (it may reach the file in parts). */
    static void writeOk(SideWriter w, long time, long process, long wallNs, int[] parts,
            long[] offsets, long[] values, int n) throws IOException {
        for (int i = 0; i < n; i++) {
            w.reserve();
            record(w, ELEMENT, 0, parts[i], offsets[i], values[i], -1);
        }
        w.reserve();
        record(w, OP, OK, time, wallNs / 1000, process, -1);
    }

    /** One record (history/sidefiles.py POLL_DTYPE): an op's time, wall (µs) and process, or
     * an element's key, offset and value. */
    static void record(SideWriter w, int kind, int type, long a, long b, long c,
            int error) {
        w.putRaw(a);
        w.putRaw(b);
        w.putRaw(c);
        w.putInt(error);
        w.put((byte) type);
        w.put((byte) kind);
        w.put((byte) 0);
        w.put((byte) 0);
    }

    /** Counts so far (`fstats`). */
    String stats() {
        StringBuilder sb = new StringBuilder("{\"running\":").append(loop.isAlive())
            .append(",\"polls\":").append(polls).append(",\"ok\":").append(oks)
            .append(",\"info\":").append(infos).append(",\"records\":").append(records)
            .append(",\"acknowledged\":").append(acknowledged)
            .append(",\"unread\":").append(remaining)
            .append(",\"highest\":").append(process);
        String e = error;
        if (e != null) {
            sb.append(",\"error\":").append(KchaosClient.quote(e));
        }
        return sb.append('}').toString();
    }

    /** Ends the loop, closes the side file; the counts, the end offsets and the first missing
     * sends ((key, value) order). */
    String stop() throws InterruptedException {
        stopping = true;
        loop.join(pollMs + 30_000L);
        ops.close();
        OPEN.remove(this);
        String s = stats();
        StringBuilder sb = new StringBuilder(s.substring(0, s.length() - 1));
        sb.append(",\"ends\":{");
        long[] e = ends;
        for (int k = 0; e != null && k < keys; k++) {
            sb.append(k > 0 ? "," : "").append('"').append(k).append("\":").append(e[k]);
        }
        sb.append("},\"missing\":[");
        int named = 0;
        for (int k = 0; k < keys && named < MISSING_NAMED; k++) {
            for (int i = 0; i < wanted[k].length && named < MISSING_NAMED; i++) {
                if (!hit[k][i]) {
                    sb.append(named > 0 ? "," : "").append('[').append(k).append(',')
                        .append(wanted[k][i]).append(']');
                    named++;
                }
            }
        }
        return sb.append("]}").toString();
    }

    /** The JVM is ending (its harness is gone): what is buffered goes to the file. */
    static void flushAll() {
        for (KchaosFinal r : OPEN) {
            r.stopping = true;
            r.ops.close();
        }
    }

}
