// The share workload's commands in the Java client's JVM (docs/history.md, "The share workload";
// the harness side is workloads/share.py): KafkaShareConsumer (KIP-932) and the Admin calls a
// share group needs. Compiled beside KchaosClient.java only for share runs, against a release
// that has share groups (4.1+), so the queue's client still compiles against every release;
// KchaosClient hands it every command it does not know (`run`) and a handle's `close`.
//
// Each handle runs on KchaosClient's thread for that handle, one request at a time, so a share
// consumer is used by one thread as Kafka requires. Its AcknowledgementCommitCallback runs on
// that thread too, inside poll(), commitSync() or close(): what it heard is kept until the
// request that ran it replies (`acked`), so every outcome lands in the op during which it came.
//
// Replies are JSON objects (KchaosClient wraps them): a poll gives each record as
// [partition, offset, value or null, delivery count or null], the time it was handed over on the
// history's clock (System.nanoTime() minus the harness recorder's zero, `t0`), and the
// acquisition lock the broker last gave (null where the client cannot say); an acknowledgement
// gives commitSync's answer per partition ("ok" or the exception) and what the callback heard.

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

final class KchaosShare {
    private static final Map<Integer, Share> CONSUMERS = new ConcurrentHashMap<>();
    private static final Map<Integer, Admin> ADMINS = new ConcurrentHashMap<>();

    /** One share consumer: the records of its last poll (what `acknowledge` names; a poll may
     * hand the same offset over twice, each copy with its own delivery count, so each offset
     * keeps its copies in the order handed), and what its acknowledgement callback heard since
     * the last reply. */
    private static final class Share {
        final KafkaShareConsumer<String, String> consumer;
        final String topic;
        final long t0;
        final Map<Long, ArrayDeque<ConsumerRecord<String, String>>> last = new HashMap<>();
        final List<String> heard = new ArrayList<>();

        Share(Properties p, String topic, long t0) {
            this.consumer = new KafkaShareConsumer<>(p);
            this.topic = topic;
            this.t0 = t0;
            consumer.setAcknowledgementCommitCallback((offsets, exc) -> {
                String outcome = exc == null ? "\"ok\"" : KchaosClient.quote(describe(exc));
                for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
                    if (!e.getKey().topic().equals(topic)) {
                        continue;
                    }
                    StringBuilder sb = new StringBuilder("[").append(e.getKey().partition())
                        .append(",[");
                    boolean first = true;
                    for (long o : new TreeSet<>(e.getValue())) {
                        sb.append(first ? "" : ",").append(o);
                        first = false;
                    }
                    heard.add(sb.append("],").append(outcome).append(']').toString());
                }
            });
        }

        /** What the callback heard, as a JSON array; empties it. */
        String takeHeard() {
            String s = "[" + String.join(",", heard) + "]";
            heard.clear();
            return s;
        }
    }

    static String describe(Throwable t) {
        return KchaosClient.describe(t);
    }

    private static long key(int partition, long offset) {
        // Partitions < 2^20, offsets < 2^43 in any run kchaos makes.
        return ((long) partition << 43) | offset;
    }

    /** The command's reply (a JSON value), or throws what the client threw. */
    static String run(int h, String cmd, String[] f) throws Exception {
        switch (cmd) {
            case "share-consumer": {
                // share-consumer <topic> <t0> key=value...
                Properties p = new Properties();
                for (int i = 5; i < f.length; i++) {
                    int eq = f[i].indexOf('=');
                    p.setProperty(f[i].substring(0, eq), f[i].substring(eq + 1));
                }
                p.setProperty("key.deserializer",
                    "org.apache.kafka.common.serialization.StringDeserializer");
                p.setProperty("value.deserializer",
                    "org.apache.kafka.common.serialization.StringDeserializer");
                CONSUMERS.put(h, new Share(p, f[3], Long.parseLong(f[4])));
                return "true";
            }
            case "share-subscribe": {
                Share s = share(h);
                s.consumer.subscribe(List.of(s.topic));
                return "true";
            }
            case "share-poll":
                // share-poll <timeout ms> [acks]: the acks are acknowledged first, so the poll
                // sends them (explicit mode, no commit of its own).
                return poll(share(h), Long.parseLong(f[3]), f.length > 4 ? f[4] : "");
            case "share-ack":
                // share-ack <timeout ms> [acks]: acknowledged (explicit mode; none in implicit
                // mode, where the commit accepts the last poll's records), then commitSync.
                return ack(share(h), Long.parseLong(f[3]), f.length > 4 ? f[4] : "");
            case "share-admin": {
                Properties p = new Properties();
                for (int i = 3; i < f.length; i++) {
                    int eq = f[i].indexOf('=');
                    p.setProperty(f[i].substring(0, eq), f[i].substring(eq + 1));
                }
                ADMINS.put(h, Admin.create(p));
                return "true";
            }
            case "share-group-config": {
                // share-group-config <group> key=value...: incremental SETs on the group.
                List<AlterConfigOp> ops = new ArrayList<>();
                for (int i = 4; i < f.length; i++) {
                    int eq = f[i].indexOf('=');
                    ops.add(new AlterConfigOp(
                        new ConfigEntry(f[i].substring(0, eq), f[i].substring(eq + 1)),
                        AlterConfigOp.OpType.SET));
                }
                ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, f[3]);
                admin(h).incrementalAlterConfigs(Map.of(group, ops)).all().get();
                return "true";
            }
            case "share-offsets":
                // share-offsets <group> <topic>: each share-partition's start offset.
                return offsets(admin(h), f[3], f[4]);
            default:
                throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    /** Closes what the handle holds (KchaosClient's `close`). */
    static void close(int h, Duration d) {
        Share s = CONSUMERS.remove(h);
        if (s != null) {
            s.consumer.close(d);
        }
        Admin a = ADMINS.remove(h);
        if (a != null) {
            a.close(d);
        }
    }

    private static Share share(int h) {
        Share s = CONSUMERS.get(h);
        if (s == null) {
            throw new IllegalStateException("no share consumer on handle " + h);
        }
        return s;
    }

    private static Admin admin(int h) {
        Admin a = ADMINS.get(h);
        if (a == null) {
            throw new IllegalStateException("no admin client on handle " + h);
        }
        return a;
    }

    /** Acknowledges each of `acks` ("partition:offset:TYPE,..."), records of the last poll: an
     * offset named twice acknowledges its two copies, in order. */
    private static void acknowledge(Share s, String acks) {
        if (acks.isEmpty()) {
            return;
        }
        for (String a : acks.split(",")) {
            String[] part = a.split(":");
            int p = Integer.parseInt(part[0]);
            long o = Long.parseLong(part[1]);
            // The copies of one offset are acknowledged in the order they were handed over.
            ArrayDeque<ConsumerRecord<String, String>> copies = s.last.get(key(p, o));
            ConsumerRecord<String, String> r = copies == null ? null : copies.poll();
            if (r == null) {
                throw new IllegalStateException(
                    "record " + p + ":" + o + " is not in the last poll, or was acknowledged");
            }
            // By name: RENEW (KIP-1222) is in 4.2+ clients only; the harness refuses it before.
            s.consumer.acknowledge(r, AcknowledgeType.valueOf(part[2]));
        }
    }

    private static String poll(Share s, long ms, String acks) {
        acknowledge(s, acks);
        ConsumerRecords<String, String> recs = s.consumer.poll(Duration.ofMillis(ms));
        long handed = System.nanoTime() - s.t0;
        s.last.clear();
        StringBuilder sb = new StringBuilder("{\"recs\":[");
        boolean first = true;
        for (ConsumerRecord<String, String> r : recs) {
            if (!r.topic().equals(s.topic)) {
                continue;  // never: only the run's topic is subscribed
            }
            s.last.computeIfAbsent(key(r.partition(), r.offset()), k -> new ArrayDeque<>()).add(r);
            Optional<Short> count = r.deliveryCount();
            sb.append(first ? "" : ",").append('[').append(r.partition()).append(',')
                .append(r.offset()).append(',').append(number(r.value())).append(',')
                .append(count.isPresent() ? String.valueOf(count.get()) : "null").append(']');
            first = false;
        }
        sb.append("],\"handed\":").append(handed).append(",\"lock_ms\":").append(lockMs(s))
            .append(",\"acked\":").append(s.takeHeard());
        return sb.append('}').toString();
    }

    private static String ack(Share s, long ms, String acks) {
        acknowledge(s, acks);
        Map<TopicIdPartition, Optional<KafkaException>> got =
            s.consumer.commitSync(Duration.ofMillis(ms));
        long at = System.nanoTime() - s.t0;
        StringBuilder sb = new StringBuilder("{\"commit\":{");
        boolean first = true;
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : got.entrySet()) {
            if (!e.getKey().topic().equals(s.topic)) {
                continue;
            }
            Optional<KafkaException> exc = e.getValue();
            sb.append(first ? "" : ",").append('"').append(e.getKey().partition()).append("\":")
                .append(exc.isPresent() ? KchaosClient.quote(describe(exc.get())) : "\"ok\"");
            first = false;
        }
        sb.append("},\"committed\":").append(at).append(",\"acked\":").append(s.takeHeard());
        return sb.append('}').toString();
    }

    // acquisitionLockTimeoutMs() (KIP-1222) is in 4.2+ clients only: asked by name.
    private static volatile Method lockMethod;
    private static volatile boolean noLockMethod;

    private static String lockMs(Share s) {
        if (noLockMethod) {
            return "null";
        }
        try {
            Method m = lockMethod;
            if (m == null) {
                m = lockMethod = s.consumer.getClass().getMethod("acquisitionLockTimeoutMs");
            }
            Object got = m.invoke(s.consumer);
            if (got instanceof Optional && ((Optional<?>) got).isPresent()) {
                return String.valueOf(((Optional<?>) got).get());
            }
            return "null";
        } catch (NoSuchMethodException e) {
            noLockMethod = true;
            return "null";
        } catch (ReflectiveOperationException e) {
            return "null";
        }
    }

    /** {"<partition>": {"start": offset, "lag": n or null, "epoch": n or null}} for the
     * group's share-partitions of `topic`. The result's value class differs between releases
     * (4.1's OffsetAndMetadata, 4.2's SharePartitionOffsetInfo), so it is read by name. */
    private static String offsets(Admin a, String group, String topic) throws Exception {
        Object result = a.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()));
        Object future = result.getClass().getMethod("all").invoke(result);
        Object all = future.getClass().getMethod("get").invoke(future);
        Object byPartition = ((Map<?, ?>) all).get(group);
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        if (byPartition instanceof Map) {
            for (Map.Entry<?, ?> e : ((Map<?, ?>) byPartition).entrySet()) {
                TopicPartition tp = (TopicPartition) e.getKey();
                if (!tp.topic().equals(topic)) {
                    continue;
                }
                sb.append(first ? "" : ",").append('"').append(tp.partition()).append("\":")
                    .append(offsetInfo(e.getValue()));
                first = false;
            }
        }
        return sb.append('}').toString();
    }

    private static String offsetInfo(Object v) {
        if (v == null) {
            return "null";
        }
        // 4.1 answers OffsetAndMetadata (offset, leaderEpoch); 4.2+ SharePartitionOffsetInfo.
        String start = call(v, "startOffset");
        if (start.equals("null")) {
            start = call(v, "offset");
        }
        return "{\"start\":" + start + ",\"lag\":" + call(v, "lag")
            + ",\"epoch\":" + call(v, "leaderEpoch") + "}";
    }

    private static String call(Object v, String name) {
        try {
            Object got = v.getClass().getMethod(name).invoke(v);
            if (got instanceof Optional) {
                got = ((Optional<?>) got).orElse(null);
            }
            return got == null ? "null" : String.valueOf(got);
        } catch (ReflectiveOperationException e) {
            return "null";
        }
    }

    // Values are decimal integers; anything else is null (not a value of the run).
    private static String number(String v) {
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

    private KchaosShare() {
    }
}
