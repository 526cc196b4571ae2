#include "file_state.hpp"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace kd {

namespace {

// Undo pieces are read in this size, and a piece of zeros is kept as its length only.
constexpr off_t kPiece = 64 * 1024;

bool all_zero(const char* p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

}  // namespace

int pwrite_all(int fd, const char* p, size_t n, off_t off) {
    while (n) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += w;
        n -= w;
        off += w;
    }
    return 0;
}

int FileState::save(int fd, off_t off, off_t len) {
    off_t end = std::min(off + len, durable_);
    if (off >= end) return 0;
    std::vector<char> buf;
    for (const auto& [a, b] : saved_.gaps(off, end)) {
        for (off_t at = a; at < b; at += kPiece) {
            off_t n = std::min(kPiece, b - at);
            buf.resize(n);
            off_t got = 0;
            while (got < n) {
                ssize_t r = pread(fd, buf.data() + got, n - got, at + got);
                if (r < 0) {
                    if (errno == EINTR) continue;
                    return -errno;
                }
                if (r == 0) break;  // shorter than the durable image says: the rest reads as 0
                got += r;
            }
            std::fill(buf.begin() + got, buf.end(), 0);
            Saved s;
            s.len = n;
            if (!all_zero(buf.data(), n)) {
                s.bytes.assign(buf.data(), n);
                held_ += n;
            }
            undo_[at] = std::move(s);
            saved_.add(at, at + n);
        }
    }
    return 0;
}

void FileState::commit(off_t size) {
    durable_ = size;
    written_.clear();
    saved_.clear();
    undo_.clear();
    held_ = 0;
}

int FileState::restore(int fd) {
    static const std::string zeros(kPiece, '\0');
    for (const auto& [at, s] : undo_) {
        const std::string& data = s.bytes.empty() ? zeros : s.bytes;
        int rc = pwrite_all(fd, data.data(), s.len, at);
        if (rc) return rc;
    }
    if (ftruncate(fd, durable_) < 0) return -errno;
    commit(durable_);
    return 0;
}

bool FileState::pending(off_t size) const {
    return size != durable_ || !written_.empty() || !undo_.empty();
}

off_t FileState::pending_bytes(off_t size) const {
    RangeSet all = written_;
    all.add(std::min(size, durable_), std::max(size, durable_));
    return all.total();
}

void FileState::overwrite_durable(off_t off, const std::string& data) {
    off_t end = std::min<off_t>(off + data.size(), durable_);
    for (auto& [at, s] : undo_) {
        off_t a = std::max(at, off), b = std::min(at + s.len, end);
        if (a >= b) continue;
        if (s.bytes.empty()) {
            s.bytes.assign(s.len, '\0');
            held_ += s.len;
        }
        s.bytes.replace(a - at, b - a, data, a - off, b - a);
    }
}

void FileState::flip_durable(off_t off, unsigned char mask) {
    auto it = undo_.upper_bound(off);
    if (it == undo_.begin()) return;
    --it;
    Saved& s = it->second;
    if (off >= it->first + s.len) return;
    if (s.bytes.empty()) {
        s.bytes.assign(s.len, '\0');
        held_ += s.len;
    }
    s.bytes[off - it->first] ^= static_cast<char>(mask);
}

void FileState::cut_durable(off_t size) {
    if (size >= durable_) return;
    durable_ = size;
    for (auto it = undo_.begin(); it != undo_.end();) {
        Saved& s = it->second;
        if (it->first >= size) {
            held_ -= s.bytes.size();
            it = undo_.erase(it);
            continue;
        }
        if (it->first + s.len > size) {
            s.len = size - it->first;
            if (!s.bytes.empty()) {
                held_ -= s.bytes.size() - s.len;
                s.bytes.resize(s.len);
            }
        }
        ++it;
    }
    saved_.clip(size);
}

}  // namespace kd
