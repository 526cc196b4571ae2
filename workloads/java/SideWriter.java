// One side file of a JVM-recorded producer (docs/history.md, "Sends recorded in the JVM"): bytes
// appended under this object's monitor into a buffer, which a writer thread of its own writes out
// when it is nearly full or every FLUSH_NS, whichever comes first.
//
// Memory is bounded: two buffers of CAPACITY bytes, one being filled and one being written.
// When the filled one is full and the other is still being written, the appender waits (the
// producer blocks; nothing is ever dropped). A SIGKILL of the JVM loses at most the buffer not
// yet written (FLUSH_NS of lines at most) and may leave the last line torn; the merge
// (history/merge.py) reads such a file up to its last whole line and says so.
//
// The file is locked (fcntl, FileChannel.lock) for as long as the writer is open, so that a
// merge started while this JVM still writes (a crashed client host whose JVM is flushing)
// waits for it.

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;

final class SideWriter {
    static final int CAPACITY = 1 << 20;
    // The most one appended record may take: an op line with an error text cut to
    // KchaosRecorded.MAX_ERROR chars, each at most 6 bytes escaped.
    static final int MAX_RECORD = 16 << 10;
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

    SideWriter(String path, String name) throws IOException {
        out = new FileOutputStream(path, true);
        lock = out.getChannel().lock();
        writer = new Thread(this::writeLoop, name);
        writer.setDaemon(true);
        writer.start();
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

    void putLong(long v) {
        if (v < 0) {
            if (v == Long.MIN_VALUE) {
                put("-9223372036854775808".getBytes(StandardCharsets.US_ASCII));
                return;
            }
            buf[len++] = '-';
            v = -v;
        }
        if (v < 10) {
            buf[len++] = (byte) ('0' + v);
            return;
        }
        int start = len;
        while (v > 0) {
            buf[len++] = (byte) ('0' + (v % 10));
            v /= 10;
        }
        for (int i = start, j = len - 1; i < j; i++, j--) {
            byte t = buf[i];
            buf[i] = buf[j];
            buf[j] = t;
        }
    }

    /** Little-endian int64, for the binary file of acknowledged sends. */
    void putRaw(long v) {
        for (int i = 0; i < 8; i++) {
            buf[len++] = (byte) (v >>> (8 * i));
        }
    }

    /** A JSON string: quoted, escaped, UTF-8. */
    void putString(String s) {
        buf[len++] = '"';
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (ch == '"' || ch == '\\') {
                buf[len++] = '\\';
                buf[len++] = (byte) ch;
            } else if (ch < 0x20) {
                String esc = String.format("\\u%04x", (int) ch);
                put(esc.getBytes(StandardCharsets.US_ASCII));
            } else if (ch < 0x80) {
                buf[len++] = (byte) ch;
            } else {
                int cp = ch;
                if (Character.isHighSurrogate(ch) && i + 1 < s.length()
                        && Character.isLowSurrogate(s.charAt(i + 1))) {
                    cp = Character.toCodePoint(ch, s.charAt(++i));
                } else if (Character.isSurrogate(ch)) {
                    cp = 0xfffd;  // a lone surrogate is no character: JSON readers refuse it
                }
                put(new String(Character.toChars(cp)).getBytes(StandardCharsets.UTF_8));
            }
        }
        buf[len++] = '"';
    }
}
