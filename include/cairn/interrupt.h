// Interrupt: asks a long call (a conversion, a verification, a save or a
// restore) to stop early.
//
// A front end sets it from a signal: the CLI's SIGINT and SIGTERM handlers,
// the Python bindings when Python has a KeyboardInterrupt pending. The call
// checks it between its units of work (a slab, a chunk, an array) and
// returns a status with code kCancelled whose message says what was
// stopped and what was kept. So it stops within one unit of work of the
// signal (each is bounded by the memory budget and one storage request).
//
// What it stops changes nothing committed: a conversion or a save stops
// before its commit (an interrupted conversion into a format that keeps
// its arrays resumes where it stopped), and a commit that has begun runs
// to its end.
//
// Thread safety: Request() is async-signal-safe (one store to a lock-free
// atomic); every member may be called from any thread.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

#include "cairn/status.h"

namespace cairn {

class Interrupt {
 public:
  void Request() noexcept { requested_.store(true, std::memory_order_relaxed); }
  bool requested() const noexcept { return requested_.load(std::memory_order_relaxed); }

 private:
  static_assert(std::atomic<bool>::is_always_lock_free, "Request() must be async-signal-safe");
  std::atomic<bool> requested_{false};
};

// True when `status` is that of a call that `interrupt` (may be null) stopped.
inline bool WasInterrupted(const Status& status, const Interrupt* interrupt) {
  return !status.ok() && status.code() == StatusCode::kCancelled && interrupt != nullptr &&
         interrupt->requested();
}

// kCancelled ("<what> was interrupted") when `interrupt` (may be
// null) was requested; OK otherwise.
inline Status CheckInterrupt(const Interrupt* interrupt, std::string_view what) {
  if (interrupt == nullptr || !interrupt->requested()) return Status::OK();
  return Status(StatusCode::kCancelled, std::string(what) + " was interrupted");
}

}  // namespace cairn
