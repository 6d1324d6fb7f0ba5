// ProgressCounter: the bytes a save or restore has done, reported to the
// caller's progress callback (include/cairn/engine.h) now and then: about
// every 1% of the total and once at the end (done == total), one call at
// a time, with `done` never going down.
//
// Thread safety: Add and Finish may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>

namespace cairn::engine {

using ProgressFn = std::function<void(uint64_t bytes_done, uint64_t bytes_total)>;

class ProgressCounter {
 public:
  ProgressCounter() = default;
  ProgressCounter(ProgressFn fn, uint64_t total) : fn_(std::move(fn)), total_(total), step_(total / 100) {}

  bool enabled() const { return static_cast<bool>(fn_); }
  uint64_t total() const { return total_; }

  void Add(uint64_t bytes) {
    if (!fn_) return;
    const uint64_t done = done_.fetch_add(bytes) + bytes;
    Report(done < total_ ? done : total_, /*last=*/false);
  }

  // Reports done == total once (also for an empty total).
  void Finish() {
    if (fn_) Report(total_, /*last=*/true);
  }

 private:
  void Report(uint64_t done, bool last) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_ || (!last && (done < next_ || done == total_))) return;
    if (last) finished_ = true;
    next_ = done + (step_ == 0 ? 1 : step_);
    fn_(done, total_);
  }

  ProgressFn fn_;
  uint64_t total_ = 0;
  uint64_t step_ = 0;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  uint64_t next_ = 0;
  bool finished_ = false;
};

}  // namespace cairn::engine
