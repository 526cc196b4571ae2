// What one file holds that an fsync has not made durable, and how to put its durable image back.
//
// Writes go through to the backing file at once (reads need nothing of this), so what is kept
// in memory is the durable image's bytes that later writes overwrote (an undo log), not the new
// data: appending, which is nearly all Kafka writes, costs a range in a set and no copy.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "ranges.hpp"

namespace kd {

struct Saved {
    off_t len = 0;
    std::string bytes;  // empty: `len` zero bytes (preallocated indexes are mostly zeros)
};

class FileState {
  public:
    // Starts tracking a file whose durable image is its current content, `size` bytes long.
    explicit FileState(off_t size) : durable_(size) {}

    // Before bytes [off, off + len) of `fd` are overwritten, zeroed or cut off: keeps the durable
    // image's bytes there that are not kept yet. 0 or -errno.
    int save(int fd, off_t off, off_t len);
    // After `len` bytes were written at `off`.
    void wrote(off_t off, off_t len) { written_.add(off, off + len); }
    // After the file was cut to (or extended to) `size`.
    void resized(off_t size) { written_.clip(size); }

    // fsync: the file as it is now, `size` bytes long, is the durable image.
    void commit(off_t size);
    // Power loss: the durable image written back into `fd` (its bytes, then its length).
    // 0 or -errno.
    int restore(int fd);

    bool pending(off_t size) const;
    // Bytes whose durable content may differ from what a read sees now: the written ranges and
    // the span between the durable and the current length.
    off_t pending_bytes(off_t size) const;
    // Bytes written since the last fsync (within the current length).
    off_t written_bytes() const { return written_.total(); }
    off_t durable_size() const { return durable_; }
    // Bytes of memory the undo log holds.
    uint64_t held_bytes() const { return held_; }

    // Corruption of the medium: bytes [off, off + n) become `data` in the durable image as well
    // as in the file (the caller writes the file).
    void overwrite_durable(off_t off, const std::string& data);
    // Corruption of the medium: the durable image's byte at `off` XORed with `mask` too, where
    // it differs from the file's (the caller flips the file's).
    void flip_durable(off_t off, unsigned char mask);
    // Corruption of the medium: the durable image is cut to `size` too.
    void cut_durable(off_t size);

  private:
    off_t durable_;
    RangeSet written_;  // written since the last fsync
    RangeSet saved_;    // what `undo_` covers
    std::map<off_t, Saved> undo_;
    uint64_t held_ = 0;
};

// Writes all of p[0..n) at off, through EINTR and short writes; 0, or -errno.
int pwrite_all(int fd, const char* p, size_t n, off_t off);

}  // namespace kd
