// A worker slot's pipelined producer that records its own sends (docs/history.md, "Sends
// recorded in the JVM"; the harness side is workloads/java_recorded.py).
//
// The harness-recorded path (workloads/pipelined.py, harness/run/workers.py) sends each send to the
// JVM over the line protocol and writes two history lines per send in Python, which bounds a run
// at a few thousand sends a second. Here the slot's loop runs in the JVM: it takes a free lane,
// draws the key (PyRandom, the harness's own stream), writes the invocation, calls send(), and
// the callback writes the completion, each a fixed-width binary record of the history's fields
// in a side file (SideWriter; the format is history/sidefiles.py's) from which the harness builds
// history.parquet at the end of the run (history/build.py). The semantics are the harness
// path's, op for op:
//
// - lanes: slot s owns processes s*N .. s*N+N-1 (N = in_flight); a send is invoked on a free
//   lane and the lane is free again once its completion is written; a lane whose send ended
//   info goes on as process p + concurrency*N (harness/run/workers.py Lanes);
// - producers: slot s's k-th producer is s + k*concurrency (a producer that saw a fatal error
//   is drained, closed and replaced); its n-th value is producer * value_stride + n;
// - outcomes: ok with the offset (null when the client does not know it); fail when send()
//   refused the record before queueing it, or for a broker's definite refusal (the harness's
//   workloads/java_client.py DEFINITE_SEND, passed in); info for everything else, and for sends
//   still without a callback DRAIN after the end ("no delivery report in time");
// - times: System.nanoTime() minus the harness recorder's start (both read CLOCK_MONOTONIC on
//   Linux), taken under the same monitor the record is written under, so a side file's times
//   never go back; wall: the JVM's real-time clock at start, advanced by the monotonic clock
//   (microseconds).
//
// One monitor per slot (its SideWriter's) guards the lanes, the counts and the file, so the
// loop thread and the producer's I/O thread (callbacks) write whole records in time order.

import java.io.File;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.HashSet;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

final class KchaosRecorded {
    static final int MAX_ERROR = 2000;
    static final Set<KchaosRecorded> OPEN = ConcurrentHashMap.newKeySet();
    // partition -> the node name the harness last saw leading it (null: none)
    private static volatile String[] leaders = new String[0];
    private static final long LANE_WAIT_MS = 50;
    // history/sidefiles.py SEND_DTYPE.
    static final int RECORD = 64;

    // history/sidefiles.py TYPES.
    static final int INVOKE = 0;
    static final int OK = 1;
    static final int FAIL = 2;
    static final int INFO = 3;

    // Settings (the harness's, from the `record` request) ------------------------------------
    private final String topic;
    private final int keys;
    private final int slot;
    private final int concurrency;
    private final int lanes;
    private final long stride;
    private final long t0;
    private final long intervalNs;
    private final long startDelayNs;
    private final long drainNs;
    private final String seedPrefix;
    private final Set<String> definite = new HashSet<>();
    private final Properties conf = new Properties();
    private final long monoRef;
    private final long wallRef;

    final SideWriter ops;
    private final SideWriter acked;
    private final Thread loop;
    private volatile boolean stopping;
    private volatile String error;

    // Under ops's monitor ---------------------------------------------------------------------
    private final long[] laneProc;
    private final Send[] laneOp;
    private final int[] free;
    private int nFree;
    private boolean waiting;
    private final int[] inFlight;
    private long invoked;
    private long oks;
    private long fails;
    private long infos;
    private long highest;
    private int producers;

    /** A slot from the `record` request's key=value arguments (workloads/java_recorded.py):
     * kchaos.* are the slot's own, the rest the producer's configuration. */
    KchaosRecorded(String[] f, int from) throws IOException {
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
        conf.setProperty("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        conf.setProperty("value.serializer",
            "org.apache.kafka.common.serialization.StringSerializer");
        topic = own.getProperty("topic");
        keys = Integer.parseInt(own.getProperty("keys"));
        slot = Integer.parseInt(own.getProperty("slot"));
        concurrency = Integer.parseInt(own.getProperty("concurrency"));
        lanes = Integer.parseInt(own.getProperty("lanes"));
        stride = Long.parseLong(own.getProperty("value_stride"));
        t0 = Long.parseLong(own.getProperty("t0_ns"));
        intervalNs = Long.parseLong(own.getProperty("interval_ns"));
        startDelayNs = Long.parseLong(own.getProperty("start_delay_ns"));
        drainNs = Long.parseLong(own.getProperty("drain_ms")) * 1_000_000L;
        seedPrefix = own.getProperty("seed_prefix");
        for (String d : own.getProperty("definite", "").split(",")) {
            if (!d.isEmpty()) {
                definite.add(d);
            }
        }
        laneProc = new long[lanes];
        laneOp = new Send[lanes];
        free = new int[lanes];
        for (int j = 0; j < lanes; j++) {
            laneProc[j] = (long) slot * lanes + j;
            free[lanes - 1 - j] = j;  // popped from the end: the lowest process first
        }
        nFree = lanes;
        highest = (long) slot * lanes + lanes - 1;
        inFlight = new int[keys];
        Instant now = Instant.now();
        monoRef = System.nanoTime();
        wallRef = now.getEpochSecond() * 1_000_000_000L + now.getNano();
        String dir = own.getProperty("dir");
        new File(dir).mkdirs();
        ops = new SideWriter(dir + "/slot" + slot + ".ops", "kchaos-w" + slot, SideWriter.SENDS,
            RECORD);
        acked = new SideWriter(dir + "/slot" + slot + ".acked", "kchaos-a" + slot);
        loop = new Thread(this::run, "kchaos-r" + slot);
        loop.setDaemon(true);
    }

    /** Makes the slot's first producer (a bad configuration is the request's error), then
     * starts its loop. */
    void start() {
        KafkaProducer<String, String> first;
        try {
            first = new KafkaProducer<>(conf);
        } catch (RuntimeException e) {
            ops.close();
            acked.close();
            throw e;
        }
        OPEN.add(this);
        firstProducer = first;
        loop.start();
    }

    private KafkaProducer<String, String> firstProducer;

    static void setLeaders(String csv) {
        String[] names = csv.split(",", -1);
        for (int i = 0; i < names.length; i++) {
            names[i] = names[i].isEmpty() ? null : names[i];
        }
        leaders = names;
    }

    private static String leader(int key) {
        String[] l = leaders;
        return key < l.length ? l[key] : null;
    }

    /** The state of one producer instance: its id, its random stream, its values. */
    private static final class Gen {
        final long id;
        final PyRandom rng;
        long n;
        volatile boolean broken;

        Gen(long id, String seedPrefix) {
            this.id = id;
            this.rng = new PyRandom(seedPrefix + id);
        }
    }

    /** One send in flight: its lane and what its lines say; the producer's callback. */
    private final class Send implements Callback {
        final Gen gen;
        final int lane;
        final int key;
        final long value;
        long process;
        String node;

        Send(Gen gen, int lane, int key, long value) {
            this.gen = gen;
            this.lane = lane;
            this.key = key;
            this.value = value;
        }

        @Override
        public void onCompletion(RecordMetadata md, Exception exc) {
            if (exc == null) {
                complete(this, OK, md.hasOffset() ? md.offset() : -1, null);
            } else {
                // A callback run on the loop's own thread ran inside send(): the record was
                // refused before it was queued.
                failed(exc, Thread.currentThread() == loop);
            }
        }

        void failed(Throwable t, boolean pre) {
            while ((t instanceof ExecutionException) && t.getCause() != null) {
                t = t.getCause();
            }
            String category = KchaosClient.category(t);
            if (category.equals("fatal")) {
                gen.broken = true;  // no later send can succeed on this producer
            }
            String msg = category + ": " + KchaosClient.describe(t);
            if (msg.length() > MAX_ERROR) {
                msg = msg.substring(0, MAX_ERROR);
            }
            boolean sure = pre || definite.contains(t.getClass().getSimpleName());
            complete(this, sure ? FAIL : INFO, -1, msg);
        }
    }

    // The loop --------------------------------------------------------------------------------
    private void run() {
        long producerId = slot;
        long nextAt = System.nanoTime() + startDelayNs;
        KafkaProducer<String, String> p = firstProducer;
        firstProducer = null;
        while (!stopping) {
            if (p == null) {
                try {
                    p = new KafkaProducer<>(conf);
                } catch (RuntimeException e) {
                    error = "producer " + producerId + " not made: " + KchaosClient.describe(e);
                    break;
                }
            }
            Gen gen = new Gen(producerId, seedPrefix);
            synchronized (ops) {
                producers++;
            }
            while (!stopping && !gen.broken) {
                if (intervalNs > 0) {
                    long d = nextAt - System.nanoTime();
                    if (d > 0) {
                        sleepNs(Math.min(d, LANE_WAIT_MS * 1_000_000L));
                        continue;
                    }
                }
                int lane = takeLane();
                if (lane < 0) {
                    continue;
                }
                int key = gen.rng.randrange(keys);
                Send s = new Send(gen, lane, key, gen.id * stride + ++gen.n);
                try {
                    invoke(s);
                } catch (IOException e) {
                    error = "side file: " + e;
                    stopping = true;
                    break;
                }
                try {
                    p.send(new ProducerRecord<>(topic, key, Integer.toString(key),
                        Long.toString(s.value)), s);
                } catch (Throwable t) {
                    // Thrown by send() itself: the record was not queued.
                    s.failed(t, true);
                }
                if (intervalNs > 0) {
                    long now = System.nanoTime();
                    nextAt = Math.max(nextAt + intervalNs, now - intervalNs);
                }
            }
            drain();
            try {
                p.close(Duration.ZERO);
            } catch (RuntimeException e) {
                // A broken producer may refuse to close cleanly; it is dropped either way.
            }
            p = null;
            producerId += concurrency;
        }
    }

    private static void sleepNs(long ns) {
        // Not Thread.sleep(ms, ns): before JDK 21 it rounds any nanoseconds up to a whole
        // millisecond, which held a slot paced at 0.4 ms a send to under half its rate.
        LockSupport.parkNanos(ns);
    }

    private int takeLane() {
        synchronized (ops) {
            if (nFree == 0 && !stopping) {
                waiting = true;
                try {
                    ops.wait(LANE_WAIT_MS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                waiting = false;
            }
            return nFree > 0 ? free[--nFree] : -1;
        }
    }

    private void invoke(Send s) throws IOException {
        SideWriter w = ops;
        synchronized (w) {
            w.reserve();
            long now = System.nanoTime();
            s.process = laneProc[s.lane];
            s.node = leader(s.key);
            laneOp[s.lane] = s;
            record(w, now, INVOKE, s, -1, -1, w.string(s.node));
            invoked++;
            inFlight[s.key]++;
        }
    }

    /** One op's record (history/sidefiles.py SEND_DTYPE); under w's monitor, after reserve()
     * and after string() wrote the texts it names. */
    private void record(SideWriter w, long now, int type, Send s, long offset, int error,
            int node) {
        w.putRaw(now - t0);
        w.putRaw((wallRef + (now - monoRef)) / 1000);
        w.putRaw(s.process);
        w.putRaw(s.gen.id);
        w.putRaw(s.value);
        w.putRaw(offset);
        w.putInt(s.key);
        w.putInt(error);
        w.putInt(node);
        w.put((byte) type);
        w.put((byte) 0);
        w.put((byte) 0);
        w.put((byte) 0);
    }

    /** Writes `s`'s completion and frees its lane, unless the lane gave it up (drained). */
    private void complete(Send s, int type, long offset, String err) {
        SideWriter w = ops;
        synchronized (w) {
            if (laneOp[s.lane] != s) {
                return;  // given up by the drain, or completed already
            }
            try {
                w.reserve();
            } catch (IOException e) {
                error = "side file: " + e;
                stopping = true;
                return;
            }
            // reserve() may have waited for the writer, letting go of the monitor: the drain
            // may have completed this send meanwhile.
            if (laneOp[s.lane] != s) {
                return;
            }
            String node = s.node;
            String leading = type == OK ? leader(s.key) : null;
            if (leading != null) {
                node = leading;  // the leader when it was acknowledged, as the harness's
            }
            int nodeIndex;
            int errorIndex;
            try {
                nodeIndex = w.string(node);
                errorIndex = w.string(err);
            } catch (IOException e) {
                error = "side file's strings: " + e;
                stopping = true;
                return;
            }
            if (type == OK) {
                oks++;
            } else if (type == FAIL) {
                fails++;
            } else {
                infos++;
            }
            record(w, System.nanoTime(), type, s, type == OK ? offset : -1, errorIndex,
                nodeIndex);
            free(s, type == INFO);
            if (type == OK) {
                ackedSend(s.key, offset, s.value);
            }
        }
    }

    // Under ops's monitor.
    private void free(Send s, boolean retire) {
        laneOp[s.lane] = null;
        inFlight[s.key]--;
        if (retire) {
            long p = laneProc[s.lane] + (long) concurrency * lanes;
            laneProc[s.lane] = p;
            highest = Math.max(highest, p);
        }
        free[nFree++] = s.lane;
        if (waiting) {
            ops.notifyAll();
        }
    }

    private void ackedSend(int key, long offset, long value) {
        SideWriter a = acked;
        synchronized (a) {
            try {
                a.reserve();
            } catch (IOException e) {
                error = "acknowledged sends' file: " + e;
                return;
            }
            a.putRaw(key);
            a.putRaw(offset);
            a.putRaw(value);
        }
    }

    /** Waits DRAIN for every send in flight, then completes the rest info, lanes retired. */
    private void drain() {
        long deadline = System.nanoTime() + drainNs;
        synchronized (ops) {
            while (nFree < lanes) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                waiting = true;
                try {
                    ops.wait(Math.max(1, Math.min(left / 1_000_000L, LANE_WAIT_MS)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
                waiting = false;
            }
            waiting = false;
            for (Send s : laneOp) {
                if (s != null) {
                    complete(s, INFO, -1, "no delivery report in time");
                }
            }
        }
    }

    /** Counts so far, sends in flight per partition, the highest process id any lane took. */
    String stats() {
        StringBuilder sb = new StringBuilder("{");
        synchronized (ops) {
            sb.append("\"invoke\":").append(invoked).append(",\"ok\":").append(oks)
                .append(",\"fail\":").append(fails).append(",\"info\":").append(infos)
                .append(",\"highest\":").append(highest).append(",\"producers\":")
                .append(producers).append(",\"in_flight\":[");
            for (int k = 0; k < keys; k++) {
                if (k > 0) {
                    sb.append(',');
                }
                sb.append(inFlight[k]);
            }
        }
        sb.append("],\"running\":").append(loop.isAlive());
        String e = error;
        if (e != null) {
            sb.append(",\"error\":").append(KchaosClient.quote(e));
        }
        return sb.append('}').toString();
    }

    /** Ends the loop (which drains and closes its producer), closes the files; the final
     * stats. */
    String stop() throws InterruptedException {
        stopping = true;
        loop.join(drainNs / 1_000_000L + 30_000L);
        ops.close();
        acked.close();
        OPEN.remove(this);
        return stats();
    }

    /** The JVM is ending (its harness is gone): what is buffered goes to the files. */
    static void flushAll() {
        for (KchaosRecorded r : OPEN) {
            r.stopping = true;
            r.ops.close();
            r.acked.close();
        }
    }
}
