// One side file of a JVM-recorded producer or of the final reads (docs/history.md, "Sends
// recorded in the JVM", "Final reads"; the format is history/sidefiles.py's): fixed-width
// little-endian records appended under this object's monitor into a buffer, which a writer
// thread of its own writes out when it is nearly full or every FLUSH_NS, whichever comes first.
//
// Memory is bounded: two buffers of CAPACITY bytes, one being filled and one being written.
// When the filled one is full and the other is still being written, the appender waits (the
// producer blocks; nothing is ever dropped). A SIGKILL of the JVM loses at most the buffer not
// yet written (FLUSH_NS of records at most) and may leave the last record torn; the build of the
// history (history/build.py) reads such a file up to its last whole record and says so.
//
// Texts a record names (node names, error texts) go to `<name>.strings`, one JSON string per
// line, numbered in order: string() writes a new one out at once, before the record naming it
// is appended, so every text a record on disk names is on disk before it.
//
// The file is locked (fcntl, FileChannel.lock) for as long as the writer is open, so that a
// build started while this JVM still writes (a crashed client host whose JVM is flushing)
// waits for it.

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

final class SideWriter {
    static final int CAPACITY = 1 << 20;
    // Room reserve() makes: more than the widest record (64 bytes).
    static final int MAX_RECORD = 256;
    // history/sidefiles.py HEADER: magic, layout tag, version, record width, 16 bytes reserved.
    static final byte[] SENDS = {'S', 'E'};
    static final byte[] POLLS = {'P', 'O'};
    static final int VERSION = 1;
    // Distinct texts remembered (error texts may vary without end): past it, a text seen again
    // is written again under a new number.
    static final int MAX_STRINGS = 1 << 16;
    // Half the harness recorder's 0.2 s (harness/run/interpreter.py PIPELINED_FLUSH_S): a writer
    // asleep on an empty buffer wakes this often, so a line waits at most twice this long.
    static final long FLUSH_NS = 100_000_000L;

    private final FileOutputStream out;
    private final FileLock lock;
    private final Thread writer;
    byte[] buf = new byte[CAPACITY];
    int len;
    private byte[] spare = new byte[CAPACITY];
    private byte[] pending;
    private int pendingLen;
    private boolean closing;
    private IOException failed;
    private long lastHandoff = System.nanoTime();

    private final String stringsPath;
    private FileOutputStream strings;
    private final Map<String, Integer> stringIndex = new HashMap<>();
    private int nStrings;

    /** A file of raw bytes (the acknowledged sends' triples): no header, no strings. */
    SideWriter(String path, String name) throws IOException {
        this(path, name, null, 0);
    }

    /** A side file of records of `width` bytes in layout `tag` (SENDS, POLLS); a new file
     * starts with its header. */
    SideWriter(String path, String name, byte[] tag, int width) throws IOException {
        out = new FileOutputStream(path, true);
        lock = out.getChannel().lock();
        stringsPath = tag == null ? null : path.replaceFirst("\\.ops$", "") + ".strings";
        if (tag != null && out.getChannel().size() == 0) {
            put(new byte[] {'K', 'C', 'H', 'A', 'O', 'S', tag[0], tag[1]});
            putInt(VERSION);
            putInt(width);
            for (int i = 0; i < 16; i++) {
                put((byte) 0);
            }
        }
        writer = new Thread(this::writeLoop, name);
        writer.setDaemon(true);
        writer.start();
    }

    /** The number of `s` in the strings file (-1 for null), written out now if new. Called
     * under this monitor, before appending the record that names it. */
    int string(String s) throws IOException {
        if (s == null) {
            return -1;
        }
        Integer have = stringIndex.get(s);
        if (have != null) {
            return have;
        }
        if (strings == null) {
            strings = new FileOutputStream(new File(stringsPath), true);
        }
        strings.write(jsonLine(s));
        if (stringIndex.size() >= MAX_STRINGS) {
            stringIndex.clear();
        }
        stringIndex.put(s, nStrings);
        return nStrings++;
    }

    /** Room for one record; called under this monitor before appending it. */
    void reserve() throws IOException {
        if (closing) {
            throw new IOException("the side file is closed");
        }
        if (len + MAX_RECORD > CAPACITY) {
            handoff();
        }
    }

    // Called under this monitor: the filled buffer goes to the writer, waiting while the one
    // before it is still being written (the back-pressure that bounds memory).
    private void handoff() throws IOException {
        while (pending != null && failed == null) {
            try {
                wait();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while the side file was being written");
            }
        }
        if (failed != null) {
            throw failed;
        }
        pending = buf;
        pendingLen = len;
        buf = spare;
        spare = null;
        len = 0;
        lastHandoff = System.nanoTime();
        notifyAll();
    }

    private void writeLoop() {
        while (true) {
            byte[] b;
            int n;
            synchronized (this) {
                while (pending == null) {
                    if (closing && len == 0) {
                        return;
                    }
                    long idle = FLUSH_NS - (System.nanoTime() - lastHandoff);
                    if (len > 0 && (idle <= 0 || closing)) {
                        try {
                            handoff();
                        } catch (IOException e) {
                            return;
                        }
                        break;
                    }
                    try {
                        // Appenders do not wake the writer (that would cost them a notify per
                        // line): it wakes by time.
                        wait(len == 0 ? FLUSH_NS / 1_000_000 : Math.max(1, idle / 1_000_000));
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                b = pending;
                n = pendingLen;
            }
            try {
                out.write(b, 0, n);
            } catch (IOException e) {
                synchronized (this) {
                    failed = e;
                    notifyAll();
                }
                return;
            }
            synchronized (this) {
                spare = b;
                pending = null;
                notifyAll();
            }
        }
    }

    /** Everything appended so far written out, the lock released; waits for the writer. */
    void close() {
        synchronized (this) {
            closing = true;
            notifyAll();
        }
        try {
            writer.join(30_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            lock.release();
            out.close();
            synchronized (this) {
                if (strings != null) {
                    strings.close();
                }
            }
        } catch (IOException e) {
            // The JVM is ending the file; what was written stays.
        }
    }

    // Appenders: called under this monitor, after reserve(). ---------------------------------
    void put(byte b) {
        buf[len++] = b;
    }

    void put(byte[] b) {
        System.arraycopy(b, 0, buf, len, b.length);
        len += b.length;
    }

    /** Little-endian int64. */
    void putRaw(long v) {
        for (int i = 0; i < 8; i++) {
            buf[len++] = (byte) (v >>> (8 * i));
        }
    }

    /** Little-endian int32. */
    void putInt(int v) {
        for (int i = 0; i < 4; i++) {
            buf[len++] = (byte) (v >>> (8 * i));
        }
    }

    /** A JSON string and a newline: quoted, escaped, UTF-8. */
    static byte[] jsonLine(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 3).append('"');
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch == '"' || ch == '\\') {
                sb.append('\\').append(ch);
            } else if (ch < 0x20) {
                sb.append(String.format("\\u%04x", (int) ch));
            } else if (Character.isHighSurrogate(ch) && i + 1 < s.length()
                    && Character.isLowSurrogate(s.charAt(i + 1))) {
                sb.append(ch).append(s.charAt(++i));
            } else if (Character.isSurrogate(ch)) {
                sb.append('\ufffd');  // a lone surrogate is no character: JSON readers refuse it
            } else {
                sb.append(ch);
            }
        }
        return sb.append('"').append('\n').toString().getBytes(StandardCharsets.UTF_8);
    }
}
