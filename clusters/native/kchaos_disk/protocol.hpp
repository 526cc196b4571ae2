// The control protocol: one command line in, one JSON line out. Parsing and the JSON writer
// are pure (selftest.cpp checks them); control.cpp carries commands out.
//
//   ping | status | drop | commit | heal
//   fail CLASS[,CLASS...] ERRNO [PATH-PREFIX]
//   corrupt flip PATH OFFSET MASK | corrupt zero PATH OFFSET LENGTH | corrupt truncate PATH SIZE
//   snapshot PATH NAME | rollback PATH NAME
//
// PATH is relative to the mount's root (no "..", no leading "/").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kd {

// Operation classes a `fail` rule names.
enum OpClass : unsigned {
    kRead = 1,    // read, readdir, readlink
    kWrite = 2,   // write, fallocate, truncate, and making names (what a full disk refuses)
    kFsync = 4,   // fsync, fsyncdir
    kOpen = 8,    // open, opendir, create
    kNames = 16,  // create, mknod, mkdir, symlink, link, unlink, rmdir, rename
    kMeta = 32,   // lookup, getattr, setattr, statfs
    kAll = 63,
};

struct FailRule {
    unsigned classes = 0;
    int err = 0;
    std::string prefix;  // "" : every path
};

unsigned class_of(const std::string& name);  // 0: unknown
std::string class_names(unsigned classes);   // "write,fsync"
int errno_of(const std::string& name);       // 0: unknown (names as ENOSPC, or numbers)
std::string errno_name(int err);

struct Command {
    std::string verb;  // ping status drop commit heal fail flip zero truncate snapshot rollback
    FailRule rule;
    std::string path, name;
    uint64_t offset = 0, length = 0;
    unsigned mask = 0;
};

// "" and `out` filled, or the error in one sentence.
std::string parse(const std::string& line, Command& out);
// "" or why `path` cannot name a file under the root.
std::string check_path(const std::string& path);

// A JSON object written in order; keys and strings escaped.
class Json {
  public:
    Json& begin();                    // {
    Json& end();                      // }
    Json& begin_list(const char* key);  // "key":[
    Json& end_list();                 // ]
    Json& key(const char* k);
    Json& str(const char* k, const std::string& v);
    Json& num(const char* k, int64_t v);
    Json& unum(const char* k, uint64_t v);
    Json& boolean(const char* k, bool v);
    Json& item_begin();               // { inside a list
    Json& item_str(const std::string& v);  // a string inside a list
    const std::string& text() const { return s_; }

  private:
    void sep();
    void quoted(const std::string& v);
    std::string s_;
    bool first_ = true;
};

std::string error_line(const std::string& why);

}  // namespace kd
