// A fixed pool of worker threads running blocking jobs.
//
// cairn gets parallelism from many independent chunk jobs in flight, not
// from a futures framework: callers put jobs in a `TaskGroup`, then `Wait()`
// for all of them and get the first error.
//
// Thread safety: all methods may be called from any thread, including from
// jobs running on the pool (a TaskGroup waited on from a pool thread runs
// queued jobs itself instead of blocking, so nested use cannot deadlock).
//
// Exceptions: cairn code returns Status, but a job may still throw (an
// allocation that fails throws std::bad_alloc, as may code cairn calls). A
// TaskGroup job that throws counts as finished and fails the group with
// ResourceExhausted (bad_alloc) or Internal (anything else), on a pool worker
// and on a waiting thread that runs the job itself alike; the process is
// never terminated and Wait() never hangs on a job that threw. A bare
// Schedule()d job that throws is reported on stderr and dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "cairn/status.h"

namespace cairn {

class ThreadPool {
 public:
  // REQUIRES: num_threads >= 1.
  explicit ThreadPool(size_t num_threads);
  ~ThreadPool();  // finishes queued jobs, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return threads_.size(); }
  void Schedule(std::function<void()> job);

  // Runs one queued job on the calling thread, if any; returns whether it did.
  bool RunOne();

  // The process-wide pool: twice the hardware concurrency (at least 4), or
  // CAIRN_THREADS when set.
  static ThreadPool& Default();

 private:
  void WorkerLoop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// A set of jobs whose completion and first error a caller waits for.
class TaskGroup {
 public:
  explicit TaskGroup(ThreadPool& pool = ThreadPool::Default()) : pool_(pool) {}
  ~TaskGroup();  // waits
  // Schedules `job`. Jobs scheduled after an error still run unless they
  // check `failed()`. A job that throws fails the group (see above).
  void Run(std::function<Status()> job);
  // Blocks until every job has finished (or thrown); returns the first
  // non-OK status.
  Status Wait();
  bool failed() const;

 private:
  ThreadPool& pool_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t pending_ = 0;
  Status first_error_;
};

// Runs `job`, turning an exception it throws into a Status: bad_alloc into
// ResourceExhausted, anything else into Internal. Never throws.
Status RunCatchingExceptions(const std::function<Status()>& job) noexcept;

}  // namespace cairn
