// The control socket's commands, carried out on the layer's state. Every answer is one JSON
// line: {"ok":true,...} or {"ok":false,"error":"..."}.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "layer.hpp"

namespace kd {

namespace {

struct Pending {
    std::string path;
    off_t size, durable, bytes;
};

// Every file with something pending, under its lock. Files no name reaches any more (nlink 0)
// are left out: nothing of theirs survives either way.
std::vector<std::pair<Key, Tracked*>> pending_files() {
    std::vector<std::pair<Key, Tracked*>> out;
    std::lock_guard<std::mutex> g(L.track_mu);
    for (auto& [k, t] : L.tracked) out.emplace_back(k, t.get());
    return out;
}

void fail_rules(Json& j) {
    std::lock_guard<std::mutex> g(L.fail_mu);
    j.begin_list("failing");
    for (const auto& r : L.fails) {
        j.item_begin()
            .str("classes", class_names(r.classes))
            .str("errno", errno_name(r.err))
            .str("prefix", r.prefix)
            .end();
    }
    j.end_list();
}

std::string status() {
    std::shared_lock<WriterFirstLock> lk(L.power_mu);
    Json j;
    j.begin().boolean("ok", true).boolean("powered", L.powered).str("mount", L.mountpoint);
    off_t total = 0, written = 0;
    uint64_t held = 0;
    size_t files = 0;
    j.begin_list("files");
    for (auto& [k, t] : pending_files()) {
        std::lock_guard<std::mutex> g(t->mu);
        if (!t->state) continue;
        struct stat st;
        if (fstatat(t->opath, "", &st, AT_EMPTY_PATH) < 0 || st.st_nlink == 0) continue;
        if (!t->state->pending(st.st_size)) continue;
        off_t bytes = t->state->pending_bytes(st.st_size);
        total += bytes;
        written += t->state->written_bytes();
        held += t->state->held_bytes();
        files++;
        j.item_begin()
            .str("path", rel_path(t->opath))
            .num("bytes", bytes)
            .num("written", t->state->written_bytes())
            .num("size", st.st_size)
            .num("durable_size", t->state->durable_size())
            .end();
    }
    j.end_list();
    j.unum("pending_files", files)
        .num("pending_bytes", total)
        .num("pending_written", written)
        .unum("undo_bytes", held);
    {
        std::lock_guard<std::mutex> g(L.names_mu);
        j.str("names_mode", L.names->strict() ? "strict" : "journal");
        j.num("writeback_ms", static_cast<int64_t>(L.writeback_s * 1000));
        j.begin_list("names");
        L.names->each([&j](const NameOp& op) {
            j.item_begin().str("op", kind_name(op.kind)).str("path", op.path);
            if (!op.path2.empty()) j.str("to", op.path2);
            j.end();
        });
        j.end_list();
    }
    fail_rules(j);
    j.unum("writes", L.count.writes.load())
        .unum("bytes_written", L.count.bytes_written.load())
        .unum("fsyncs", L.count.fsyncs.load())
        .unum("fsyncdirs", L.count.fsyncdirs.load())
        .unum("failed_ops", L.count.failed.load())
        .unum("written_back", L.count.written_back.load());
    j.end();
    return j.text();
}

std::string drop() {
    std::unique_lock<WriterFirstLock> lk(L.power_mu);
    if (!L.powered) return error_line("the power is already off (a drop happened)");
    // From here on every operation fails with EIO: nothing a process does after the power went
    // out reaches the disk.
    L.powered = false;
    Json j;
    j.begin().boolean("ok", true).boolean("powered", false);
    off_t total = 0, total_written = 0;
    size_t files = 0, errors = 0;
    j.begin_list("files");
    for (auto& [k, t] : pending_files()) {
        std::lock_guard<std::mutex> g(t->mu);
        if (!t->state) continue;
        int fd = open(proc_path(t->opath).c_str(), O_RDWR | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_nlink == 0) {
            if (fd >= 0) close(fd);
            continue;
        }
        if (!t->state->pending(st.st_size)) {
            close(fd);
            continue;
        }
        off_t bytes = t->state->pending_bytes(st.st_size);
        off_t wrote = t->state->written_bytes();
        off_t durable = t->state->durable_size();
        std::string path = rel_path(t->opath);
        int rc = t->state->restore(fd);
        close(fd);
        total += bytes;
        total_written += wrote;
        files++;
        j.item_begin()
            .str("path", path)
            .num("bytes", bytes)
            .num("written", wrote)
            .num("size_before", st.st_size)
            .num("size_after", durable);
        if (rc) {
            errors++;
            j.str("error", strerror(-rc));
        }
        j.end();
        t->state.reset();
        close(t->opath);
        t->opath = -1;
    }
    j.end_list();
    j.unum("dropped_files", files).num("dropped_bytes", total).num("dropped_written", total_written);
    std::vector<Undone> undone;
    {
        std::lock_guard<std::mutex> g(L.names_mu);
        undone = L.names->undo_all();
    }
    j.begin_list("names");
    for (const auto& u : undone) {
        j.item_begin().str("op", u.op).str("path", u.path);
        if (!u.path2.empty()) j.str("to", u.path2);
        if (u.error) {
            errors++;
            j.str("error", strerror(u.error));
        }
        j.end();
    }
    j.end_list();
    j.unum("errors", errors);
    j.end();
    return j.text();
}

std::string commit() {
    std::unique_lock<WriterFirstLock> lk(L.power_mu);
    size_t files = 0;
    for (auto& [k, t] : pending_files()) {
        std::lock_guard<std::mutex> g(t->mu);
        if (!t->state) continue;
        files++;
        t->state.reset();
        close(t->opath);
        t->opath = -1;
    }
    size_t names;
    {
        std::lock_guard<std::mutex> g(L.names_mu);
        names = L.names->size();
        L.names->commit_all();
    }
    Json j;
    j.begin().boolean("ok", true).unum("files", files).unum("names", names).end();
    return j.text();
}

std::string fail(const FailRule& r) {
    {
        std::lock_guard<std::mutex> g(L.fail_mu);
        L.fails.push_back(r);
        L.nfails = static_cast<int>(L.fails.size());
    }
    Json j;
    j.begin().boolean("ok", true);
    fail_rules(j);
    j.end();
    return j.text();
}

std::string heal() {
    size_t n;
    {
        std::lock_guard<std::mutex> g(L.fail_mu);
        n = L.fails.size();
        L.fails.clear();
        L.nfails = 0;
    }
    Json j;
    j.begin().boolean("ok", true).unum("cleared", n).end();
    return j.text();
}

int copy_all(int from, int to) {
    std::vector<char> buf(1 << 20);
    off_t at = 0;
    for (;;) {
        ssize_t n = pread(from, buf.data(), buf.size(), at);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return ftruncate(to, at) < 0 ? -errno : 0;
        if (int rc = pwrite_all(to, buf.data(), n, at)) return rc;
        at += n;
    }
}

// Corruption and rollback change the medium: the file and its durable image alike. Done with
// every operation held off; the kernel's cached pages of the file are dropped afterwards.
std::string on_medium(const Command& c, Key& touched) {
    std::unique_lock<WriterFirstLock> lk(L.power_mu);
    int fd = openat(L.root_fd, c.path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return error_line(c.path + ": " + strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return error_line(c.path + ": not a regular file");
    }
    touched = Key{st.st_dev, st.st_ino};
    Tracked& t = tracked(touched);
    std::lock_guard<std::mutex> g(t.mu);
    Json j;
    j.begin().boolean("ok", true).str("path", c.path);
    std::string err;
    auto fail = [&](const std::string& why) {
        close(fd);
        return error_line(c.path + ": " + why);
    };
    if (c.verb == "flip" || c.verb == "zero") {
        off_t off = static_cast<off_t>(c.offset);
        if (off >= st.st_size)
            return fail("offset " + std::to_string(off) + " is past its end (" +
                        std::to_string(st.st_size) + " bytes)");
        off_t n = c.verb == "flip" ? 1 : std::min<off_t>(c.length, st.st_size - off);
        std::string before(n, '\0');
        if (pread(fd, before.data(), n, off) != n) return fail(strerror(errno));
        std::string after = c.verb == "flip" ? std::string(1, before[0] ^ c.mask)
                                             : std::string(n, '\0');
        if (int rc = pwrite_all(fd, after.data(), n, off)) return fail(strerror(-rc));
        if (t.state && c.verb == "flip") t.state->flip_durable(off, c.mask);
        if (t.state && c.verb == "zero") t.state->overwrite_durable(off, after);
        j.num("offset", off).num("length", n);
        if (c.verb == "flip") {
            j.num("before", static_cast<unsigned char>(before[0]))
                .num("after", static_cast<unsigned char>(after[0]));
        } else {
            j.num("nonzero_before",
                  std::count_if(before.begin(), before.end(), [](char b) { return b != 0; }));
        }
    } else if (c.verb == "truncate") {
        off_t size = static_cast<off_t>(c.offset);
        if (size > st.st_size)
            return fail("truncation only shortens (it is " + std::to_string(st.st_size) +
                        " bytes)");
        if (ftruncate(fd, size) < 0) return fail(strerror(errno));
        if (t.state) {
            t.state->cut_durable(size);
            t.state->resized(size);
        }
        j.num("size_before", st.st_size).num("size_after", size);
    } else if (c.verb == "snapshot") {
        int out = openat(L.snap_fd, c.name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0) return fail(strerror(errno));
        int rc = copy_all(fd, out);
        close(out);
        if (rc) return fail(strerror(-rc));
        j.str("name", c.name).num("size", st.st_size);
    } else if (c.verb == "rollback") {
        int in = openat(L.snap_fd, c.name.c_str(), O_RDONLY | O_CLOEXEC);
        if (in < 0) return fail("no snapshot '" + c.name + "'");
        int rc = copy_all(in, fd);
        struct stat after;
        fstat(in, &after);
        close(in);
        if (rc) return fail(strerror(-rc));
        // What the medium holds now is the old copy, durable as it is.
        if (t.state) {
            t.state.reset();
            close(t.opath);
            t.opath = -1;
        }
        j.str("name", c.name).num("size_before", st.st_size).num("size_after", after.st_size);
    }
    close(fd);
    j.end();
    return j.text();
}

}  // namespace

std::string handle_command(const std::string& line) {
    Command c;
    std::string err = parse(line, c);
    if (!err.empty()) return error_line(err);
    if (c.verb == "ping") {
        Json j;
        j.begin().boolean("ok", true).str("mount", L.mountpoint).end();
        return j.text();
    }
    if (c.verb == "status") return status();
    if (c.verb == "drop") return drop();
    if (c.verb == "commit") return commit();
    if (c.verb == "fail") return fail(c.rule);
    if (c.verb == "heal") return heal();
    Key touched{0, 0};
    std::string answer = on_medium(c, touched);
    if (touched.second) invalidate(touched);
    return answer;
}

}  // namespace kd
