#include "cairn/util/thread_pool.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

namespace cairn {
namespace {

// Made before any job runs: reporting an allocation failure must not need
// to allocate.
const Status& OutOfMemoryStatus() {
  static const Status* status =
      new Status(ResourceExhaustedError("out of memory: an allocation failed in a thread-pool job"));
  return *status;
}
const Status& kEagerOutOfMemory = OutOfMemoryStatus();

// Runs a bare job; an exception is reported and dropped (not rethrown: on a
// worker it would terminate the process).
void RunBareJob(std::function<void()>& job) noexcept {
  try {
    job();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cairn: a thread-pool job threw (%s); ignored\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "cairn: a thread-pool job threw; ignored\n");
  }
}

}  // namespace

Status RunCatchingExceptions(const std::function<Status()>& job) noexcept {
  try {
    return job();
  } catch (const std::bad_alloc&) {
    return OutOfMemoryStatus();
  } catch (const std::exception& e) {
    try {
      return InternalError(std::string("a thread-pool job threw: ") + e.what());
    } catch (...) {
      return OutOfMemoryStatus();
    }
  } catch (...) {
    try {
      return InternalError("a thread-pool job threw a non-standard exception");
    } catch (...) {
      return OutOfMemoryStatus();
    }
  }
}

ThreadPool::ThreadPool(size_t num_threads) {
  if (num_threads == 0) num_threads = 1;
  threads_.reserve(num_threads);
  for (size_t i = 0; i < num_threads; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

bool ThreadPool::RunOne() {
  std::function<void()> job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return false;
    job = std::move(queue_.front());
    queue_.pop_front();
  }
  RunBareJob(job);
  return true;
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    RunBareJob(job);
  }
}

ThreadPool& ThreadPool::Default() {
  static ThreadPool* pool = [] {
    // Chunk jobs both compute (codecs) and block on I/O: twice the cores keeps
    // the device busy while other jobs encode or decode.
    size_t n = 2 * std::max(1u, std::thread::hardware_concurrency());
    if (const char* env = std::getenv("CAIRN_THREADS")) {
      long v = std::strtol(env, nullptr, 10);
      if (v > 0 && v < 1024) n = static_cast<size_t>(v);
    }
    if (n < 4 && std::getenv("CAIRN_THREADS") == nullptr) n = 4;
    return new ThreadPool(n);  // never destroyed: jobs may outlive static dtors
  }();
  return *pool;
}

TaskGroup::~TaskGroup() { Wait().IgnoreError(); }

void TaskGroup::Run(std::function<Status()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
  }
  // The job's end is recorded whatever happens inside it: a count left
  // undecremented would make Wait() spin forever.
  try {
    pool_.Schedule([this, job = std::move(job)] {
      Status s = RunCatchingExceptions(job);
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.ok() && first_error_.ok()) first_error_ = std::move(s);
      if (--pending_ == 0) cv_.notify_all();
    });
  } catch (...) {  // queueing the job failed to allocate: it never runs
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = OutOfMemoryStatus();
    if (--pending_ == 0) cv_.notify_all();
  }
}

Status TaskGroup::Wait() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (pending_ == 0) return first_error_;
    }
    // Help with queued work (ours or others') rather than block: this keeps
    // nested groups on pool threads from deadlocking.
    if (!pool_.RunOne()) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return pending_ == 0; });
    }
  }
}

bool TaskGroup::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !first_error_.ok();
}

}  // namespace cairn
