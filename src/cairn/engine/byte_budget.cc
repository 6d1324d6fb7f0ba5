#include "cairn/engine/byte_budget.h"

#include <algorithm>

namespace cairn::engine {

void ByteBudget::Acquire(uint64_t n) {
  if (n == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return FitsLocked(n); });
  in_use_ += n;
  peak_ = std::max(peak_, in_use_);
}

bool ByteBudget::TryAcquire(uint64_t n) {
  if (n == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  if (!FitsLocked(n)) return false;
  in_use_ += n;
  peak_ = std::max(peak_, in_use_);
  return true;
}

void ByteBudget::Overdraw(uint64_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ += n;
  peak_ = std::max(peak_, in_use_);
}

void ByteBudget::Release(uint64_t n) {
  if (n == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= std::min(n, in_use_);
  }
  cv_.notify_all();
}

uint64_t ByteBudget::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

uint64_t ByteBudget::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

}  // namespace cairn::engine
