// Long calls (convert, verify, save, restore) that Ctrl-C stops.
//
// Python runs signal handlers on its main thread, between bytecodes, so a
// call that holds the main thread inside C++ delays KeyboardInterrupt until
// it returns (and its result is lost). RunInterruptibly runs the call on a
// worker thread with the GIL released while the calling thread waits in
// steps of kSignalPoll and lets Python run its handlers. When one raises
// (KeyboardInterrupt, or whatever a user's SIGTERM handler raises), the
// call's Interrupt (include/cairn/interrupt.h) is requested: the call stops
// at its next unit of work, before any commit, and the exception is raised
// once it has returned, with the call's own account of what it kept added
// as a note (Python 3.11+). Nothing runs in C++ after the exception is
// raised.
//
// Called from a thread other than the main one, signals are not checked
// (Python delivers them to the main thread only) and the call simply runs.
#pragma once

#include <nanobind/nanobind.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "cairn/interrupt.h"
#include "cairn/status.h"

namespace cairn::python {

inline constexpr std::chrono::milliseconds kSignalPoll{50};

// The status a result carries (Status itself, or Result<T>'s).
inline const Status& StatusOf(const Status& s) { return s; }
template <class T>
const Status& StatusOf(const T& result) {
  return result.status();
}

// Runs `work()` (which returns a Status or a Result<T>, and stops when
// `interrupt` is requested) as above. Call with the GIL held.
template <class Work>
auto RunInterruptibly(Interrupt& interrupt, Work&& work) -> decltype(work()) {
  namespace nb = nanobind;
  using Out = decltype(work());
  std::optional<Out> out;
  std::exception_ptr thrown;
  std::optional<nb::python_error> raised;
  {
    nb::gil_scoped_release release;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::thread worker([&] {
      std::optional<Out> local;
      std::exception_ptr error;
      try {
        local.emplace(work());
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mu);
      out = std::move(local);
      thrown = error;
      done = true;
      cv.notify_all();
    });
    for (;;) {
      std::unique_lock lock(mu);
      if (cv.wait_for(lock, kSignalPoll, [&] { return done; })) break;
      lock.unlock();
      if (raised) continue;  // interrupted: wait for the call to stop
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        raised.emplace();  // takes the pending exception
        interrupt.Request();
      }
    }
    worker.join();
  }
  if (raised) {
    if (out && !StatusOf(*out).ok() && nb::hasattr(raised->value(), "add_note")) {
      try {
        raised->value().attr("add_note")(std::string(StatusOf(*out).message()));
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("cairn: noting what an interrupted call kept");
      }
    }
    throw std::move(*raised);
  }
  if (thrown) std::rethrow_exception(thrown);
  return std::move(*out);
}

// The same with an Interrupt of its own, passed to `work(interrupt)`.
template <class Work>
auto RunInterruptibly(Work&& work) -> decltype(work(std::declval<const Interrupt*>())) {
  Interrupt interrupt;
  return RunInterruptibly(interrupt, [&] { return work(&interrupt); });
}

}  // namespace cairn::python
