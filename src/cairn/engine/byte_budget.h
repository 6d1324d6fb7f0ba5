// ByteBudget: a bound on the host memory the engine owns at once.
//
// Every snapshot buffer and every encoded chunk the engine holds is counted
// against one budget: Acquire(n) blocks until n bytes are free, Release(n)
// gives them back. Encoders in flight overdraw it (Overdraw): at most one
// chunk's working memory per pool thread past the capacity. A request larger than the whole budget is granted alone
// (when nothing else is held), so a single chunk bigger than the budget
// still goes through, one at a time. `peak()` reports the most ever held,
// for tests and benchmarks.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace cairn::engine {

class ByteBudget {
 public:
  static constexpr uint64_t kDefaultBytes = uint64_t{4} << 30;

  // REQUIRES: capacity > 0.
  explicit ByteBudget(uint64_t capacity = kDefaultBytes) : capacity_(capacity) {}

  // Blocks until `n` bytes can be held (or, for n > capacity, until nothing
  // else is held), then holds them.
  void Acquire(uint64_t n);
  // Holds `n` bytes if they are free now; returns whether it did.
  bool TryAcquire(uint64_t n);
  // Holds `n` bytes now, even past the capacity (for short-lived working
  // memory of a job already running, which must not wait for the jobs
  // queued behind it: the save's encoders). Later Acquire calls wait until
  // the budget is back under its capacity.
  void Overdraw(uint64_t n);
  // Gives back `n` bytes acquired earlier.
  void Release(uint64_t n);

  uint64_t capacity() const { return capacity_; }
  uint64_t in_use() const;
  uint64_t peak() const;

 private:
  bool FitsLocked(uint64_t n) const { return in_use_ == 0 || in_use_ + n <= capacity_; }

  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t in_use_ = 0;
  uint64_t peak_ = 0;
};

// Holds bytes of a budget for its lifetime (movable).
class BudgetHold {
 public:
  BudgetHold() = default;
  BudgetHold(ByteBudget* budget, uint64_t n) : budget_(budget), n_(n) {}
  BudgetHold(BudgetHold&& o) noexcept : budget_(o.budget_), n_(o.n_) { o.n_ = 0; }
  BudgetHold& operator=(BudgetHold&& o) noexcept {
    Reset();
    budget_ = o.budget_;
    n_ = o.n_;
    o.n_ = 0;
    return *this;
  }
  ~BudgetHold() { Reset(); }
  void Reset() {
    if (budget_ != nullptr && n_ != 0) budget_->Release(n_);
    n_ = 0;
  }
  uint64_t bytes() const { return n_; }

 private:
  ByteBudget* budget_ = nullptr;
  uint64_t n_ = 0;
};

}  // namespace cairn::engine
