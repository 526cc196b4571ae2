// Kafka's record batches in a segment file (`.log`), walked header to header: which offsets the
// bytes beyond a byte position hold. A power loss drops what no fsync made durable; for a
// segment, that is every batch that ends past its durable length, and this names their
// offsets (docs/disk.md, "Lost offsets"). Kafka's on-disk format, which the layer itself never
// needs: only `kchaos-disk batches` (main.cpp) and selftest.cpp use it.
//
// A batch (magic 2, Kafka's DefaultRecordBatch) starts with baseOffset int64, batchLength int32
// (the bytes after these 12), partitionLeaderEpoch int32, magic int8, crc int32, attributes
// int16, lastOffsetDelta int32 (at byte 23), all big-endian; its last offset is baseOffset +
// lastOffsetDelta. An older message set entry (magic 0 or 1) has offset int64 and size int32
// before its message, and its offset is its last (a compressed wrapper's is its last inner one).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace kd {

struct LostBatches {
    uint64_t batches = 0;           // batch headers walked
    uint64_t lost = 0;              // of them, those ending past `from`
    int64_t first = -1, last = -1;  // the lost batches' first and last offsets; -1: none lost
    uint64_t end = 0;               // where the walk stopped: the file's size, or a bad header
    std::string error;              // "" or why the walk stopped before the end
};

// Reads up to `n` bytes at `pos` into `buf`: how many (fewer only at the end), or -errno.
using ReadAt = std::function<ssize_t(void* buf, size_t n, uint64_t pos)>;

// Walks the `size` bytes `read` gives from the first batch on; a batch is lost when it ends past
// `from` (a batch cut by the durable length is lost whole: Kafka's recovery truncates it). The
// last batch may run past `size` (a write cut short): it counts, and its last offset is its
// base offset when its header is cut before lastOffsetDelta.
LostBatches lost_batches(const ReadAt& read, uint64_t size, uint64_t from);

}  // namespace kd
