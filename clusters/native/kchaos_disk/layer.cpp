// The FUSE operations: a passthrough to the backing directory (inodes held as O_PATH
// descriptors, every call made relative to them), which tells each file's FileState what it
// overwrites before it writes, and the name journal what it creates, unlinks and renames.
#include "layer.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <climits>

namespace kd {

Layer L;

namespace {

constexpr double kTimeout = 1.0;

struct Handle {
    int fd;
    bool sync;  // opened O_SYNC or O_DSYNC: every write is durable when it returns
    Inode* inode;
};

struct DirHandle {
    DIR* dp;
    off_t offset;
    dirent* entry;
};

Inode* I(fuse_ino_t ino) {
    return ino == FUSE_ROOT_ID ? &L.root : reinterpret_cast<Inode*>(ino);
}

Handle* H(fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }

// Held for the whole of an operation, so that a drop finds none half done.
class Op {
  public:
    Op() : lk_(L.power_mu) {}

  private:
    std::shared_lock<WriterFirstLock> lk_;
};

// EIO once the power is off; a fail rule's errno when one matches; else 0.
int gate(unsigned classes, Inode* in, const char* name = nullptr) {
    if (!L.powered) return EIO;
    if (!L.nfails.load(std::memory_order_relaxed)) return 0;
    std::lock_guard<std::mutex> g(L.fail_mu);
    std::string path;
    bool have_path = false;
    for (const auto& r : L.fails) {
        if (!(r.classes & classes)) continue;
        if (!r.prefix.empty()) {
            if (!have_path) {
                path = rel_path(in->fd);
                if (name) path = path.empty() ? name : path + "/" + name;
                have_path = true;
            }
            if (path.compare(0, r.prefix.size(), r.prefix) != 0) continue;
        }
        L.count.failed++;
        return r.err;
    }
    return 0;
}

#define GATE(req, classes, ...)                             \
    Op op_;                                                 \
    if (int e_ = gate((classes), __VA_ARGS__)) {            \
        fuse_reply_err((req), e_);                          \
        return;                                             \
    }

int stat_of(int fd, struct stat* st) {
    return fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

// Looks `name` up under `parent`, counting the kernel's reference. 0 or -errno.
int do_lookup(Inode* parent, const char* name, fuse_entry_param* e) {
    memset(e, 0, sizeof *e);
    e->attr_timeout = e->entry_timeout = kTimeout;
    int fd = openat(parent->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    if (int rc = stat_of(fd, &e->attr)) {
        close(fd);
        return rc;
    }
    Key k{e->attr.st_dev, e->attr.st_ino};
    std::lock_guard<std::mutex> g(L.inode_mu);
    auto it = L.inodes.find(k);
    Inode* in;
    if (it != L.inodes.end()) {
        in = it->second;
        close(fd);
    } else {
        in = new Inode{fd, k, 0};
        L.inodes[k] = in;
    }
    in->nlookup++;
    e->ino = reinterpret_cast<fuse_ino_t>(in);
    return 0;
}

void reply_entry(fuse_req_t req, Inode* parent, const char* name) {
    fuse_entry_param e;
    if (int rc = do_lookup(parent, name, &e))
        fuse_reply_err(req, -rc);
    else
        fuse_reply_entry(req, &e);
}

Dir dir_of(Inode* in) { return Dir{in->fd, in->key, rel_path(in->fd)}; }

void forget_one(fuse_ino_t ino, uint64_t n) {
    Inode* in = I(ino);
    if (in == &L.root) return;
    std::lock_guard<std::mutex> g(L.inode_mu);
    if (in->nlookup > n) {
        in->nlookup -= n;
        return;
    }
    L.inodes.erase(in->key);
    close(in->fd);
    delete in;
}

// Truncation (or extension) of the file open as `fd` to `size`, with what it cuts off kept.
int truncate_tracked(Inode* in, int fd, off_t size) {
    Tracked& t = tracked(in->key);
    std::lock_guard<std::mutex> g(t.mu);
    if (int rc = activate(t, fd, in->fd)) return rc;
    off_t durable = t.state->durable_size();
    if (size < durable) {
        if (int rc = t.state->save(fd, size, durable - size)) return rc;
    }
    if (ftruncate(fd, size) < 0) return -errno;
    t.state->resized(size);
    return 0;
}

int commit_tracked(const Key& k) {
    Tracked* t;
    {
        std::lock_guard<std::mutex> g(L.track_mu);
        auto it = L.tracked.find(k);
        if (it == L.tracked.end()) return 0;
        t = it->second.get();
    }
    std::lock_guard<std::mutex> g(t->mu);
    if (!t->state) return 0;
    t->state.reset();
    close(t->opath);
    t->opath = -1;
    return 0;
}

}  // namespace

// Called with names_mu held, after the journal committed: files no name reaches any more
// keep no descriptor and no undo log.
void forget_released() {
    for (const Key& k : L.names->take_released()) {
        Tracked* t;
        {
            std::lock_guard<std::mutex> g(L.track_mu);
            auto it = L.tracked.find(k);
            if (it == L.tracked.end()) continue;
            t = it->second.get();
        }
        std::lock_guard<std::mutex> g(t->mu);
        struct stat st;
        if (!t->state || fstatat(t->opath, "", &st, AT_EMPTY_PATH) < 0 || st.st_nlink) continue;
        t->state.reset();
        close(t->opath);
        t->opath = -1;
    }
}

namespace {

void op_init(void*, fuse_conn_info* conn) {
    // Without the writeback cache every write reaches the layer before write(2) returns, so a
    // drop sees all the writes a stopped process made.
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    // Reads are answered by splicing from the backing file into the FUSE device, no copy.
    if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
    if (conn->capable & FUSE_CAP_SPLICE_MOVE) conn->want |= FUSE_CAP_SPLICE_MOVE;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    GATE(req, kMeta, I(parent), name);
    reply_entry(req, I(parent), name);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
    forget_one(ino, n);
    fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
    for (size_t i = 0; i < count; i++) forget_one(forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
    GATE(req, kMeta, I(ino));
    struct stat st;
    if (int rc = stat_of(I(ino)->fd, &st)) return (void)fuse_reply_err(req, -rc);
    fuse_reply_attr(req, &st, kTimeout);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                fuse_file_info* fi) {
    Inode* in = I(ino);
    GATE(req, (to_set & FUSE_SET_ATTR_SIZE) ? (kMeta | kWrite) : kMeta, in);
    std::string proc = proc_path(in->fd);
    int fd = fi ? H(fi)->fd : -1;
    if (to_set & FUSE_SET_ATTR_MODE) {
        int r = fd >= 0 ? fchmod(fd, attr->st_mode) : chmod(proc.c_str(), attr->st_mode);
        if (r < 0) return (void)fuse_reply_err(req, errno);
    }
    if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
        uid_t u = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : static_cast<uid_t>(-1);
        gid_t g = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : static_cast<gid_t>(-1);
        if (fchownat(in->fd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
            return (void)fuse_reply_err(req, errno);
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        int tfd = fd >= 0 ? fd : open(proc.c_str(), O_RDWR | O_CLOEXEC);
        if (tfd < 0) return (void)fuse_reply_err(req, errno);
        int rc = truncate_tracked(in, tfd, attr->st_size);
        if (fd < 0) close(tfd);
        if (rc) return (void)fuse_reply_err(req, -rc);
    }
    if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
        timespec tv[2];
        tv[0].tv_sec = tv[1].tv_sec = 0;
        tv[0].tv_nsec = tv[1].tv_nsec = UTIME_OMIT;
        if (to_set & FUSE_SET_ATTR_ATIME_NOW)
            tv[0].tv_nsec = UTIME_NOW;
        else if (to_set & FUSE_SET_ATTR_ATIME)
            tv[0] = attr->st_atim;
        if (to_set & FUSE_SET_ATTR_MTIME_NOW)
            tv[1].tv_nsec = UTIME_NOW;
        else if (to_set & FUSE_SET_ATTR_MTIME)
            tv[1] = attr->st_mtim;
        int r = fd >= 0 ? futimens(fd, tv) : utimensat(AT_FDCWD, proc.c_str(), tv, 0);
        if (r < 0) return (void)fuse_reply_err(req, errno);
    }
    struct stat st;
    if (int rc = stat_of(in->fd, &st)) return (void)fuse_reply_err(req, -rc);
    fuse_reply_attr(req, &st, kTimeout);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
    GATE(req, kRead, I(ino));
    char buf[PATH_MAX + 1];
    ssize_t n = readlinkat(I(ino)->fd, "", buf, sizeof buf);
    if (n < 0) return (void)fuse_reply_err(req, errno);
    if (n == static_cast<ssize_t>(sizeof buf)) return (void)fuse_reply_err(req, ENAMETOOLONG);
    buf[n] = 0;
    fuse_reply_readlink(req, buf);
}

// mknod, mkdir and symlink: made, recorded, looked up.
void make_node(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev,
               const char* link) {
    Inode* p = I(parent);
    GATE(req, kNames | kWrite, p, name);
    {
        std::lock_guard<std::mutex> g(L.names_mu);
        int r;
        if (link)
            r = symlinkat(link, p->fd, name);
        else if (S_ISDIR(mode))
            r = mkdirat(p->fd, name, mode);
        else
            r = mknodat(p->fd, name, mode, rdev);
        if (r < 0) return (void)fuse_reply_err(req, errno);
        L.names->created(dir_of(p), name, !link && S_ISDIR(mode));
    }
    reply_entry(req, p, name);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
    make_node(req, parent, name, mode, rdev, nullptr);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    make_node(req, parent, name, S_IFDIR | mode, 0, nullptr);
}

void op_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
    make_node(req, parent, name, S_IFLNK, 0, link);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
    Inode* p = I(newparent);
    GATE(req, kNames | kWrite, p, newname);
    {
        std::lock_guard<std::mutex> g(L.names_mu);
        std::string src = proc_path(I(ino)->fd);
        if (linkat(AT_FDCWD, src.c_str(), p->fd, newname, AT_SYMLINK_FOLLOW) < 0)
            return (void)fuse_reply_err(req, errno);
        L.names->created(dir_of(p), newname, false);
    }
    reply_entry(req, p, newname);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
    Inode* p = I(parent);
    GATE(req, kNames, p, name);
    std::lock_guard<std::mutex> g(L.names_mu);
    fuse_reply_err(req, -L.names->unlink(dir_of(p), name));
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
    Inode* p = I(parent);
    GATE(req, kNames, p, name);
    std::lock_guard<std::mutex> g(L.names_mu);
    fuse_reply_err(req, -L.names->rmdir(dir_of(p), name));
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
               const char* newname, unsigned int flags) {
    Inode* p = I(parent);
    GATE(req, kNames | kWrite, p, name);
    std::lock_guard<std::mutex> g(L.names_mu);
    fuse_reply_err(req,
                   -L.names->rename(dir_of(p), name, dir_of(I(newparent)), newname, flags));
}

// The backing file's open flags for a FUSE open: write-only becomes read-write (what a write
// overwrites is read first), O_APPEND goes (the kernel gives every write its offset, and the
// layer records the ranges it is told), O_TRUNC is done tracked after the open.
int backing_flags(int flags) {
    flags &= ~(O_NOFOLLOW | O_APPEND | O_TRUNC | O_CREAT | O_EXCL | O_DIRECT);
    if ((flags & O_ACCMODE) == O_WRONLY) flags = (flags & ~O_ACCMODE) | O_RDWR;
    return flags | O_CLOEXEC;
}

void opened(fuse_req_t req, Inode* in, int fd, fuse_file_info* fi, const fuse_entry_param* e) {
    if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
        if (int rc = truncate_tracked(in, fd, 0)) {
            close(fd);
            return (void)fuse_reply_err(req, -rc);
        }
    }
    fi->fh = reinterpret_cast<uint64_t>(new Handle{fd, (fi->flags & (O_SYNC | O_DSYNC)) != 0, in});
    fi->keep_cache = 1;
    if (e)
        fuse_reply_create(req, e, fi);
    else
        fuse_reply_open(req, fi);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    Inode* in = I(ino);
    GATE(req, (fi->flags & O_TRUNC) ? (kOpen | kWrite) : kOpen, in);
    int fd = open(proc_path(in->fd).c_str(), backing_flags(fi->flags));
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    opened(req, in, fd, fi, nullptr);
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
               fuse_file_info* fi) {
    Inode* p = I(parent);
    GATE(req, kOpen | kNames | kWrite, p, name);
    int fd;
    {
        std::lock_guard<std::mutex> g(L.names_mu);
        fd = openat(p->fd, name, backing_flags(fi->flags) | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
        if (fd >= 0) {
            L.names->created(dir_of(p), name, false);
        } else if (errno == EEXIST && !(fi->flags & O_EXCL)) {
            fd = openat(p->fd, name, backing_flags(fi->flags) | O_NOFOLLOW);
        }
        if (fd < 0) return (void)fuse_reply_err(req, errno);
    }
    fuse_entry_param e;
    if (int rc = do_lookup(p, name, &e)) {
        close(fd);
        return (void)fuse_reply_err(req, -rc);
    }
    opened(req, reinterpret_cast<Inode*>(e.ino), fd, fi, &e);
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
    GATE(req, kRead, I(ino));
    fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
    buf.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = H(fi)->fd;
    buf.buf[0].pos = off;
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

void op_write_buf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in_buf, off_t off,
                  fuse_file_info* fi) {
    Inode* in = I(ino);
    GATE(req, kWrite, in);
    Handle* h = H(fi);
    size_t size = fuse_buf_size(in_buf);
    fuse_bufvec out = FUSE_BUFVEC_INIT(size);
    out.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    out.buf[0].fd = h->fd;
    out.buf[0].pos = off;
    Tracked& t = tracked(in->key);
    ssize_t res;
    {
        std::lock_guard<std::mutex> g(t.mu);
        if (int rc = activate(t, h->fd, in->fd)) return (void)fuse_reply_err(req, -rc);
        if (int rc = t.state->save(h->fd, off, size)) return (void)fuse_reply_err(req, -rc);
        res = fuse_buf_copy(&out, in_buf, FUSE_BUF_NO_SPLICE);
        if (res > 0) t.state->wrote(off, res);
    }
    if (res < 0) return (void)fuse_reply_err(req, -res);
    L.count.writes++;
    L.count.bytes_written += res;
    if (h->sync) {
        commit_tracked(in->key);
        std::lock_guard<std::mutex> g(L.names_mu);
        L.names->synced_file();
        forget_released();
    }
    fuse_reply_write(req, res);
}

void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    Handle* h = H(fi);
    close(h->fd);
    delete h;
    fuse_reply_err(req, 0);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
    Inode* in = I(ino);
    GATE(req, kFsync, in);
    Handle* h = H(fi);
    if ((datasync ? fdatasync(h->fd) : fsync(h->fd)) < 0) return (void)fuse_reply_err(req, errno);
    L.count.fsyncs++;
    int rc = commit_tracked(in->key);
    {
        std::lock_guard<std::mutex> g(L.names_mu);
        L.names->synced_file();
        forget_released();
    }
    fuse_reply_err(req, -rc);
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    GATE(req, kOpen, I(ino));
    int fd = openat(I(ino)->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return (void)fuse_reply_err(req, errno);
    DIR* dp = fdopendir(fd);
    if (!dp) {
        int e = errno;
        close(fd);
        return (void)fuse_reply_err(req, e);
    }
    fi->fh = reinterpret_cast<uint64_t>(new DirHandle{dp, 0, nullptr});
    fuse_reply_open(req, fi);
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
    GATE(req, kRead, I(ino));
    DirHandle* d = reinterpret_cast<DirHandle*>(fi->fh);
    std::vector<char> buf(size);
    if (off != d->offset) {
        seekdir(d->dp, off);
        d->entry = nullptr;
        d->offset = off;
    }
    size_t used = 0;
    for (;;) {
        if (!d->entry) {
            errno = 0;
            d->entry = readdir(d->dp);
            if (!d->entry) {
                if (errno && !used) return (void)fuse_reply_err(req, errno);
                break;
            }
        }
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = d->entry->d_ino;
        st.st_mode = d->entry->d_type << 12;
        off_t next = d->entry->d_off;
        size_t n = fuse_add_direntry(req, buf.data() + used, size - used, d->entry->d_name, &st,
                                     next);
        if (n > size - used) break;
        used += n;
        d->entry = nullptr;
        d->offset = next;
    }
    fuse_reply_buf(req, buf.data(), used);
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    DirHandle* d = reinterpret_cast<DirHandle*>(fi->fh);
    closedir(d->dp);
    delete d;
    fuse_reply_err(req, 0);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi) {
    Inode* in = I(ino);
    GATE(req, kFsync, in);
    int fd = dirfd(reinterpret_cast<DirHandle*>(fi->fh)->dp);
    if ((datasync ? fdatasync(fd) : fsync(fd)) < 0) return (void)fuse_reply_err(req, errno);
    L.count.fsyncdirs++;
    std::lock_guard<std::mutex> g(L.names_mu);
    L.names->synced_dir(in->key);
    forget_released();
    fuse_reply_err(req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t ino) {
    GATE(req, kMeta, I(ino));
    struct statvfs sv;
    if (fstatvfs(I(ino)->fd, &sv) < 0) return (void)fuse_reply_err(req, errno);
    fuse_reply_statfs(req, &sv);
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                  fuse_file_info* fi) {
    Inode* in = I(ino);
    GATE(req, kWrite, in);
    Handle* h = H(fi);
    Tracked& t = tracked(in->key);
    std::lock_guard<std::mutex> g(t.mu);
    if (int rc = activate(t, h->fd, in->fd)) return (void)fuse_reply_err(req, -rc);
    // Punching and zeroing change [off, off + len); collapsing and inserting move everything
    // after `off`; plain allocation changes no byte a read sees, only perhaps the length.
    bool shifts = mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE);
    bool changes = shifts || (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE));
    off_t durable = t.state->durable_size();
    if (changes) {
        off_t span = shifts ? (durable > off ? durable - off : 0) : len;
        if (int rc = t.state->save(h->fd, off, span)) return (void)fuse_reply_err(req, -rc);
    }
    if (fallocate(h->fd, mode, off, len) < 0) return (void)fuse_reply_err(req, errno);
    struct stat st;
    if (fstat(h->fd, &st) < 0) return (void)fuse_reply_err(req, errno);
    if (changes) t.state->wrote(off, shifts ? (st.st_size > off ? st.st_size - off : 0) : len);
    t.state->resized(st.st_size);
    fuse_reply_err(req, 0);
}

}  // namespace

std::string proc_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

std::string rel_path(int fd) {
    char buf[PATH_MAX + 1];
    ssize_t n = readlink(proc_path(fd).c_str(), buf, PATH_MAX);
    if (n < 0) return "?";
    std::string p(buf, n);
    if (p == L.root_path) return "";
    if (p.compare(0, L.root_path.size() + 1, L.root_path + "/") == 0)
        return p.substr(L.root_path.size() + 1);
    if (p.compare(0, L.trash_path.size() + 1, L.trash_path + "/") == 0)
        return ".trash/" + p.substr(L.trash_path.size() + 1);
    return p;
}

Tracked& tracked(const Key& k) {
    std::lock_guard<std::mutex> g(L.track_mu);
    auto& slot = L.tracked[k];
    if (!slot) slot = std::make_unique<Tracked>();
    return *slot;
}

int activate(Tracked& t, int fd, int opath_src) {
    if (t.state) return 0;
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    int o = fcntl(opath_src, F_DUPFD_CLOEXEC, 0);
    if (o < 0) return -errno;
    t.opath = o;
    t.state = std::make_unique<FileState>(st.st_size);
    t.since = std::chrono::steady_clock::now();
    return 0;
}

void invalidate(const Key& k) {
    fuse_ino_t ino = 0;
    {
        std::lock_guard<std::mutex> g(L.inode_mu);
        auto it = L.inodes.find(k);
        if (it != L.inodes.end()) ino = reinterpret_cast<fuse_ino_t>(it->second);
    }
    if (k == L.root.key) ino = FUSE_ROOT_ID;
    if (ino && L.se) fuse_lowlevel_notify_inval_inode(L.se, ino, 0, 0);
}

const fuse_lowlevel_ops kOps = [] {
    fuse_lowlevel_ops o;
    memset(&o, 0, sizeof o);
    o.init = op_init;
    o.lookup = op_lookup;
    o.forget = op_forget;
    o.forget_multi = op_forget_multi;
    o.getattr = op_getattr;
    o.setattr = op_setattr;
    o.readlink = op_readlink;
    o.mknod = op_mknod;
    o.mkdir = op_mkdir;
    o.symlink = op_symlink;
    o.link = op_link;
    o.unlink = op_unlink;
    o.rmdir = op_rmdir;
    o.rename = op_rename;
    o.open = op_open;
    o.create = op_create;
    o.read = op_read;
    o.write_buf = op_write_buf;
    o.flush = op_flush;
    o.release = op_release;
    o.fsync = op_fsync;
    o.opendir = op_opendir;
    o.readdir = op_readdir;
    o.releasedir = op_releasedir;
    o.fsyncdir = op_fsyncdir;
    o.statfs = op_statfs;
    o.fallocate = op_fallocate;
    return o;
}();

}  // namespace kd
