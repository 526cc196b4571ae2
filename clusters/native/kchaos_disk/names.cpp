#include "names.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <unistd.h>

namespace kd {

const char* kind_name(NameKind k) {
    switch (k) {
        case NameKind::Create: return "create";
        case NameKind::Mkdir: return "mkdir";
        case NameKind::Unlink: return "unlink";
        case NameKind::Rmdir: return "rmdir";
        case NameKind::Rename: return "rename";
        case NameKind::Exchange: return "exchange";
    }
    return "?";
}

namespace {

std::string join(const std::string& dir, const std::string& name) {
    return dir.empty() ? name : dir + "/" + name;
}

}  // namespace

int remove_tree(int parent, const std::string& name) {
    struct stat st;
    if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) return -errno;
    if (!S_ISDIR(st.st_mode)) return unlinkat(parent, name.c_str(), 0) < 0 ? -errno : 0;
    int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    DIR* dp = fdopendir(fd);
    if (!dp) {
        int e = errno;
        close(fd);
        return -e;
    }
    int rc = 0;
    while (struct dirent* de = readdir(dp)) {
        std::string n = de->d_name;
        if (n == "." || n == "..") continue;
        int r = remove_tree(dirfd(dp), n);
        if (r && !rc) rc = r;
    }
    closedir(dp);
    if (unlinkat(parent, name.c_str(), AT_REMOVEDIR) < 0 && !rc) rc = -errno;
    return rc;
}

NameOp NameJournal::base(NameKind k, const Dir& d, const std::string& name) {
    NameOp op;
    op.seq = ++seq_;
    op.kind = k;
    op.dir = fcntl(d.fd, F_DUPFD_CLOEXEC, 0);
    op.key = d.key;
    op.name = name;
    op.path = join(d.path, name);
    op.waiting.insert(d.key);
    op.made = std::chrono::steady_clock::now();
    return op;
}

std::string NameJournal::trash_name() { return std::to_string(seq_); }

void NameJournal::created(const Dir& d, const std::string& name, bool is_dir) {
    ops_.push_back(base(is_dir ? NameKind::Mkdir : NameKind::Create, d, name));
}

int NameJournal::unlink(const Dir& d, const std::string& name) {
    struct stat st;
    if (fstatat(d.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) return -errno;
    if (S_ISDIR(st.st_mode)) return -EISDIR;
    NameOp op = base(NameKind::Unlink, d, name);
    op.trash = trash_name();
    if (renameat(d.fd, name.c_str(), trash_, op.trash.c_str()) < 0) {
        int e = errno;
        close(op.dir);
        return -e;
    }
    ops_.push_back(std::move(op));
    return 0;
}

int NameJournal::rmdir(const Dir& d, const std::string& name) {
    struct stat st;
    if (fstatat(d.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) < 0) return -errno;
    if (unlinkat(d.fd, name.c_str(), AT_REMOVEDIR) < 0) return -errno;
    NameOp op = base(NameKind::Rmdir, d, name);
    op.mode = st.st_mode & 07777;
    op.uid = st.st_uid;
    op.gid = st.st_gid;
    ops_.push_back(std::move(op));
    return 0;
}

int NameJournal::rename(const Dir& d, const std::string& name, const Dir& d2,
                        const std::string& name2, unsigned flags) {
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return -EINVAL;
    NameOp op = base(flags & RENAME_EXCHANGE ? NameKind::Exchange : NameKind::Rename, d, name);
    op.dir2 = fcntl(d2.fd, F_DUPFD_CLOEXEC, 0);
    op.key2 = d2.key;
    op.name2 = name2;
    op.path2 = join(d2.path, name2);
    op.waiting.insert(d2.key);
    auto fail = [&op](int e) {
        close(op.dir);
        close(op.dir2);
        return -e;
    };
    if (op.kind == NameKind::Exchange) {
        if (renameat2(d.fd, name.c_str(), d2.fd, name2.c_str(), RENAME_EXCHANGE) < 0)
            return fail(errno);
        ops_.push_back(std::move(op));
        return 0;
    }
    // A file the rename replaces is kept as a hard link in the trash; an (empty) directory it
    // replaces is made again from its mode and owner.
    struct stat src, dst;
    if (fstatat(d.fd, name.c_str(), &src, AT_SYMLINK_NOFOLLOW) < 0) return fail(errno);
    bool replaces = fstatat(d2.fd, name2.c_str(), &dst, AT_SYMLINK_NOFOLLOW) == 0;
    if (replaces && src.st_dev == dst.st_dev && src.st_ino == dst.st_ino) {
        // Two names of one file: rename(2) does nothing, and neither does its undo.
        close(op.dir);
        close(op.dir2);
        return 0;
    }
    if (replaces && !(flags & RENAME_NOREPLACE)) {
        if (S_ISDIR(dst.st_mode)) {
            op.trash_is_dir = true;
            op.mode = dst.st_mode & 07777;
            op.uid = dst.st_uid;
            op.gid = dst.st_gid;
        } else {
            op.trash = trash_name();
            if (linkat(d2.fd, name2.c_str(), trash_, op.trash.c_str(), 0) < 0) return fail(errno);
        }
    }
    if (renameat2(d.fd, name.c_str(), d2.fd, name2.c_str(), flags) < 0) {
        int e = errno;
        if (!op.trash.empty()) unlinkat(trash_, op.trash.c_str(), 0);
        return fail(e);
    }
    ops_.push_back(std::move(op));
    return 0;
}

void NameJournal::commit(NameOp& op) {
    if (!op.trash.empty()) {
        struct stat st;
        if (fstatat(trash_, op.trash.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode) && st.st_nlink == 1)
            released_.push_back(Key{st.st_dev, st.st_ino});
        remove_tree(trash_, op.trash);
    }
    if (op.dir >= 0) close(op.dir);
    if (op.dir2 >= 0) close(op.dir2);
    op.dir = op.dir2 = -1;
}

void NameJournal::synced_dir(const Key& k) {
    if (!strict_) {
        commit_all();
        return;
    }
    std::vector<NameOp> kept;
    for (auto& op : ops_) {
        op.waiting.erase(k);
        if (op.waiting.empty())
            commit(op);
        else
            kept.push_back(std::move(op));
    }
    ops_.swap(kept);
}

void NameJournal::synced_file() {
    if (!strict_) commit_all();
}

size_t NameJournal::commit_before(std::chrono::steady_clock::time_point deadline) {
    // Entries are in the order they were made: the durable ones are a prefix.
    size_t n = 0;
    while (n < ops_.size() && ops_[n].made < deadline) commit(ops_[n++]);
    ops_.erase(ops_.begin(), ops_.begin() + n);
    return n;
}

void NameJournal::commit_all() {
    for (auto& op : ops_) commit(op);
    ops_.clear();
}

int NameJournal::undo(NameOp& op) {
    const char* n = op.name.c_str();
    switch (op.kind) {
        case NameKind::Create:
            return unlinkat(op.dir, n, 0) < 0 ? -errno : 0;
        case NameKind::Mkdir:
            return remove_tree(op.dir, op.name);
        case NameKind::Unlink:
            return renameat(trash_, op.trash.c_str(), op.dir, n) < 0 ? -errno : 0;
        case NameKind::Rmdir:
            if (mkdirat(op.dir, n, op.mode) < 0) return -errno;
            return fchownat(op.dir, n, op.uid, op.gid, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
        case NameKind::Exchange:
            return renameat2(op.dir, n, op.dir2, op.name2.c_str(), RENAME_EXCHANGE) < 0 ? -errno
                                                                                       : 0;
        case NameKind::Rename: {
            const char* n2 = op.name2.c_str();
            if (renameat(op.dir2, n2, op.dir, n) < 0) return -errno;
            if (!op.trash.empty()) {
                if (renameat(trash_, op.trash.c_str(), op.dir2, n2) < 0) return -errno;
                op.trash.clear();  // back in place: not for commit() to remove
                return 0;
            }
            if (op.trash_is_dir) {
                if (mkdirat(op.dir2, n2, op.mode) < 0) return -errno;
                return fchownat(op.dir2, n2, op.uid, op.gid, AT_SYMLINK_NOFOLLOW) < 0 ? -errno
                                                                                      : 0;
            }
            return 0;
        }
    }
    return -EINVAL;
}

std::vector<Undone> NameJournal::undo_all() {
    std::vector<Undone> out;
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
        Undone u{kind_name(it->kind), it->path, it->path2, 0};
        u.error = -undo(*it);
        if (it->kind == NameKind::Unlink && !u.error) it->trash.clear();
        out.push_back(u);
    }
    for (auto& op : ops_) commit(op);  // what is left in the trash is garbage now
    ops_.clear();
    return out;
}

}  // namespace kd
