#include "kafka_batches.hpp"

#include <string.h>

#include <algorithm>
#include <vector>

namespace kd {

namespace {

// A v0 message is at least crc, magic, attributes, key length and value length (14 bytes); a v2
// batch is at least 49 bytes past its length field.
constexpr int32_t kMinLength = 14;
constexpr size_t kHeader = 27;  // through lastOffsetDelta
constexpr size_t kChunk = 64 * 1024;

uint64_t be64(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

uint32_t be32(const unsigned char* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

LostBatches lost_batches(const ReadAt& read, uint64_t size, uint64_t from) {
    LostBatches out;
    std::vector<unsigned char> buf(kChunk);
    uint64_t at = 0, got = 0;  // the buffer holds [at, at + got)
    uint64_t pos = 0;
    while (pos < size) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(kHeader, size - pos));
        if (pos < at || pos + want > at + got) {
            ssize_t n = read(buf.data(), kChunk, pos);
            if (n < 0) {
                out.error = std::string("cannot read at byte ") + std::to_string(pos) + ": " +
                            strerror(static_cast<int>(-n));
                break;
            }
            at = pos;
            got = static_cast<uint64_t>(n);
            want = static_cast<size_t>(std::min<uint64_t>(want, got));
        }
        const unsigned char* h = buf.data() + (pos - at);
        if (want < 12) {
            out.error = "a header cut short at byte " + std::to_string(pos);
            break;
        }
        int64_t base = static_cast<int64_t>(be64(h));
        int32_t length = static_cast<int32_t>(be32(h + 8));
        int magic = want > 16 ? h[16] : -1;
        if (base < 0 || length < kMinLength || magic > 2) {
            out.error = "no batch header at byte " + std::to_string(pos) + " (offset " +
                        std::to_string(base) + ", length " + std::to_string(length) +
                        (magic >= 0 ? ", magic " + std::to_string(magic) : std::string()) + ")";
            break;
        }
        int64_t last = base;
        if (magic == 2 && want >= kHeader) {
            int32_t delta = static_cast<int32_t>(be32(h + 23));
            if (delta < 0) {
                out.error = "no batch header at byte " + std::to_string(pos) +
                            " (lastOffsetDelta " + std::to_string(delta) + ")";
                break;
            }
            last = base + delta;
        }
        uint64_t end = pos + 12 + static_cast<uint64_t>(length);
        out.batches++;
        if (end > from) {
            out.lost++;
            if (out.first < 0) out.first = base;
            if (last > out.last) out.last = last;
        }
        pos = end;
    }
    out.end = std::min(pos, size);
    return out;
}

}  // namespace kd
