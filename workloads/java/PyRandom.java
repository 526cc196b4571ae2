// Python's random.Random (MT19937, seeded from a str as CPython 3 does with version 2), as far as
// the JVM-recorded producers draw from it: randrange(n). A JVM-recorded producer seeded with
// harness/plan.py's client_rng string draws the same keys as the harness-recorded producer of
// the same seed and producer id (workloads/pipelined.py next_op), so one seed gives the same
// sends on every recording path. tests/unit/workloads/test_java_recorded.py holds the two
// implementations to each other.

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

final class PyRandom {
    private static final int N = 624;
    private static final int M = 397;
    private final int[] mt = new int[N];
    private int index;

    PyRandom(String seed) {
        byte[] a = seed.getBytes(StandardCharsets.UTF_8);
        byte[] digest;
        try {
            digest = MessageDigest.getInstance("SHA-512").digest(a);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        // int.from_bytes(a + sha512(a).digest()), big-endian, then its 32-bit words from the
        // least significant one (CPython's random_seed).
        byte[] all = new byte[a.length + digest.length];
        System.arraycopy(a, 0, all, 0, a.length);
        System.arraycopy(digest, 0, all, a.length, digest.length);
        BigInteger n = new BigInteger(1, all);
        int bits = n.bitLength();
        int words = bits == 0 ? 1 : (bits - 1) / 32 + 1;
        int[] key = new int[words];
        BigInteger mask = BigInteger.valueOf(0xffffffffL);
        for (int i = 0; i < words; i++) {
            key[i] = n.shiftRight(32 * i).and(mask).intValue();
        }
        initByArray(key);
    }

    private void initGenrand(int s) {
        mt[0] = s;
        for (int i = 1; i < N; i++) {
            mt[i] = 1812433253 * (mt[i - 1] ^ (mt[i - 1] >>> 30)) + i;
        }
        index = N;
    }

    private void initByArray(int[] key) {
        initGenrand(19650218);
        int i = 1;
        int j = 0;
        for (int k = Math.max(N, key.length); k > 0; k--) {
            mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >>> 30)) * 1664525)) + key[j] + j;
            i++;
            j++;
            if (i >= N) {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if (j >= key.length) {
                j = 0;
            }
        }
        for (int k = N - 1; k > 0; k--) {
            mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >>> 30)) * 1566083941)) - i;
            i++;
            if (i >= N) {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x80000000;
    }

    private int genrand() {
        if (index >= N) {
            int kk;
            int y;
            for (kk = 0; kk < N - M; kk++) {
                y = (mt[kk] & 0x80000000) | (mt[kk + 1] & 0x7fffffff);
                mt[kk] = mt[kk + M] ^ (y >>> 1) ^ ((y & 1) != 0 ? 0x9908b0df : 0);
            }
            for (; kk < N - 1; kk++) {
                y = (mt[kk] & 0x80000000) | (mt[kk + 1] & 0x7fffffff);
                mt[kk] = mt[kk + (M - N)] ^ (y >>> 1) ^ ((y & 1) != 0 ? 0x9908b0df : 0);
            }
            y = (mt[N - 1] & 0x80000000) | (mt[0] & 0x7fffffff);
            mt[N - 1] = mt[M - 1] ^ (y >>> 1) ^ ((y & 1) != 0 ? 0x9908b0df : 0);
            index = 0;
        }
        int y = mt[index++];
        y ^= (y >>> 11);
        y ^= (y << 7) & 0x9d2c5680;
        y ^= (y << 15) & 0xefc60000;
        y ^= (y >>> 18);
        return y;
    }

    /** random.Random.randrange(n) for 0 < n < 2^31: getrandbits(n.bit_length()) until below n. */
    int randrange(int n) {
        int k = 32 - Integer.numberOfLeadingZeros(n);
        int r;
        do {
            r = genrand() >>> (32 - k);
        } while (r >= n);
        return r;
    }
}
