// Tests of the MPI coordinator. They run only under mpirun (ctest `dist_mpi`
// starts cairn_dist_test with 4 ranks and --gtest_filter=MpiCoordinator*);
// in the plain `dist` run they are skipped, because initializing MPI outside
// mpirun is not what they test. Every rank runs the same tests in the same
// order, so every collective below is called by all ranks unless a test says
// otherwise.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "cairn/coordinator.h"
#include "cairn/mpi_coordinator.h"

namespace cairn {
namespace {

using namespace std::chrono_literals;

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

bool UnderMpirun() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size) size = std::getenv("PMI_SIZE");
  return size != nullptr;
}

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

// The coordinator shared by the tests of one rank (created by the first).
Coordinator& World() {
  static std::unique_ptr<Coordinator> world = [] {
    auto c = NewMpiCoordinator(30s);
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      std::abort();
    }
    return std::move(c).value();
  }();
  return *world;
}

#define REQUIRE_MPIRUN() \
  if (!UnderMpirun()) GTEST_SKIP() << "runs under mpirun only (ctest dist_mpi)"

TEST(MpiCoordinator, IsAvailableInThisBuild) {
  REQUIRE_MPIRUN();
  EXPECT_TRUE(MpiCoordinatorAvailable());
  EXPECT_TRUE(InitializeMpiIfNeeded().ok());
  EXPECT_TRUE(InitializeMpiIfNeeded().ok());  // idempotent
}

TEST(MpiCoordinator, IndexAndCountMatchTheLauncher) {
  REQUIRE_MPIRUN();
  Coordinator& c = World();
  EXPECT_EQ(c.process_count(), EnvInt("OMPI_COMM_WORLD_SIZE"));
  EXPECT_EQ(c.process_index(), EnvInt("OMPI_COMM_WORLD_RANK"));
  EXPECT_EQ(c.process_count(), 4);
  EXPECT_TRUE(c.Barrier("start", 30s).ok());
}

TEST(MpiCoordinator, AllGatherOrdersByRankWithDifferentSizes) {
  REQUIRE_MPIRUN();
  Coordinator& c = World();
  const int me = c.process_index();
  std::string v(me * 1000, static_cast<char>('a' + me));  // rank 0 sends nothing
  if (me == 3) v[10] = '\0';
  auto r = c.AllGather("gather", v, 30s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), size_t(c.process_count()));
  for (int i = 0; i < c.process_count(); ++i) {
    ASSERT_EQ((*r)[i].size(), size_t(i * 1000));
    if (i > 0) {
      EXPECT_EQ((*r)[i][0], 'a' + i);
    }
  }
  EXPECT_EQ((*r)[3][10], '\0');
  // All empty: only the header exchange happens.
  auto empty = c.AllGather("gather-empty", "", 30s);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(*empty, std::vector<std::string>(c.process_count()));
}

TEST(MpiCoordinator, BroadcastFromEveryRoot) {
  REQUIRE_MPIRUN();
  Coordinator& c = World();
  for (int root = 0; root < c.process_count(); ++root) {
    std::string mine(100000 + c.process_index(), static_cast<char>('0' + c.process_index()));
    auto r = c.Broadcast("bcast", root, mine, 30s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->size(), size_t(100000 + root));
    EXPECT_EQ(r->front(), '0' + root);
  }
  auto bad = c.Broadcast("bcast", c.process_count(), "x", 30s);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(MpiCoordinator, AgreeOnStatusPicksTheFirstFailure) {
  REQUIRE_MPIRUN();
  Coordinator& c = World();
  EXPECT_TRUE(AgreeOnStatus(c, "all-ok", Status::OK(), 30s).ok());
  Status local;
  if (c.process_index() == 3) local = DataLossError("crc32c mismatch");
  if (c.process_index() == 1) local = NotFoundError("no `a/.zarray`");
  Status s = AgreeOnStatus(c, "one-fails", local, 30s);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(std::string(s.message()), "process 1 of 4: no `a/.zarray`");
}

TEST(MpiCoordinator, DifferentNamesAreDetected) {
  REQUIRE_MPIRUN();
  Coordinator& c = World();
  const std::string name = c.process_index() == 2 ? "other" : "expected";
  auto r = c.AllGather(name, "v", 30s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_CONTAINS(r.status().message(), "called a different collective");
  // Control: the coordinator is still usable, and matching names succeed.
  auto ok = c.AllGather("matching", "v", 30s);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
  // A broadcast whose root differs between ranks is refused the same way.
  auto b = c.Broadcast("root-differs", c.process_index() == 0 ? 1 : 0, "v", 30s);
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(c.Barrier("after-mismatch", 30s).ok());
}

TEST(MpiCoordinator, TimeoutIsPromptAndBreaksOnlyThatCoordinator) {
  REQUIRE_MPIRUN();
  Coordinator& world = World();
  auto late_or = NewMpiCoordinator(30s);
  ASSERT_TRUE(late_or.ok()) << late_or.status().ToString();
  Coordinator& late = **late_or;
  if (late.process_index() == 0) {
    // Rank 0 waits alone: the others are held at the world barrier below.
    auto t0 = std::chrono::steady_clock::now();
    Status s = late.Barrier("late", 300ms);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_CONTAINS(s.message(), "MPI barrier `late`");
    EXPECT_CONTAINS(s.message(), "within 0.3 s");
    EXPECT_GE(secs, 0.29);
    EXPECT_LT(secs, 3.0);
    Status again = late.Barrier("again", 30s);
    EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
    EXPECT_CONTAINS(again.message(), "since MPI barrier `late` timed out or failed");
    EXPECT_TRUE(world.Barrier("late-released", 30s).ok());
  } else {
    EXPECT_TRUE(world.Barrier("late-released", 30s).ok());
    // Rank 0's abandoned barrier is still pending, so this one completes.
    EXPECT_TRUE(late.Barrier("late", 30s).ok());
  }
  // The world coordinator is unaffected.
  EXPECT_TRUE(world.Barrier("end", 30s).ok());
  late_or->release();  // see ~MpiCoordinator: kept until MPI_Finalize on rank 0
}

}  // namespace
}  // namespace cairn
