// Allocation failure is a Status, never an abort or a hang: task-group jobs
// that throw (std::bad_alloc above all) on a pool worker or on the waiting
// thread, and Buffer::TryAllocate / TryResize for sizes that cannot be had.
// The cases that used to terminate or hang run in a child process (gtest
// death-test machinery, re-executed), with an alarm so a hang fails.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "cairn/util/buffer.h"
#include "cairn/util/thread_pool.h"

namespace cairn {
namespace {

class AllocationFailureTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// In the child: fails (exit 1, with the reason on stderr) unless `ok`.
void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "requirement failed: %s\n", what);
    std::_Exit(1);
  }
}

// A bad_alloc on a pool worker: the group fails with ResourceExhausted and
// the other jobs still run (it used to call std::terminate).
void WorkerThrowsBadAlloc() {
  alarm(20);
  ThreadPool pool(1);
  TaskGroup group(pool);
  std::atomic<bool> started{false};
  std::atomic<int> ok_jobs{0};
  std::thread::id ran_on;
  group.Run([&]() -> Status {
    ran_on = std::this_thread::get_id();
    started = true;
    throw std::bad_alloc();
  });
  while (!started) std::this_thread::yield();  // the worker has it, not Wait()
  group.Run([&] {
    ++ok_jobs;
    return Status::OK();
  });
  Status s = group.Wait();
  Require(ran_on != std::this_thread::get_id(), "the throwing job ran on the worker");
  Require(s.code() == StatusCode::kResourceExhausted, "ResourceExhausted");
  Require(std::string(s.message()).find("out of memory") != std::string::npos, "message");
  Require(ok_jobs == 1, "the other job ran");
  std::_Exit(0);
}

TEST_F(AllocationFailureTest, BadAllocOnAPoolWorkerFailsTheGroup) {
  EXPECT_EXIT(WorkerThrowsBadAlloc(), ::testing::ExitedWithCode(0), "");
}

// The waiting thread runs the throwing job itself (the only worker is
// busy): the count still goes down and Wait() returns the error (it used to
// let the exception escape and leave the group waiting forever).
void WaiterRunsAThrowingJob() {
  alarm(20);
  ThreadPool pool(1);
  std::atomic<bool> blocker_started{false}, release{false};
  pool.Schedule([&] {
    blocker_started = true;
    while (!release) std::this_thread::yield();
  });
  while (!blocker_started) std::this_thread::yield();
  std::thread::id ran_on;
  Status s;
  {
    TaskGroup group(pool);
    group.Run([&]() -> Status {
      ran_on = std::this_thread::get_id();
      throw std::bad_alloc();
    });
    s = group.Wait();
  }  // ~TaskGroup waits again: must not hang
  release = true;
  Require(ran_on == std::this_thread::get_id(), "the waiter ran the job");
  Require(s.code() == StatusCode::kResourceExhausted, "ResourceExhausted");
  std::_Exit(0);
}

TEST_F(AllocationFailureTest, BadAllocOnTheWaitingThreadIsReturnedNotHung) {
  EXPECT_EXIT(WaiterRunsAThrowingJob(), ::testing::ExitedWithCode(0), "");
}

TEST(ThreadPoolExceptions, OtherExceptionsAreInternalAndControlIsOk) {
  ThreadPool pool(2);
  {
    TaskGroup group(pool);
    group.Run([]() -> Status { throw std::runtime_error("boom in a job"); });
    Status s = group.Wait();
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_NE(std::string(s.message()).find("boom in a job"), std::string::npos) << s.ToString();
  }
  {  // control: the same group shape without a throw succeeds
    TaskGroup group(pool);
    std::atomic<int> n{0};
    for (int i = 0; i < 8; ++i) group.Run([&] { ++n; return Status::OK(); });
    EXPECT_TRUE(group.Wait().ok());
    EXPECT_EQ(n.load(), 8);
  }
  Status direct = RunCatchingExceptions([]() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(direct.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(RunCatchingExceptions([] { return Status::OK(); }).ok());
}

TEST(BufferTryAllocate, ImpossibleSizesAreResourceExhausted) {
  const size_t huge = size_t{1} << 48;
  auto b = Buffer::TryAllocate(huge, "chunk `c/0`");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().ToString().find("281474976710656 bytes for chunk `c/0`"),
            std::string::npos)
      << b.status().ToString();
  auto max = Buffer::TryAllocate(SIZE_MAX, "x");  // rounding must not wrap to a small block
  EXPECT_EQ(max.status().code(), StatusCode::kResourceExhausted);

  // Control: an ordinary size succeeds and is counted.
  const uint64_t before = Buffer::TotalBytesAllocated();
  auto small = Buffer::TryAllocate(10000, "x");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->size(), 10000u);
  EXPECT_GE(Buffer::TotalBytesAllocated() - before, 10000u);
}

TEST(BufferTryAllocate, FailedResizeLeavesTheBufferAsItWas) {
  Buffer b = Buffer::CopyOf(std::string_view("kept"));
  Status s = b.TryResize(size_t{1} << 50, "a shard");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(s.message()).find("a shard"), std::string::npos);
  EXPECT_EQ(b.ToString(), "kept");
  ASSERT_TRUE(b.TryResize(2).ok());  // control
  EXPECT_EQ(b.ToString(), "ke");
}

}  // namespace
}  // namespace cairn
