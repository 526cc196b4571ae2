// The layer's state, shared by the FUSE operations (layer.cpp) and the control socket
// (control.cpp): the inode table, what each file has pending, the name journal, the fail rules
// and whether the machine still has power.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "file_state.hpp"
#include "names.hpp"
#include "protocol.hpp"

namespace kd {

struct Inode {
    int fd = -1;  // O_PATH, on the backing file
    Key key{};
    uint64_t nlookup = 0;
};

// One backing file's pending writes. Never removed from the table (pointers stay valid); empty
// (`state` null, no descriptor held) when nothing is pending.
struct Tracked {
    std::mutex mu;
    std::unique_ptr<FileState> state;
    int opath = -1;  // O_PATH, held while something is pending so a drop can reopen it
    // When the file last went from nothing pending to something (the kernel's dirtied_when).
    std::chrono::steady_clock::time_point since{};
};

struct Counters {
    std::atomic<uint64_t> writes{0}, bytes_written{0}, fsyncs{0}, fsyncdirs{0}, failed{0};
    std::atomic<uint64_t> written_back{0};  // files the periodic writeback made durable
};

// A reader-writer lock that lets a waiting writer in before new readers: glibc's default
// prefers readers, and a drop or a corruption on a busy node would wait for a lull that may not
// come.
class WriterFirstLock {
  public:
    WriterFirstLock() {
        pthread_rwlockattr_t a;
        pthread_rwlockattr_init(&a);
        pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        pthread_rwlock_init(&l_, &a);
        pthread_rwlockattr_destroy(&a);
    }
    WriterFirstLock(const WriterFirstLock&) = delete;
    WriterFirstLock& operator=(const WriterFirstLock&) = delete;
    void lock() { pthread_rwlock_wrlock(&l_); }
    void unlock() { pthread_rwlock_unlock(&l_); }
    void lock_shared() { pthread_rwlock_rdlock(&l_); }
    void unlock_shared() { pthread_rwlock_unlock(&l_); }

  private:
    pthread_rwlock_t l_;
};

struct Layer {
    std::string mountpoint, root_path, trash_path;
    int root_fd = -1, trash_fd = -1, snap_fd = -1;
    Inode root;
    fuse_session* se = nullptr;

    // Shared by every operation while it runs; a drop, a commit and corruption take it alone.
    WriterFirstLock power_mu;
    bool powered = true;

    std::mutex inode_mu;
    std::map<Key, Inode*> inodes;

    std::mutex track_mu;
    std::map<Key, std::unique_ptr<Tracked>> tracked;

    std::mutex names_mu;
    std::unique_ptr<NameJournal> names;

    std::mutex fail_mu;
    std::vector<FailRule> fails;
    std::atomic<int> nfails{0};

    Counters count;
    // 0: nothing is durable without an fsync. Else what has been pending this many seconds is
    // made durable, as a kernel writes dirty data back and a journal commits (writeback.cpp).
    double writeback_s = 0;
};

extern Layer L;

extern const fuse_lowlevel_ops kOps;

// The path of an open descriptor relative to the root ("" for the root itself), as reports say
// it; a file in the trash reads ".trash/<n>".
std::string rel_path(int fd);
std::string proc_path(int fd);
Tracked& tracked(const Key& k);
// Starts tracking `t` (if it is not) for the file open as `fd`, whose identity is `opath_src`.
int activate(Tracked& t, int fd, int opath_src);

// The periodic writeback, when L.writeback_s asks for it (writeback.cpp); runs for good.
void writeback_loop();
// Files no name reaches any more give back their descriptor (layer.cpp); names_mu held.
void forget_released();

// The control socket's commands (control.cpp).
std::string handle_command(const std::string& line);
void invalidate(const Key& k);

}  // namespace kd
