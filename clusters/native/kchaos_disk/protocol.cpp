#include "protocol.hpp"

#include <errno.h>

#include <cctype>
#include <cstdio>
#include <sstream>

namespace kd {

namespace {

struct Named {
    const char* name;
    unsigned value;
};

const Named kClasses[] = {
    {"read", kRead},   {"write", kWrite}, {"fsync", kFsync}, {"open", kOpen},
    {"names", kNames}, {"meta", kMeta},   {"all", kAll},
};

const Named kErrnos[] = {
    {"EIO", EIO},       {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EROFS", EROFS},
    {"EACCES", EACCES}, {"EPERM", EPERM},   {"ENOMEM", ENOMEM}, {"EFBIG", EFBIG},
    {"EAGAIN", EAGAIN}, {"EBUSY", EBUSY},   {"ENOENT", ENOENT}, {"EINTR", EINTR},
};

bool parse_u64(const std::string& s, uint64_t max, uint64_t& out) {
    if (s.empty() || s.size() > 20) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        uint64_t d = c - '0';
        if (v > (max - d) / 10) return false;
        v = v * 10 + d;
    }
    out = v;
    return true;
}

bool good_name(const std::string& s) {
    if (s.empty() || s.size() > 100) return false;
    for (char c : s)
        if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
            return false;
    return s != "." && s != "..";
}

constexpr uint64_t kMaxOffset = (uint64_t{1} << 62);

}  // namespace

unsigned class_of(const std::string& name) {
    for (const auto& c : kClasses)
        if (name == c.name) return c.value;
    return 0;
}

std::string class_names(unsigned classes) {
    if (classes == kAll) return "all";
    std::string out;
    for (const auto& c : kClasses) {
        if (c.value == kAll || !(classes & c.value)) continue;
        if (!out.empty()) out += ",";
        out += c.name;
    }
    return out;
}

int errno_of(const std::string& name) {
    for (const auto& e : kErrnos)
        if (name == e.name) return static_cast<int>(e.value);
    uint64_t n;
    if (parse_u64(name, 4095, n) && n > 0) return static_cast<int>(n);
    return 0;
}

std::string errno_name(int err) {
    for (const auto& e : kErrnos)
        if (static_cast<unsigned>(err) == e.value) return e.name;
    return std::to_string(err);
}

std::string check_path(const std::string& path) {
    if (path.empty()) return "an empty path";
    if (path[0] == '/') return "path '" + path + "' is absolute: give it relative to the mount";
    if (path.size() > 4000) return "path too long";
    std::stringstream parts(path);
    std::string part;
    while (std::getline(parts, part, '/')) {
        if (part.empty() || part == "." || part == "..")
            return "path '" + path + "' has an empty, '.' or '..' part";
    }
    if (path.back() == '/') return "path '" + path + "' ends with '/'";
    return "";
}

std::string parse(const std::string& line, Command& out) {
    std::vector<std::string> w;
    std::stringstream in(line);
    std::string word;
    while (in >> word) w.push_back(word);
    if (w.empty()) return "an empty command";
    out = Command{};
    const std::string& verb = w[0];
    auto want = [&](size_t lo, size_t hi, const char* usage) -> std::string {
        if (w.size() < lo || w.size() > hi) return std::string("usage: ") + usage;
        return "";
    };
    if (verb == "ping" || verb == "status" || verb == "drop" || verb == "commit" ||
        verb == "heal") {
        if (w.size() != 1) return verb + " takes no arguments";
        out.verb = verb;
        return "";
    }
    if (verb == "fail") {
        if (auto e = want(3, 4, "fail CLASS[,CLASS...] ERRNO [PATH-PREFIX]"); !e.empty()) return e;
        std::stringstream classes(w[1]);
        std::string c;
        while (std::getline(classes, c, ',')) {
            unsigned v = class_of(c);
            if (!v) return "unknown class '" + c + "': read, write, fsync, open, names, meta or all";
            out.rule.classes |= v;
        }
        if (!out.rule.classes) return "no class named";
        out.rule.err = errno_of(w[2]);
        if (!out.rule.err) return "unknown errno '" + w[2] + "': a name such as ENOSPC or EIO, or a number";
        if (w.size() == 4) {
            if (auto e = check_path(w[3]); !e.empty()) return e;
            out.rule.prefix = w[3];
        }
        out.verb = verb;
        return "";
    }
    if (verb == "corrupt") {
        if (w.size() < 2) return "usage: corrupt flip|zero|truncate PATH ...";
        const std::string& how = w[1];
        if (how == "flip") {
            if (auto e = want(5, 5, "corrupt flip PATH OFFSET MASK"); !e.empty()) return e;
            uint64_t mask;
            if (!parse_u64(w[4], 255, mask) || mask == 0) return "MASK is 1 to 255 (the bits to flip)";
            out.mask = static_cast<unsigned>(mask);
        } else if (how == "zero") {
            if (auto e = want(5, 5, "corrupt zero PATH OFFSET LENGTH"); !e.empty()) return e;
            if (!parse_u64(w[4], 1 << 30, out.length) || out.length == 0)
                return "LENGTH is 1 to 1073741824 bytes";
        } else if (how == "truncate") {
            if (auto e = want(4, 4, "corrupt truncate PATH SIZE"); !e.empty()) return e;
        } else {
            return "unknown corruption '" + how + "': flip, zero or truncate";
        }
        if (auto e = check_path(w[2]); !e.empty()) return e;
        out.path = w[2];
        if (!parse_u64(w[3], kMaxOffset, out.offset))
            return std::string(how == "truncate" ? "SIZE" : "OFFSET") + " is a byte count";
        out.verb = how;
        return "";
    }
    if (verb == "snapshot" || verb == "rollback") {
        if (w.size() != 3) return "usage: " + verb + " PATH NAME";
        if (auto e = check_path(w[1]); !e.empty()) return e;
        if (!good_name(w[2])) return "NAME is letters, digits, '.', '_' and '-'";
        out.path = w[1];
        out.name = w[2];
        out.verb = verb;
        return "";
    }
    return "unknown command '" + verb +
           "': ping, status, drop, commit, heal, fail, corrupt, snapshot or rollback";
}

Json& Json::begin() {
    sep();
    s_ += "{";
    first_ = true;
    return *this;
}

Json& Json::end() {
    s_ += "}";
    first_ = false;
    return *this;
}

Json& Json::begin_list(const char* k) {
    key(k);
    s_ += "[";
    first_ = true;
    return *this;
}

Json& Json::end_list() {
    s_ += "]";
    first_ = false;
    return *this;
}

Json& Json::item_begin() { return begin(); }

Json& Json::item_str(const std::string& v) {
    sep();
    quoted(v);
    return *this;
}

void Json::sep() {
    if (!first_) s_ += ",";
    first_ = false;
}

void Json::quoted(const std::string& v) {
    s_ += '"';
    for (unsigned char c : v) {
        switch (c) {
            case '"': s_ += "\\\""; break;
            case '\\': s_ += "\\\\"; break;
            case '\n': s_ += "\\n"; break;
            case '\r': s_ += "\\r"; break;
            case '\t': s_ += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof buf, "\\u%04x", c);
                    s_ += buf;
                } else {
                    s_ += static_cast<char>(c);
                }
        }
    }
    s_ += '"';
}

Json& Json::key(const char* k) {
    sep();
    quoted(k);
    s_ += ":";
    first_ = true;  // the value follows without a comma
    return *this;
}

Json& Json::str(const char* k, const std::string& v) {
    key(k);
    quoted(v);
    first_ = false;
    return *this;
}

Json& Json::num(const char* k, int64_t v) {
    key(k);
    s_ += std::to_string(v);
    first_ = false;
    return *this;
}

Json& Json::unum(const char* k, uint64_t v) {
    key(k);
    s_ += std::to_string(v);
    first_ = false;
    return *this;
}

Json& Json::boolean(const char* k, bool v) {
    key(k);
    s_ += v ? "true" : "false";
    first_ = false;
    return *this;
}

std::string error_line(const std::string& why) {
    Json j;
    j.begin().boolean("ok", false).str("error", why).end();
    return j.text();
}

}  // namespace kd
