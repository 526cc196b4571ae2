// Checks of the layer's pure parts and of its bookkeeping over plain files in a temporary
// directory (no mount): tests/unit/clusters/test_disk_layer.py builds and runs it.
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "file_state.hpp"
#include "kafka_batches.hpp"
#include "names.hpp"
#include "protocol.hpp"
#include "ranges.hpp"

using namespace kd;

namespace {

int failures = 0, checks = 0;

#define CHECK(cond)                                                      \
    do {                                                                 \
        checks++;                                                        \
        if (!(cond)) {                                                   \
            failures++;                                                  \
            fprintf(stderr, "selftest.cpp:%d: failed: %s\n", __LINE__, #cond); \
        }                                                                \
    } while (0)

std::string read_all(int dir, const char* name) {
    int fd = openat(dir, name, O_RDONLY);
    if (fd < 0) return "<missing>";
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, n);
    close(fd);
    return out;
}

void write_at(int fd, const std::string& s, off_t off) {
    if (pwrite(fd, s.data(), s.size(), off) != static_cast<ssize_t>(s.size())) abort();
}

bool exists(int dir, const char* name) {
    struct stat st;
    return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

void ranges() {
    RangeSet r;
    r.add(10, 20);
    r.add(30, 40);
    r.add(15, 32);
    CHECK(r.ranges().size() == 1 && r.total() == 30);
    r.add(0, 5);
    CHECK(r.gaps(0, 50) == (std::vector<Range>{{5, 10}, {40, 50}}));
    CHECK(r.gaps(12, 38).empty());
    CHECK(r.covers(0) && !r.covers(5) && r.covers(39) && !r.covers(40));
    r.clip(35);
    CHECK(r.total() == 5 + 25);
    r.add(5, 10);
    CHECK(r.ranges().size() == 1 && r.total() == 35);
}

void file_state(int dir) {
    // Durable "0123456789"; then an overwrite, an append, a cut and a restore.
    int fd = openat(dir, "f", O_RDWR | O_CREAT | O_TRUNC, 0644);
    write_at(fd, "0123456789", 0);
    FileState s(10);
    CHECK(!s.pending(10));
    CHECK(s.save(fd, 2, 3) == 0);
    write_at(fd, "abc", 2);
    s.wrote(2, 3);
    CHECK(s.save(fd, 10, 4) == 0);  // past the durable image: nothing to keep
    write_at(fd, "WXYZ", 10);
    s.wrote(10, 4);
    CHECK(s.pending(14) && s.pending_bytes(14) == 3 + 4 && s.written_bytes() == 7);
    CHECK(s.held_bytes() == 3);
    // Cut to 6: bytes 6..9 of the durable image are kept (6..9 were never saved).
    CHECK(s.save(fd, 6, s.durable_size() - 6) == 0);
    CHECK(ftruncate(fd, 6) == 0);
    s.resized(6);
    CHECK(s.pending_bytes(6) == 3 + 4);
    CHECK(s.restore(fd) == 0);
    CHECK(read_all(dir, "f") == "0123456789");
    CHECK(!s.pending(10));
    // fsync: what is there is durable.
    CHECK(s.save(fd, 0, 1) == 0);
    write_at(fd, "X", 0);
    s.wrote(0, 1);
    s.commit(10);
    CHECK(s.restore(fd) == 0);
    CHECK(read_all(dir, "f") == "X123456789");
    // Corruption reaches the durable image under a pending overwrite.
    CHECK(s.save(fd, 1, 1) == 0);
    write_at(fd, "Q", 1);
    s.overwrite_durable(1, std::string(1, '1' ^ 0x01));
    CHECK(s.restore(fd) == 0);
    CHECK(read_all(dir, "f") == "X023456789");
    CHECK(s.save(fd, 2, 1) == 0);
    write_at(fd, "Q", 2);
    s.flip_durable(2, 0x01);  // under a pending overwrite: the saved byte flips
    s.flip_durable(3, 0x01);  // not overwritten: the durable byte is the file's, left alone
    CHECK(s.restore(fd) == 0);
    CHECK(read_all(dir, "f") == "X033456789");
    s.cut_durable(4);
    CHECK(s.restore(fd) == 0);
    CHECK(read_all(dir, "f") == "X033");
    close(fd);

    // A zero-filled durable region is kept as its length only.
    fd = openat(dir, "z", O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(ftruncate(fd, 1 << 20) == 0);
    FileState z(1 << 20);
    CHECK(z.save(fd, 0, 1 << 20) == 0);
    CHECK(z.held_bytes() == 0);
    CHECK(ftruncate(fd, 0) == 0);
    z.resized(0);
    CHECK(z.restore(fd) == 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == (1 << 20));
    close(fd);
}

Dir dir_of(int fd, const char* path) {
    struct stat st;
    fstat(fd, &st);
    return Dir{fd, Key{st.st_dev, st.st_ino}, path};
}

void names(int root) {
    mkdirat(root, "trash", 0755);
    mkdirat(root, "d", 0755);
    mkdirat(root, "e", 0755);
    int trash = openat(root, "trash", O_RDONLY | O_DIRECTORY);
    int dfd = openat(root, "d", O_RDONLY | O_DIRECTORY);
    int efd = openat(root, "e", O_RDONLY | O_DIRECTORY);
    Dir d = dir_of(dfd, "d"), e = dir_of(efd, "e");
    close(openat(dfd, "old", O_CREAT | O_WRONLY, 0644));
    int fd = openat(dfd, "victim", O_CREAT | O_WRONLY, 0644);
    write_at(fd, "kept", 0);
    close(fd);
    fd = openat(efd, "target", O_CREAT | O_WRONLY, 0644);
    write_at(fd, "replaced", 0);
    close(fd);

    NameJournal j(trash, true);
    close(openat(dfd, "new", O_CREAT | O_WRONLY, 0644));
    j.created(d, "new", false);
    CHECK(j.unlink(d, "victim") == 0);
    CHECK(!exists(dfd, "victim"));
    CHECK(j.rename(d, "old", e, "target", 0) == 0);
    CHECK(read_all(efd, "target").empty());
    mkdirat(dfd, "sub", 0700);
    j.created(d, "sub", true);
    close(openat(dfd, "sub/inner", O_CREAT | O_WRONLY, 0644));
    CHECK(j.rename(d, "missing", e, "x", 0) == -ENOENT);
    CHECK(j.size() == 4);

    // Strict: the rename waits for both directories.
    j.synced_dir(e.key);
    CHECK(j.size() == 4);
    std::vector<Undone> u = j.undo_all();
    CHECK(u.size() == 4 && u[0].op == "mkdir" && u[3].op == "create");
    for (const auto& x : u) CHECK(x.error == 0);
    CHECK(!exists(dfd, "new") && !exists(dfd, "sub"));
    CHECK(read_all(dfd, "victim") == "kept");
    CHECK(exists(dfd, "old"));
    CHECK(read_all(efd, "target") == "replaced");
    CHECK(j.size() == 0);
    CHECK(j.take_released().empty());  // everything came back

    // A durable unlink empties the trash; a durable rename forgets the file it replaced.
    CHECK(j.unlink(d, "victim") == 0);
    CHECK(j.rename(d, "old", e, "target", 0) == 0);
    j.synced_dir(d.key);
    CHECK(j.size() == 1);  // the rename still waits for e
    j.synced_dir(e.key);
    CHECK(j.size() == 0);
    CHECK(j.take_released().size() == 2);  // the victim and the file the rename replaced
    CHECK(j.undo_all().empty());
    CHECK(!exists(dfd, "victim") && !exists(dfd, "old") && exists(efd, "target"));
    {
        int n = 0;
        DIR* dp = fdopendir(dup(trash));
        while (dirent* de = readdir(dp)) n += de->d_name[0] != '.';
        closedir(dp);
        CHECK(n == 0);
    }

    // The periodic writeback commits what was made before its deadline, oldest first.
    NameJournal w(trash, true);
    close(openat(dfd, "w1", O_CREAT | O_WRONLY, 0644));
    w.created(d, "w1", false);
    auto between = std::chrono::steady_clock::now();
    close(openat(dfd, "w2", O_CREAT | O_WRONLY, 0644));
    w.created(d, "w2", false);
    CHECK(w.commit_before(between) == 1 && w.size() == 1);
    u = w.undo_all();
    CHECK(u.size() == 1 && u[0].path == "d/w2" && exists(dfd, "w1") && !exists(dfd, "w2"));

    // Journal mode: any file's fsync commits every name.
    NameJournal k(trash, false);
    close(openat(dfd, "j", O_CREAT | O_WRONLY, 0644));
    k.created(d, "j", false);
    k.synced_file();
    CHECK(k.size() == 0);
    close(trash);
    close(dfd);
    close(efd);
}

void protocol() {
    Command c;
    CHECK(parse("status", c).empty() && c.verb == "status");
    CHECK(parse("  drop  ", c).empty() && c.verb == "drop");
    CHECK(!parse("drop now", c).empty());
    CHECK(!parse("", c).empty());
    CHECK(parse("fail write,fsync ENOSPC data/t-0", c).empty() && c.verb == "fail" &&
          c.rule.classes == (kWrite | kFsync) && c.rule.err == ENOSPC && c.rule.prefix == "data/t-0");
    CHECK(parse("fail all 5", c).empty() && c.rule.classes == kAll && c.rule.err == EIO);
    CHECK(parse("fail nothing EIO", c).find("unknown class 'nothing'") == 0);
    CHECK(parse("fail write EWHAT", c).find("unknown errno") == 0);
    CHECK(!parse("fail write EIO ../x", c).empty());
    CHECK(!parse("fail write EIO /abs", c).empty());
    CHECK(parse("corrupt flip data/a.log 12 128", c).empty() && c.verb == "flip" &&
          c.path == "data/a.log" && c.offset == 12 && c.mask == 128);
    CHECK(!parse("corrupt flip data/a.log 12 0", c).empty());
    CHECK(!parse("corrupt flip data/a.log 12 256", c).empty());
    CHECK(!parse("corrupt flip data/a.log -1 1", c).empty());
    CHECK(!parse("corrupt flip data/a.log 99999999999999999999999 1", c).empty());
    CHECK(parse("corrupt zero a 0 10", c).empty() && c.verb == "zero" && c.length == 10);
    CHECK(parse("corrupt truncate a 0", c).empty() && c.verb == "truncate" && c.offset == 0);
    CHECK(!parse("corrupt melt a 0", c).empty());
    CHECK(parse("snapshot data/x before-1", c).empty() && c.name == "before-1");
    CHECK(!parse("rollback data/x ../y", c).empty());
    CHECK(parse("explode", c).find("unknown command 'explode'") == 0);
    CHECK(class_names(kWrite | kRead) == "read,write" && class_names(kAll) == "all");
    CHECK(errno_name(ENOSPC) == "ENOSPC" && errno_name(999) == "999");

    Json j;
    j.begin().boolean("ok", true).str("s", "a\"b\\c\n\x01").num("n", -3);
    j.begin_list("l").item_begin().num("x", 1).end().item_begin().end().end_list();
    j.begin_list("w").item_str("p").item_str("q").end_list().end();
    CHECK(j.text() ==
          "{\"ok\":true,\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"n\":-3,\"l\":[{\"x\":1},{}],"
          "\"w\":[\"p\",\"q\"]}");
    CHECK(error_line("no") == "{\"ok\":false,\"error\":\"no\"}");
}

// A v2 batch header of `length` bytes after its first 12 (the rest zeros): offsets base to
// base + delta.
std::string batch(int64_t base, int32_t delta, int32_t length, int magic = 2) {
    std::string b(12 + length, '\0');
    auto put = [&b](size_t at, uint64_t v, int bytes) {
        for (int i = 0; i < bytes; i++) b[at + i] = static_cast<char>(v >> (8 * (bytes - 1 - i)));
    };
    put(0, static_cast<uint64_t>(base), 8);
    put(8, static_cast<uint32_t>(length), 4);
    if (length >= 5) b[16] = static_cast<char>(magic);
    if (length >= 15) put(23, static_cast<uint32_t>(delta), 4);
    return b;
}

LostBatches walk(const std::string& seg, uint64_t from, uint64_t size = UINT64_MAX) {
    return lost_batches(
        [&seg](void* buf, size_t n, uint64_t pos) -> ssize_t {
            if (pos >= seg.size()) return 0;
            size_t k = std::min<size_t>(n, seg.size() - pos);
            memcpy(buf, seg.data() + pos, k);
            return static_cast<ssize_t>(k);
        },
        size == UINT64_MAX ? seg.size() : size, from);
}

void kafka_batches() {
    std::string seg = batch(0, 2, 61) + batch(3, 0, 49) + batch(4, 9, 200);  // 73, 61, 212 bytes
    LostBatches all = walk(seg, 0);
    CHECK(all.batches == 3 && all.lost == 3 && all.first == 0 && all.last == 13 &&
          all.error.empty());
    LostBatches none = walk(seg, seg.size());
    CHECK(none.batches == 3 && none.lost == 0 && none.first == -1 && none.end == seg.size());
    LostBatches cut = walk(seg, 73 + 10);  // the second batch is cut: lost whole
    CHECK(cut.lost == 2 && cut.first == 3 && cut.last == 13);
    LostBatches edge = walk(seg, 73 + 61);  // the durable length ends a batch
    CHECK(edge.lost == 1 && edge.first == 4 && edge.last == 13);
    // A write cut short: the last batch runs past the file, its header whole or not.
    LostBatches torn = walk(seg.substr(0, 73 + 30), 73);
    CHECK(torn.batches == 2 && torn.first == 3 && torn.last == 3 && torn.end == 73 + 30);
    LostBatches short_header = walk(seg.substr(0, 73 + 20), 0);
    CHECK(short_header.batches == 2 && short_header.last == 3 && short_header.error.empty());
    CHECK(walk(seg.substr(0, 73 + 5), 0).error.find("a header cut short at byte 73") == 0);
    // Zeros where a header should be (a preallocated tail) stop the walk, said.
    LostBatches zeros = walk(seg + std::string(100, '\0'), 0);
    CHECK(zeros.batches == 3 && zeros.lost == 3 && zeros.end == seg.size() &&
          zeros.error.find("no batch header at byte 346") == 0);
    CHECK(walk(batch(0, 0, 61, 3), 0).error.find("magic 3") != std::string::npos);
    CHECK(walk(batch(-5, 0, 61), 0).error.find("offset -5") != std::string::npos);
    // Older message sets: the entry's offset is its last.
    LostBatches v1 = walk(batch(7, 99, 40, 1) + batch(8, 99, 40, 1), 0);
    CHECK(v1.first == 7 && v1.last == 8 && v1.error.empty());
    // Batches larger than the walk's read-ahead.
    std::string big = batch(100, 50, 200000) + batch(151, 1, 100000);
    LostBatches b = walk(big, 200012);
    CHECK(b.batches == 2 && b.lost == 1 && b.first == 151 && b.last == 152);
    CHECK(walk("", 0).batches == 0 && walk("", 0).error.empty());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: selftest EMPTY-DIRECTORY\n");
        return 2;
    }
    int root = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (root < 0) {
        perror(argv[1]);
        return 2;
    }
    ranges();
    file_state(root);
    names(root);
    protocol();
    kafka_batches();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
