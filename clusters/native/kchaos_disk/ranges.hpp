// Byte ranges [start, end) of one file, kept merged.
#pragma once

#include <sys/types.h>

#include <map>
#include <utility>
#include <vector>

namespace kd {

using Range = std::pair<off_t, off_t>;

class RangeSet {
  public:
    void add(off_t a, off_t b) {
        if (a >= b) return;
        auto it = r_.upper_bound(a);
        if (it != r_.begin()) {
            auto p = std::prev(it);
            if (p->second >= a) {
                a = p->first;
                if (p->second > b) b = p->second;
                it = r_.erase(p);
            }
        }
        while (it != r_.end() && it->first <= b) {
            if (it->second > b) b = it->second;
            it = r_.erase(it);
        }
        r_[a] = b;
    }

    // Forgets everything at or past `size` (the file was cut there).
    void clip(off_t size) {
        auto it = r_.lower_bound(size);
        r_.erase(it, r_.end());
        if (!r_.empty()) {
            auto last = std::prev(r_.end());
            if (last->second > size) last->second = size;
        }
    }

    // The parts of [a, b) that the set does not hold, in order.
    std::vector<Range> gaps(off_t a, off_t b) const {
        std::vector<Range> out;
        if (a >= b) return out;
        auto it = r_.upper_bound(a);
        if (it != r_.begin()) {
            auto p = std::prev(it);
            if (p->second > a) a = p->second;
        }
        for (; it != r_.end() && it->first < b && a < b; ++it) {
            if (it->first > a) out.emplace_back(a, it->first);
            if (it->second > a) a = it->second;
        }
        if (a < b) out.emplace_back(a, b);
        return out;
    }

    bool covers(off_t at) const {
        auto it = r_.upper_bound(at);
        if (it == r_.begin()) return false;
        return std::prev(it)->second > at;
    }

    off_t total() const {
        off_t n = 0;
        for (const auto& [a, b] : r_) n += b - a;
        return n;
    }

    bool empty() const { return r_.empty(); }
    void clear() { r_.clear(); }
    const std::map<off_t, off_t>& ranges() const { return r_; }

  private:
    std::map<off_t, off_t> r_;
};

}  // namespace kd
