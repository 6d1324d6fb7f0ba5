#include "cairn/util/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace cairn {

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
  job();
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
    job();
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
  pool_.Schedule([this, job = std::move(job)] {
    Status s = job();
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok() && first_error_.ok()) first_error_ = std::move(s);
    if (--pending_ == 0) cv_.notify_all();
  });
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
