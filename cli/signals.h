// SIGINT and SIGTERM in the CLI.
//
// Commands that only read (ls, info, verify, diff) end at once
// (ExitOnSignal): the handler erases the progress bar, says the command
// was interrupted and exits; nothing they leave behind needs cleaning up.
//
// A conversion writes, so it stops cleanly instead (SignalInterrupt): the
// first signal requests its Interrupt (include/cairn/interrupt.h), so it
// stops at its next slab, before its commit, clears its progress bar and
// says what a re-run keeps; a second signal ends the process at once, as
// the signal's default action would have.
//
// The exit status of an interrupted command is 128 + the signal (130 for
// Ctrl-C, 143 for SIGTERM), as shells report a process the signal killed.
//
// Thread safety: one SignalInterrupt at a time, made and destroyed on the
// main thread; the handler only stores to lock-free atomics.
#pragma once

#include <signal.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "cairn/interrupt.h"
#include "progress.h"

namespace cairn::cli {

class SignalInterrupt {
 public:
  SignalInterrupt() {
    current_.store(this);
    struct sigaction action {};
    action.sa_handler = &SignalInterrupt::Handle;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalInterrupt() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    current_.store(nullptr);
  }
  SignalInterrupt(const SignalInterrupt&) = delete;
  SignalInterrupt& operator=(const SignalInterrupt&) = delete;

  const Interrupt* interrupt() const { return &interrupt_; }
  // The signal that requested the interrupt, or 0.
  int signal() const { return signal_.load(); }
  // 128 + the signal: the exit status of an interrupted command.
  int exit_code() const { return 128 + (signal() != 0 ? signal() : SIGINT); }

 private:
  static void Handle(int sig) {
    SignalInterrupt* self = current_.load();
    if (self == nullptr || self->signal_.exchange(sig) != 0) {
      // The second signal: the default action, now.
      ::signal(sig, SIG_DFL);
      ::raise(sig);
      return;
    }
    self->interrupt_.Request();
  }

  static_assert(std::atomic<int>::is_always_lock_free);
  static_assert(std::atomic<SignalInterrupt*>::is_always_lock_free);
  static inline std::atomic<SignalInterrupt*> current_{nullptr};
  Interrupt interrupt_;
  std::atomic<int> signal_{0};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// For the whole run of a command that only reads: on SIGINT or SIGTERM,
// erases the bar, prints "cairn <command>: interrupted" and exits with 128 +
// the signal. Everything the handler calls is async-signal-safe.
class ExitOnSignal {
 public:
  explicit ExitOnSignal(const char* command) {
    std::snprintf(message_, sizeof(message_), "cairn %s: interrupted\n", command);
    message_size_ = std::strlen(message_);
    struct sigaction action {};
    action.sa_handler = &ExitOnSignal::Handle;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  }

 private:
  static void Handle(int sig) {
    if (bar_on_screen.load()) (void)!::write(STDERR_FILENO, "\r\033[K", 4);
    (void)!::write(STDERR_FILENO, message_, message_size_);
    ::_exit(128 + sig);
  }

  static inline char message_[96] = {};
  static inline size_t message_size_ = 0;
};

}  // namespace cairn::cli
