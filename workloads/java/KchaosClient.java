// kchaos's Java client host: Kafka's own producer and consumer, driven by the Python harness
// (workloads/java_client.py) over a line protocol on stdin/stdout.
//
// Requests, one per line, tab-separated: id, command, handle, arguments. Replies, one JSON object
// per line: {"id":N,"r":result} or {"id":N,"e":"Class: message","c":category,"pre":bool};
// rebalance events {"ev":"assigned"|"revoked"|"lost","h":handle,"p":[partitions]} are written
// when the listener runs, so they come before the reply of the poll that ran it.
//
// Each handle (one producer or one consumer) runs its requests one at a time, in order, on a
// thread of its own: Kafka's consumer is not thread-safe, and a producer's send order must be
// the order the harness invoked its sends. Compiled against the jars of the release it runs
// with; it uses only API every supported release has (3.8+).
//
// A pipelined producer may also run here whole and record its own sends (`record`, `rstats`,
// `rstop`, `leaders`: KchaosRecorded.java, workloads/java_recorded.py), and so may the final
// reads (`final`, `fstats`, `fstop`: KchaosFinal.java, workloads/java_client.py). A command it
// does not know goes to the share workload's KchaosShare (share/), where that was compiled in.
//
// When stdin closes (the harness is gone) the process exits: a client host never outlives it.
//
// `hold` POINT and `release` (no handle; nemesis/client.py's pause-send, pause-commit and
// pause-abort): every handle that reaches POINT ("send", "commit", "abort") blocks just before
// its producer.send / commitTransaction / abortTransaction until `release`; a call already past
// the point is not held. A held commit or abort replies how many ms it waited, so that the
// history can show the call was made only after the hold (its error reply too: "held":ms).

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

public final class KchaosClient {
    private static final LinkedBlockingQueue<String> OUT = new LinkedBlockingQueue<>();
    private static final Map<Integer, Handle> HANDLES = new ConcurrentHashMap<>();

    private static final class Handle {
        final int id;
        final ExecutorService exec;
        volatile KafkaProducer<String, String> producer;
        volatile KafkaConsumer<String, String> consumer;
        // A pipelined producer that records its own sends (KchaosRecorded).
        volatile KchaosRecorded recorded;
        // The final reads, recording their own polls (KchaosFinal).
        volatile KchaosFinal reads;
        // The thread inside producer.send(): a callback run on it reports a record refused
        // before it was queued (metadata wait, size), which never reached a broker.
        volatile Thread sending;
        // How long the request running now waited at a hold (0: none), told with its reply.
        volatile long heldMs;

        Handle(int id) {
            this.id = id;
            this.exec = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "kchaos-h" + id);
                t.setDaemon(true);
                return t;
            });
        }
    }

    public static void main(String[] args) throws Exception {
        Thread writer = new Thread(KchaosClient::writeLoop, "kchaos-out");
        writer.setDaemon(true);
        writer.start();
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        OUT.add("{\"ready\":true}");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            dispatch(f);
        }
        // The harness is gone: what recorded producers buffered still reaches their files.
        KchaosRecorded.flushAll();
        KchaosFinal.flushAll();
        Runtime.getRuntime().halt(0);
    }

    private static void writeLoop() {
        BufferedWriter w = new BufferedWriter(
            new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        List<String> batch = new ArrayList<>();
        try {
            while (true) {
                batch.add(OUT.take());
                OUT.drainTo(batch);
                for (String s : batch) {
                    w.write(s);
                    w.write('\n');
                }
                batch.clear();
                w.flush();
            }
        } catch (Exception e) {
            Runtime.getRuntime().halt(3);
        }
    }

    private static void dispatch(String[] f) {
        final long id = Long.parseLong(f[0]);
        final String cmd = f[1];
        final int h = Integer.parseInt(f[2]);
        if (cmd.equals("exit")) {
            KchaosRecorded.flushAll();
            KchaosFinal.flushAll();
            Runtime.getRuntime().halt(0);
        }
        if (cmd.equals("clock")) {
            // The JVM's monotonic clock, which recorded producers write times with: the harness
            // checks it reads the clock its own recorder reads (CLOCK_MONOTONIC) before it
            // lets the JVM record.
            OUT.add("{\"id\":" + id + ",\"r\":" + System.nanoTime() + "}");
            return;
        }
        if (cmd.equals("hold") || cmd.equals("release")) {
            synchronized (HOLD_LOCK) {
                holdPoint = cmd.equals("hold") ? f[3] : null;
                HOLD_LOCK.notifyAll();
            }
            OUT.add("{\"id\":" + id + ",\"r\":true}");
            return;
        }
        if (cmd.equals("leaders")) {
            // Not a handle's: the node names a recorded producer writes on its sends' lines.
            KchaosRecorded.setLeaders(f.length > 3 ? f[3] : "");
            OUT.add("{\"id\":" + id + ",\"r\":true}");
            return;
        }
        Handle handle = HANDLES.computeIfAbsent(h, Handle::new);
        if (cmd.equals("send")) {
            // Not queued behind anything but this handle's earlier requests: its order is the
            // producer's send order.
            handle.exec.execute(() -> send(id, handle, f));
            return;
        }
        handle.exec.execute(() -> {
            handle.heldMs = 0;
            try {
                String r = run(handle, cmd, f);
                OUT.add("{\"id\":" + id + ",\"r\":" + r + "}");
            } catch (Throwable t) {
                String e = error(id, t, false);
                if (handle.heldMs > 0) {
                    e = e.substring(0, e.length() - 1) + ",\"held\":" + handle.heldMs + "}";
                }
                OUT.add(e);
            }
            if (cmd.equals("close")) {
                HANDLES.remove(h);
                handle.exec.shutdown();
            }
        });
    }

    private static Properties props(String[] f, int from) {
        Properties p = new Properties();
        for (int i = from; i < f.length; i++) {
            int eq = f[i].indexOf('=');
            p.setProperty(f[i].substring(0, eq), f[i].substring(eq + 1));
        }
        return p;
    }

    private static String run(Handle h, String cmd, String[] f) throws Exception {
        switch (cmd) {
            case "producer": {
                Properties p = props(f, 3);
                p.setProperty("key.serializer",
                    "org.apache.kafka.common.serialization.StringSerializer");
                p.setProperty("value.serializer",
                    "org.apache.kafka.common.serialization.StringSerializer");
                h.producer = new KafkaProducer<>(p);
                return "true";
            }
            case "consumer": {
                Properties p = props(f, 3);
                p.setProperty("key.deserializer",
                    "org.apache.kafka.common.serialization.StringDeserializer");
                p.setProperty("value.deserializer",
                    "org.apache.kafka.common.serialization.StringDeserializer");
                h.consumer = new KafkaConsumer<>(p);
                return "true";
            }
            case "record": {
                KchaosRecorded r = new KchaosRecorded(f, 3);
                r.start();
                h.recorded = r;
                return "true";
            }
            case "rstats":
                return h.recorded.stats();
            case "rstop":
                return h.recorded.stop();
            case "final": {
                KchaosFinal r = new KchaosFinal(f, 3);
                r.start();
                h.reads = r;
                return "true";
            }
            case "fstats":
                return h.reads.stats();
            case "fstop":
                return h.reads.stop();
            case "init":
                h.producer.initTransactions();
                return "true";
            case "begin":
                h.producer.beginTransaction();
                return "true";
            case "commit-txn": {
                long held = h.heldMs = gate("commit");
                h.producer.commitTransaction();
                return held > 0 ? Long.toString(held) : "true";
            }
            case "abort-txn": {
                long held = h.heldMs = gate("abort");
                h.producer.abortTransaction();
                return held > 0 ? Long.toString(held) : "true";
            }
            case "flush":
                h.producer.flush();
                return "true";
            case "assign": {
                List<TopicPartition> tps = partitions(f[3], f[4]);
                h.consumer.assign(tps);
                h.consumer.seekToBeginning(tps);
                return "true";
            }
            case "subscribe":
                h.consumer.subscribe(List.of(f[3]), listener(h.id));
                return "true";
            case "poll":
                return poll(h.consumer, f[3], Long.parseLong(f[4]));
            case "position": {
                StringBuilder sb = new StringBuilder("{");
                for (TopicPartition tp : h.consumer.assignment()) {
                    long pos = h.consumer.position(tp, Duration.ofSeconds(5));
                    if (sb.length() > 1) {
                        sb.append(',');
                    }
                    sb.append('"').append(tp.partition()).append("\":").append(pos);
                }
                return sb.append('}').toString();
            }
            case "seek": {
                TopicPartition tp = new TopicPartition(f[3], Integer.parseInt(f[4]));
                long to = Long.parseLong(f[5]);
                if (to >= 0) {
                    h.consumer.seek(tp, to);
                } else {
                    // The committed offset, or the start when the group has none (as a new
                    // owner would begin): where reading resumes after an abort in subscribe mode.
                    OffsetAndMetadata c = to == -3
                        ? h.consumer.committed(Set.of(tp), Duration.ofSeconds(5)).get(tp) : null;
                    if (c != null) {
                        h.consumer.seek(tp, c.offset());
                    } else {
                        h.consumer.seekToBeginning(List.of(tp));
                    }
                }
                return "true";
            }
            case "commit": {
                Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
                for (TopicPartition tp : h.consumer.assignment()) {
                    m.put(tp, new OffsetAndMetadata(h.consumer.position(tp, Duration.ofSeconds(5))));
                }
                h.consumer.commitSync(m);
                StringBuilder sb = new StringBuilder("{");
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) {
                    if (sb.length() > 1) {
                        sb.append(',');
                    }
                    sb.append('"').append(e.getKey().partition()).append("\":")
                        .append(e.getValue().offset());
                }
                return sb.append('}').toString();
            }
            case "ends": {
                Map<TopicPartition, Long> ends = h.consumer.endOffsets(
                    partitions(f[3], f[4]), Duration.ofSeconds(5));
                StringBuilder sb = new StringBuilder("{");
                for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
                    if (sb.length() > 1) {
                        sb.append(',');
                    }
                    sb.append('"').append(e.getKey().partition()).append("\":").append(e.getValue());
                }
                return sb.append('}').toString();
            }
            case "close": {
                Duration d = Duration.ofMillis(Long.parseLong(f[3]));
                if (h.producer != null) {
                    h.producer.close(d);
                }
                if (h.consumer != null) {
                    h.consumer.close(d);
                }
                if (extension() != null) {
                    EXT_CLOSE.invoke(null, h.id, d);
                }
                return "true";
            }
            default: {
                if (extension() == null) {
                    throw new IllegalArgumentException("unknown command " + cmd);
                }
                try {
                    return (String) EXT_RUN.invoke(null, h.id, cmd, f);
                } catch (InvocationTargetException e) {
                    throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
                }
            }
        }
    }

    // The share workload's commands (share/KchaosShare.java) are compiled in only for its runs,
    // against a release that has share groups: found by name, so this class compiles without.
    private static volatile Method EXT_RUN;
    private static volatile Method EXT_CLOSE;
    private static volatile boolean extLooked;

    private static synchronized Class<?> extension() {
        if (!extLooked) {
            extLooked = true;
            try {
                Class<?> k = Class.forName("KchaosShare");
                EXT_RUN = k.getDeclaredMethod("run", int.class, String.class, String[].class);
                EXT_CLOSE = k.getDeclaredMethod("close", int.class, Duration.class);
                EXT_RUN.setAccessible(true);
                EXT_CLOSE.setAccessible(true);
            } catch (ReflectiveOperationException e) {
                EXT_RUN = null;
            }
        }
        return EXT_RUN == null ? null : EXT_RUN.getDeclaringClass();
    }

    private static List<TopicPartition> partitions(String topic, String list) {
        List<TopicPartition> tps = new ArrayList<>();
        if (!list.isEmpty()) {
            for (String p : list.split(",")) {
                tps.add(new TopicPartition(topic, Integer.parseInt(p)));
            }
        }
        return tps;
    }

    private static ConsumerRebalanceListener listener(int h) {
        return new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                event("revoked", h, parts);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                event("assigned", h, parts);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> parts) {
                event("lost", h, parts);
            }
        };
    }

    private static void event(String kind, int h, Collection<TopicPartition> parts) {
        if (parts.isEmpty()) {
            return;  // the classic protocol's cooperative listener is called with nothing
        }
        StringBuilder sb = new StringBuilder("{\"ev\":\"").append(kind).append("\",\"h\":")
            .append(h).append(",\"p\":[");
        boolean first = true;
        for (TopicPartition tp : parts) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append('[').append(quote(tp.topic())).append(',').append(tp.partition()).append(']');
        }
        OUT.add(sb.append("]}").toString());
    }

    private static String poll(KafkaConsumer<String, String> c, String topic, long ms) {
        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(ms));
        StringBuilder sb = new StringBuilder("{\"recs\":[");
        StringBuilder foreign = new StringBuilder();
        boolean first = true;
        for (ConsumerRecord<String, String> r : recs) {
            if (!r.topic().equals(topic)) {
                foreign.append(foreign.length() == 0 ? "" : ",").append('[')
                    .append(quote(r.topic())).append(',').append(r.partition()).append(',')
                    .append(r.offset()).append(',').append(number(r.value())).append(']');
                continue;
            }
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append('[').append(r.partition()).append(',').append(r.offset()).append(',')
                .append(number(r.value())).append(']');
        }
        sb.append(']');
        if (foreign.length() > 0) {
            sb.append(",\"foreign\":[").append(foreign).append(']');
        }
        return sb.append('}').toString();
    }

    // Values are decimal integers; anything else is recorded as null (not a value of the run).
    // Package-private: the share client (share/KchaosShare.java) records values the same way.
    static String number(String v) {
        if (v == null || v.isEmpty() || v.length() > 18) {
            return "null";
        }
        for (int i = 0; i < v.length(); i++) {
            char ch = v.charAt(i);
            if (ch < '0' || ch > '9') {
                return "null";
            }
        }
        return v;
    }

    private static final Object HOLD_LOCK = new Object();
    private static volatile String holdPoint;

    // Blocks while `point` is held; how many ms it waited (0: not held).
    private static long gate(String point) {
        if (!point.equals(holdPoint)) {
            return 0;
        }
        long t0 = System.nanoTime();
        synchronized (HOLD_LOCK) {
            while (point.equals(holdPoint)) {
                try {
                    HOLD_LOCK.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
        return Math.max(1, (System.nanoTime() - t0) / 1_000_000);
    }

    private static void send(long id, Handle h, String[] f) {
        gate("send");
        ProducerRecord<String, String> rec = new ProducerRecord<>(
            f[3], Integer.parseInt(f[4]), f[5], f[6]);
        h.sending = Thread.currentThread();
        try {
            h.producer.send(rec, (md, exc) -> {
                if (exc == null) {
                    long off = md.hasOffset() ? md.offset() : -1;
                    OUT.add("{\"id\":" + id + ",\"r\":" + off + "}");
                } else {
                    OUT.add(error(id, exc, Thread.currentThread() == h.sending));
                }
            });
        } catch (Throwable t) {
            // Thrown by send() itself: the record was not queued (a closed or fenced producer,
            // a transaction in an error state).
            OUT.add(error(id, t, true));
        } finally {
            h.sending = null;
        }
    }

    // Kafka's own error categories (KIP-1050), read off the exception's class hierarchy by
    // name, so that one source compiles against every supported release.
    static String category(Throwable t) {
        String name = t.getClass().getSimpleName();
        switch (name) {
            case "ProducerFencedException":
            case "OutOfOrderSequenceException":
            case "UnsupportedVersionException":
            case "FencedInstanceIdException":
            case "TransactionalIdAuthorizationException":
            case "ClusterAuthorizationException":
            case "TopicAuthorizationException":
            case "AuthenticationException":
                return "fatal";
            default:
                break;
        }
        for (Class<?> k = t.getClass(); k != null; k = k.getSuperclass()) {
            switch (k.getSimpleName()) {
                case "TransactionAbortableException":
                    return "abortable";
                case "ApplicationRecoverableException":
                    return "application-recoverable";
                case "InvalidConfigurationException":
                    return "invalid-configuration";
                case "RefreshRetriableException":
                case "RetriableException":
                    return "retriable";
                case "AuthorizationException":
                    return "fatal";
                case "ApiException":
                    return "api";
                case "KafkaException":
                    return "kafka";
                default:
                    break;
            }
        }
        return "other";
    }

    private static String error(long id, Throwable t, boolean pre) {
        while ((t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return "{\"id\":" + id + ",\"e\":" + quote(describe(t)) + ",\"c\":\"" + category(t)
            + "\",\"pre\":" + pre + "}";
    }

    static String describe(Throwable t) {
        String msg = t.getClass().getSimpleName() + ": " + t.getMessage();
        // The cause says what a wrapping KafkaException does not (a send that failed inside
        // the transaction a commit refuses).
        Throwable cause = t.getCause();
        if (cause != null && cause != t) {
            msg += " (caused by " + cause.getClass().getSimpleName() + ": " + cause.getMessage()
                + ")";
        }
        return msg;
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            switch (ch) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (ch < 0x20) {
                        sb.append(String.format("\\u%04x", (int) ch));
                    } else {
                        sb.append(ch);
                    }
            }
        }
        return sb.append('"').toString();
    }

    private KchaosClient() {
    }
}
