// The kernel's periodic writeback, as an option (--writeback SECONDS): a file that has had
// something pending for that long is made durable whole (the kernel writes an inode's dirty
// pages back once the first of them is older than dirty_expire_centisecs, 30 s by default),
// and so is every name change that old (ext4 commits its journal every 5 s). Without it
// nothing is durable until an fsync says so: the worst case, as Jepsen's lazyfs.
#include <unistd.h>

#include <thread>
#include <vector>

#include "layer.hpp"

namespace kd {

void writeback_loop() {
    using clock = std::chrono::steady_clock;
    const auto age = std::chrono::duration_cast<clock::duration>(
        std::chrono::duration<double>(L.writeback_s));
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        // As an operation: a drop finds none half done, and after a drop nothing is written.
        std::shared_lock<WriterFirstLock> lk(L.power_mu);
        if (!L.powered) return;
        const auto deadline = clock::now() - age;
        std::vector<Tracked*> all;
        {
            std::lock_guard<std::mutex> g(L.track_mu);
            for (auto& [k, t] : L.tracked) all.push_back(t.get());
        }
        for (Tracked* t : all) {
            std::lock_guard<std::mutex> g(t->mu);
            if (!t->state || t->since >= deadline) continue;
            t->state.reset();
            close(t->opath);
            t->opath = -1;
            L.count.written_back++;
        }
        std::lock_guard<std::mutex> g(L.names_mu);
        L.names->commit_before(deadline);
        forget_released();
    }
}

}  // namespace kd
