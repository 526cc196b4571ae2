// kchaos-disk: a FUSE layer over a node's data directory that remembers what no fsync has made
// durable, so that a power loss can be played (docs/disk.md).
//
//   kchaos-disk mount --state DIR --control SOCKET [--names journal|strict] [--writeback S]
//                     [--foreground] MOUNTPOINT
//   kchaos-disk ctl [--control SOCKET] COMMAND [ARGS...]
//   kchaos-disk batches [--root DIR] PATH FROM [PATH FROM ...]
//
// `mount` serves MOUNTPOINT from DIR/root (DIR/trash keeps unlinked files until an unlink is
// durable, DIR/snapshots the copies `snapshot` takes) and returns once it is mounted, the layer
// running in the background. `ctl` sends one command to the layer's control socket and prints
// its one-line JSON answer; it exits 0 when the answer says ok, 1 when it does not, 2 when no
// layer answers. `batches` reads Kafka segment files (kafka_batches.hpp), under DIR when given (a
// layer's backing directory: no FUSE round trip, and there while the JVM is stopped), and
// prints, in one JSON line, each file's record batches that end past FROM bytes: how many, and
// their first and last offsets.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "kafka_batches.hpp"
#include "layer.hpp"

using namespace kd;

namespace {

const char* kDefaultSocket = "/run/kchaos-disk.sock";

[[noreturn]] void die(const std::string& why, int code = 2) {
    fprintf(stderr, "kchaos-disk: %s\n", why.c_str());
    exit(code);
}

void usage() {
    die("usage: kchaos-disk mount --state DIR --control SOCKET [--names journal|strict] "
        "[--writeback SECONDS] [--foreground] MOUNTPOINT | kchaos-disk ctl [--control SOCKET] "
        "COMMAND [ARGS...] | kchaos-disk batches [--root DIR] PATH FROM [PATH FROM ...]");
}

int mkdir_p(const std::string& path) {
    std::string at;
    for (size_t i = 1; i <= path.size(); i++) {
        if (i == path.size() || path[i] == '/') {
            at = path.substr(0, i);
            if (mkdir(at.c_str(), 0755) < 0 && errno != EEXIST) return -errno;
        }
    }
    return 0;
}

sockaddr_un socket_address(const std::string& path) {
    sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) die("control socket path too long: " + path);
    memcpy(a.sun_path, path.c_str(), path.size());
    return a;
}

void serve(int listener) {
    for (;;) {
        int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return;
        }
        std::string line;
        char buf[4096];
        while (line.find('\n') == std::string::npos && line.size() < 8192) {
            ssize_t n = read(c, buf, sizeof buf);
            if (n <= 0) break;
            line.append(buf, n);
        }
        line = line.substr(0, line.find('\n'));
        std::string answer = handle_command(line) + "\n";
        const char* p = answer.data();
        size_t left = answer.size();
        while (left) {
            ssize_t w = write(c, p, left);
            if (w <= 0) break;
            p += w;
            left -= w;
        }
        close(c);
    }
}

int do_mount(int argc, char** argv) {
    std::string state, control = kDefaultSocket, names = "journal", mountpoint, writeback = "0";
    bool foreground = false;
    for (int i = 0; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) usage();
            return argv[++i];
        };
        if (a == "--state")
            state = next();
        else if (a == "--control")
            control = next();
        else if (a == "--names")
            names = next();
        else if (a == "--writeback")
            writeback = next();
        else if (a == "--foreground")
            foreground = true;
        else if (!a.empty() && a[0] != '-' && mountpoint.empty())
            mountpoint = a;
        else
            usage();
    }
    if (state.empty() || mountpoint.empty()) usage();
    if (names != "journal" && names != "strict") die("--names is journal or strict");
    {
        char* end = nullptr;
        L.writeback_s = strtod(writeback.c_str(), &end);
        if (writeback.empty() || *end || !(L.writeback_s >= 0) || L.writeback_s > 86400)
            die("--writeback is seconds, 0 (never) to 86400");
    }
    for (const char* sub : {"/root", "/trash", "/snapshots"}) {
        if (int rc = mkdir_p(state + sub)) die(state + sub + ": " + strerror(-rc));
    }
    if (int rc = mkdir_p(mountpoint)) die(mountpoint + ": " + strerror(-rc));
    char real[PATH_MAX];
    if (!realpath((state + "/root").c_str(), real)) die(state + "/root: " + strerror(errno));
    L.root_path = real;
    if (!realpath((state + "/trash").c_str(), real)) die(state + "/trash: " + strerror(errno));
    L.trash_path = real;
    L.mountpoint = mountpoint;
    // A mountpoint with files in it would hide them: they belong in the backing directory.
    {
        int fd = open(mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) die(mountpoint + ": " + strerror(errno));
        DIR* dp = fdopendir(fd);
        while (dirent* de = readdir(dp)) {
            std::string n = de->d_name;
            if (n != "." && n != "..")
                die(mountpoint + " is not empty (" + n + "): the layer would hide what is in it");
        }
        closedir(dp);
    }
    L.root_fd = open(L.root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    L.trash_fd = open(L.trash_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    L.snap_fd = open((state + "/snapshots").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (L.root_fd < 0 || L.trash_fd < 0 || L.snap_fd < 0) die(state + ": " + strerror(errno));
    // Whatever the trash holds is from the layer's last life: unlinks that stayed (the process
    // was killed, not powered off) or a drop's leftovers. Either way no name reaches it.
    {
        DIR* dp = fdopendir(dup(L.trash_fd));
        while (dirent* de = readdir(dp)) {
            std::string n = de->d_name;
            if (n != "." && n != "..") remove_tree(L.trash_fd, n);
        }
        closedir(dp);
    }
    struct stat st;
    if (fstat(L.root_fd, &st) < 0) die(L.root_path + ": " + strerror(errno));
    L.root.fd = L.root_fd;
    L.root.key = Key{st.st_dev, st.st_ino};
    L.root.nlookup = 1;
    L.names = std::make_unique<NameJournal>(L.trash_fd, names == "strict");
    // Every file with something pending keeps a descriptor: allow as many as the system does.
    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = socket_address(control);
    unlink(control.c_str());
    if (int rc = mkdir_p(control.substr(0, control.rfind('/'))); rc && control.rfind('/') > 0)
        die(control + ": " + strerror(-rc));
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 ||
        listen(listener, 16) < 0)
        die("control socket " + control + ": " + strerror(errno));

    std::vector<std::string> words = {"kchaos-disk", "-o",
                                      "fsname=kchaos-disk,subtype=kchaos-disk,allow_other"};
    std::vector<char*> fargv;
    for (auto& w : words) fargv.push_back(w.data());
    fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fargv.size()), fargv.data());
    L.se = fuse_session_new(&args, &kOps, sizeof kOps, nullptr);
    if (!L.se) die("cannot start a FUSE session");
    if (fuse_set_signal_handlers(L.se) != 0) die("cannot install signal handlers");
    if (fuse_session_mount(L.se, mountpoint.c_str()) != 0)
        die("cannot mount on " + mountpoint + " (is /dev/fuse there, with CAP_SYS_ADMIN?)");
    // The parent returns once the child runs: the mount and the socket are in place then.
    if (fuse_daemonize(foreground ? 1 : 0) != 0) die("cannot go to the background");
    std::thread(serve, listener).detach();
    if (L.writeback_s > 0) std::thread(writeback_loop).detach();
    fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(cfg, 16);
    int rc = fuse_session_loop_mt(L.se, cfg);
    fuse_loop_cfg_destroy(cfg);
    fuse_session_unmount(L.se);
    fuse_remove_signal_handlers(L.se);
    fuse_session_destroy(L.se);
    return rc ? 1 : 0;
}

int do_ctl(int argc, char** argv) {
    std::string control = kDefaultSocket, line;
    int i = 0;
    if (argc >= 2 && std::string(argv[0]) == "--control") {
        control = argv[1];
        i = 2;
    }
    if (i >= argc) usage();
    for (; i < argc; i++) {
        if (!line.empty()) line += " ";
        line += argv[i];
    }
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = socket_address(control);
    if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
        printf("%s\n", error_line("no disk layer answers on " + control + ": " + strerror(errno))
                           .c_str());
        return 2;
    }
    line += "\n";
    if (write(s, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        printf("%s\n", error_line(std::string("cannot send: ") + strerror(errno)).c_str());
        return 2;
    }
    std::string answer;
    char buf[65536];
    ssize_t n;
    while ((n = read(s, buf, sizeof buf)) > 0) answer.append(buf, n);
    close(s);
    if (answer.empty()) {
        printf("%s\n", error_line("the disk layer closed without answering").c_str());
        return 2;
    }
    fputs(answer.c_str(), stdout);
    return answer.rfind("{\"ok\":true", 0) == 0 ? 0 : 1;
}

int do_batches(int argc, char** argv) {
    std::string root;
    int i = 0;
    if (argc >= 2 && std::string(argv[0]) == "--root") {
        root = std::string(argv[1]) + "/";
        i = 2;
    }
    if (i >= argc || (argc - i) % 2) usage();
    Json j;
    j.begin().boolean("ok", true).begin_list("files");
    for (; i < argc; i += 2) {
        std::string path = argv[i];
        char* end = nullptr;
        errno = 0;
        unsigned long long from = strtoull(argv[i + 1], &end, 10);
        if (!*argv[i + 1] || *end || errno || argv[i + 1][0] == '-') usage();
        j.item_begin().str("path", path).unum("from", from);
        int fd = open((root + path).c_str(), O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            j.str("error", strerror(errno)).end();
            if (fd >= 0) close(fd);
            continue;
        }
        LostBatches lost = lost_batches(
            [fd](void* buf, size_t n, uint64_t pos) -> ssize_t {
                ssize_t r = pread(fd, buf, n, static_cast<off_t>(pos));
                return r < 0 ? -errno : r;
            },
            static_cast<uint64_t>(st.st_size), from);
        close(fd);
        j.num("size", st.st_size).unum("batches", lost.batches).unum("lost", lost.lost);
        if (lost.lost) j.num("first", lost.first).num("last", lost.last);
        if (!lost.error.empty()) j.str("error", lost.error).unum("walked_to", lost.end);
        j.end();
    }
    j.end_list().end();
    printf("%s\n", j.text().c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) usage();
    std::string cmd = argv[1];
    if (cmd == "mount") return do_mount(argc - 2, argv + 2);
    if (cmd == "ctl") return do_ctl(argc - 2, argv + 2);
    if (cmd == "batches") return do_batches(argc - 2, argv + 2);
    usage();
}
