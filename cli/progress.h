// A progress bar on stderr for long CLI commands (verify, diff, convert):
// bytes done of the total, throughput and the estimated time left.
//
// Drawn only when stderr is a terminal, and only once the work has run for
// more than a second (CAIRN_PROGRESS_DELAY_MS overrides the delay, for
// tests); redrawn at most ten times a second; erased when the
// bar is destroyed or cleared. Off a terminal it prints nothing.
//
// Thread safety: one thread calls Update.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cairn::cli {

// True while a bar is on the screen: a signal handler that ends the process
// erases it first (signals.h).
inline std::atomic<bool> bar_on_screen{false};

class ProgressBar {
 public:
  explicit ProgressBar(std::string label)
      : label_(std::move(label)),
        enabled_(isatty(STDERR_FILENO) == 1),
        start_(std::chrono::steady_clock::now()) {
    if (const char* ms = std::getenv("CAIRN_PROGRESS_DELAY_MS"); ms != nullptr && *ms != '\0') {
      delay_ = std::chrono::milliseconds(std::strtoll(ms, nullptr, 10));
    }
  }
  ~ProgressBar() { Clear(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Erases the bar (before a message is printed) and draws no more.
  void Clear() {
    if (drawn_) {
      std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
      bar_on_screen = false;
    }
    drawn_ = false;
    enabled_ = false;
  }

  // `done` of `total` units (bytes) finished.
  void Update(uint64_t done, uint64_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < delay_) return;
    if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    bar_on_screen = true;
    const double frac = total == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total);
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth + 0.5);
    std::string bar(static_cast<size_t>(filled > kWidth ? kWidth : filled), '#');
    bar.resize(kWidth, '.');
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? done / secs : 0;  // bytes per second
    const double eta = rate > 0 && total > done ? (total - done) / rate : 0;
    std::fprintf(stderr, "\r%s [%s] %5.1f%%  %.1f / %.1f MiB  %.1f MiB/s  %.0fs, ETA %.0fs\033[K",
                 label_.c_str(), bar.c_str(), frac * 100, done / 1048576.0, total / 1048576.0,
                 rate / 1048576.0, secs, eta);
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  std::chrono::milliseconds delay_{1000};
};

}  // namespace cairn::cli
