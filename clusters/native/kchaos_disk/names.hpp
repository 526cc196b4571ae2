// Creates, links, unlinks and renames that no directory fsync has made durable yet, done on the
// backing store at once and each kept with how to undo it.
//
// An unlinked file (and a file a rename replaced) is moved into the trash directory instead of
// being removed, so that a power loss can put it back; a durable unlink empties it from there.
// Which fsync makes an entry durable is the mode's: `strict` (POSIX: an fsync of each
// directory the entry changed) or `journal` (ext4's ordered journal: any fsync, of a file or a
// directory, commits every name change made before it).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kd {

using Key = std::pair<dev_t, ino_t>;

enum class NameKind { Create, Mkdir, Unlink, Rmdir, Rename, Exchange };

const char* kind_name(NameKind k);

// A directory as the journal knows it: a descriptor for *at() calls, its identity, and its
// path under the root for reports.
struct Dir {
    int fd;
    Key key;
    std::string path;
};

struct NameOp {
    uint64_t seq = 0;
    NameKind kind = NameKind::Create;
    int dir = -1, dir2 = -1;  // owned duplicates
    Key key{}, key2{};
    std::string name, name2;
    std::string trash;        // the victim's (or replaced file's) name in the trash, or ""
    bool trash_is_dir = false;
    mode_t mode = 0;          // an rmdir'd directory's, to make it again
    uid_t uid = 0;
    gid_t gid = 0;
    std::string path, path2;  // for reports
    std::set<Key> waiting;    // directories whose fsync it still waits for (strict mode)
    std::chrono::steady_clock::time_point made{};
};

struct Undone {
    std::string op, path, path2;
    int error = 0;  // 0: undone; else the errno undoing it met
};

class NameJournal {
  public:
    NameJournal(int trash_fd, bool strict) : trash_(trash_fd), strict_(strict) {}

    // Records what the layer already did: a file, node or symlink (or a hard link) made, or a
    // directory made (`is_dir`).
    void created(const Dir& d, const std::string& name, bool is_dir);
    // Does the operation, recorded; 0 or -errno.
    int unlink(const Dir& d, const std::string& name);
    int rmdir(const Dir& d, const std::string& name);
    int rename(const Dir& d, const std::string& name, const Dir& d2, const std::string& name2,
               unsigned flags);

    // An fsync of directory `k` (strict), or of anything (journal).
    void synced_dir(const Key& k);
    void synced_file();
    // Every entry made durable (a clean shutdown's sync).
    void commit_all();
    // The entries made before `deadline` made durable (the kernel's periodic writeback).
    size_t commit_before(std::chrono::steady_clock::time_point deadline);
    // Power loss: every entry undone, newest first.
    std::vector<Undone> undo_all();

    // The files whose last name a durable unlink (or replacing rename) removed since the last
    // call: nothing of theirs can come back, so whatever is pending of them can go.
    std::vector<Key> take_released() { return std::move(released_); }

    size_t size() const { return ops_.size(); }
    void each(const std::function<void(const NameOp&)>& f) const {
        for (const auto& op : ops_) f(op);
    }
    bool strict() const { return strict_; }

  private:
    NameOp base(NameKind k, const Dir& d, const std::string& name);
    void commit(NameOp& op);
    int undo(NameOp& op);
    std::string trash_name();

    int trash_;
    bool strict_;
    uint64_t seq_ = 0;
    std::vector<NameOp> ops_;
    std::vector<Key> released_;
};

// Removes `name` in `dirfd` and, for a directory, everything under it. 0 or -errno.
int remove_tree(int dirfd, const std::string& name);

}  // namespace kd
