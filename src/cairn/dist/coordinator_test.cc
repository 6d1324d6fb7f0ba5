// Tests of the single-process and callback coordinators and AgreeOnStatus.
// The callback coordinator runs over an in-memory key-value store with one
// thread per "process".
#include <cerrno>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cairn/coordinator.h"

namespace cairn {
namespace {

using namespace std::chrono_literals;

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

// A key-value store shared by the threads of a test, with the semantics of
// jax.distributed's client: keys are set once; a get blocks until the key
// exists or the timeout passes.
class MemoryKv {
 public:
  Status Set(std::string_view key, std::string_view value) {
    std::lock_guard<std::mutex> lock(mu_);
    sets_++;
    if (!map_.emplace(std::string(key), std::string(value)).second) {
      return AlreadyExistsError("key `" + std::string(key) + "` is already set");
    }
    cv_.notify_all();
    return Status::OK();
  }
  Result<std::string> Get(std::string_view key, Coordinator::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const std::string k(key);
    if (!cv_.wait_for(lock, timeout, [&] { return map_.count(k) > 0; })) {
      return UnavailableError("DEADLINE_EXCEEDED: key `" + k + "`");
    }
    return map_[k];
  }
  int sets() {
    std::lock_guard<std::mutex> lock(mu_);
    return sets_;
  }
  std::vector<std::string> Keys() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> keys;
    for (auto& [k, v] : map_) keys.push_back(k);
    return keys;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
  int sets_ = 0;
};

CoordinatorCallbacks KvCallbacks(MemoryKv& kv) {
  CoordinatorCallbacks cb;
  cb.key_value_set = [&kv](std::string_view k, std::string_view v) { return kv.Set(k, v); };
  cb.blocking_key_value_get = [&kv](std::string_view k, Coordinator::Duration t) {
    return kv.Get(k, t);
  };
  return cb;
}

// Runs body(coordinator) for n callback coordinators over one store, each in
// its own thread.
void RunProcesses(int n, MemoryKv& kv, const std::function<void(Coordinator&)>& body) {
  std::vector<std::unique_ptr<Coordinator>> coordinators;
  for (int i = 0; i < n; ++i) {
    CoordinatorCallbacks cb = KvCallbacks(kv);
    coordinators.push_back(NewCallbackCoordinator(i, n, std::move(cb)));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { body(*coordinators[i]); });
  for (auto& t : threads) t.join();
}

TEST(SingleProcessCoordinator, CollectivesReturnAtOnce) {
  auto c = NewSingleProcessCoordinator();
  EXPECT_EQ(c->process_index(), 0);
  EXPECT_EQ(c->process_count(), 1);
  EXPECT_TRUE(c->is_primary());
  EXPECT_TRUE(c->Barrier("b", 0s).ok());
  auto all = c->AllGather("g", "value", 0s);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, std::vector<std::string>{"value"});
  auto b = c->Broadcast("x", 0, "root value", 0s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "root value");
  auto bad = c->Broadcast("x", 1, "v", 0s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_CONTAINS(std::string(bad.status().message()), "root 1");
}

TEST(CallbackCoordinator, AllGatherOrdersByProcessIndex) {
  MemoryKv kv;
  constexpr int n = 4;
  std::vector<std::vector<std::string>> got(n);
  RunProcesses(n, kv, [&](Coordinator& c) {
    // Values of different sizes, including an empty one and binary bytes.
    std::string v(c.process_index() * 1000, static_cast<char>('a' + c.process_index()));
    if (c.process_index() == 3) v[10] = '\0';
    auto r = c.AllGather("cairn/test/gather", v, 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    got[c.process_index()] = *r;
  });
  for (int p = 0; p < n; ++p) {
    ASSERT_EQ(got[p].size(), size_t{n});
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(got[p][i].size(), size_t(i * 1000));
      if (i > 0) {
        EXPECT_EQ(got[p][i][0], 'a' + i);
      }
    }
    EXPECT_EQ(got[p][3][10], '\0');
  }
  // Keys are prefixed by the collective's name and numbered.
  auto keys = kv.Keys();
  ASSERT_EQ(keys.size(), size_t{n});
  EXPECT_EQ(keys[0], "cairn/cairn/test/gather/0/0");
  EXPECT_EQ(keys[3], "cairn/cairn/test/gather/0/3");
}

TEST(CallbackCoordinator, ReusedNamesGetFreshKeys) {
  MemoryKv kv;
  std::atomic<int> failures{0};
  RunProcesses(3, kv, [&](Coordinator& c) {
    for (int round = 0; round < 5; ++round) {
      auto r = c.AllGather("same", std::to_string(round * 10 + c.process_index()), 10s);
      if (!r.ok() || (*r)[2] != std::to_string(round * 10 + 2)) failures++;
      if (!c.Barrier("same-barrier", 10s).ok()) failures++;
    }
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(kv.sets(), 3 * 5 * 2);  // no key was set twice (a second set fails)
}

TEST(CallbackCoordinator, BroadcastFromEveryRoot) {
  MemoryKv kv;
  constexpr int n = 3;
  std::atomic<int> failures{0};
  RunProcesses(n, kv, [&](Coordinator& c) {
    for (int root = 0; root < n; ++root) {
      std::string mine = "from " + std::to_string(c.process_index());
      auto r = c.Broadcast("bcast", root, mine, 10s);
      if (!r.ok() || *r != "from " + std::to_string(root)) failures++;
    }
    auto bad = c.Broadcast("bcast-bad", n, "x", 10s);
    if (bad.ok() || bad.status().code() != StatusCode::kInvalidArgument) failures++;
  });
  EXPECT_EQ(failures.load(), 0);
}

TEST(CallbackCoordinator, BarrierCallbackIsUsedWhenGiven) {
  MemoryKv kv;
  std::vector<std::string> ids;
  std::mutex mu;
  CoordinatorCallbacks cb = KvCallbacks(kv);
  cb.key_prefix = "job7";
  cb.barrier = [&](std::string_view id, Coordinator::Duration) {
    std::lock_guard<std::mutex> lock(mu);
    ids.emplace_back(id);
    return Status::OK();
  };
  auto c = NewCallbackCoordinator(0, 2, cb);
  EXPECT_TRUE(c->Barrier("sync", 1s).ok());
  EXPECT_TRUE(c->Barrier("sync", 1s).ok());
  EXPECT_EQ(ids, (std::vector<std::string>{"job7/sync/0", "job7/sync/1"}));
  EXPECT_EQ(kv.sets(), 0);
  // A failing barrier callback is reported with the barrier's name.
  cb.barrier = [](std::string_view, Coordinator::Duration) {
    return UnavailableError("DEADLINE_EXCEEDED");
  };
  auto failing = NewCallbackCoordinator(1, 2, cb);
  Status s = failing->Barrier("sync", 1s);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_CONTAINS(std::string(s.message()), "barrier `sync`");
  EXPECT_CONTAINS(std::string(s.message()), "DEADLINE_EXCEEDED");
}

TEST(CallbackCoordinator, MissingProcessTimesOutPromptlyNamingIt) {
  MemoryKv kv;
  // Processes 0, 1 and 3 of 4 arrive; process 2 never does.
  std::vector<Status> statuses(4);
  std::vector<double> seconds(4);
  std::vector<std::thread> threads;
  for (int i : {0, 1, 3}) {
    threads.emplace_back([&, i] {
      auto c = NewCallbackCoordinator(i, 4, KvCallbacks(kv));
      auto t0 = std::chrono::steady_clock::now();
      statuses[i] = c->AllGather("late", "v", 300ms).status();
      seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  for (auto& t : threads) t.join();
  for (int i : {0, 1, 3}) {
    EXPECT_EQ(statuses[i].code(), StatusCode::kUnavailable) << statuses[i].ToString();
    EXPECT_CONTAINS(std::string(statuses[i].message()), "no message from process 2");
    EXPECT_CONTAINS(std::string(statuses[i].message()), "all-gather `late`");
    EXPECT_GE(seconds[i], 0.25);
    EXPECT_LT(seconds[i], 2.0);  // one deadline for the whole collective
  }
  // Control: the same processes with process 2 present succeed.
  MemoryKv kv2;
  std::atomic<int> ok{0};
  RunProcesses(4, kv2, [&](Coordinator& c) { ok += c.AllGather("late", "v", 10s).ok(); });
  EXPECT_EQ(ok.load(), 4);
}

TEST(CallbackCoordinator, BroadcastTimesOutWhenRootIsAbsent) {
  MemoryKv kv;
  auto c = NewCallbackCoordinator(1, 2, KvCallbacks(kv));
  auto t0 = std::chrono::steady_clock::now();
  auto r = c->Broadcast("plan", 0, "", 200ms);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_CONTAINS(std::string(r.status().message()), "no message from process 0");
  EXPECT_LT(s, 2.0);
}

TEST(CallbackCoordinator, InvalidConstructionIsReported) {
  MemoryKv kv;
  auto c = NewCallbackCoordinator(4, 4, KvCallbacks(kv));
  Status s = c->Barrier("b", 1s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_CONTAINS(std::string(s.message()), "process index 4");
  auto no_get = NewCallbackCoordinator(0, 1, CoordinatorCallbacks{});
  EXPECT_EQ(no_get->AllGather("g", "", 1s).status().code(), StatusCode::kInvalidArgument);
  // Control: a valid one-process callback coordinator works.
  auto one = NewCallbackCoordinator(0, 1, KvCallbacks(kv));
  EXPECT_TRUE(one->Barrier("b", 1s).ok());
}

TEST(AgreeOnStatus, AllOkGivesOk) {
  MemoryKv kv;
  std::atomic<int> ok{0};
  RunProcesses(4, kv, [&](Coordinator& c) {
    ok += AgreeOnStatus(c, "phase", Status::OK(), 10s).ok();
  });
  EXPECT_EQ(ok.load(), 4);
  auto single = NewSingleProcessCoordinator();
  EXPECT_TRUE(AgreeOnStatus(*single, "p", Status::OK(), 0s).ok());
}

TEST(AgreeOnStatus, FirstFailureByProcessIndexNamesTheProcess) {
  MemoryKv kv;
  std::vector<Status> got(4);
  RunProcesses(4, kv, [&](Coordinator& c) {
    Status local;
    if (c.process_index() == 3) local = DataLossError("crc32c mismatch in `a/c/0`");
    if (c.process_index() == 1) local = NotFoundError("no such key `b/.zarray`");
    got[c.process_index()] = AgreeOnStatus(c, "save/commit", local, 10s);
  });
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].code(), StatusCode::kNotFound) << got[i].ToString();
    EXPECT_EQ(std::string(got[i].message()), "process 1 of 4: no such key `b/.zarray`");
  }
  auto single = NewSingleProcessCoordinator();
  Status s = AgreeOnStatus(*single, "p", InternalError("boom"), 0s);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(std::string(s.message()), "boom");  // one process: no "process 0 of 1:"
  s = AgreeOnStatus(*single, "q", ErrnoError(EACCES, "creating x"), 0s);
  EXPECT_EQ(s.error_number(), EACCES);
}

TEST(AgreeOnStatus, MalformedAnswerIsAnInternalErrorOfThatProcess) {
  MemoryKv kv;
  // Process 1 is impersonated by writing its key by hand.
  ASSERT_TRUE(kv.Set("cairn/st/0/1", "not a status").ok());
  auto c = NewCallbackCoordinator(0, 2, KvCallbacks(kv));
  Status s = AgreeOnStatus(*c, "st", Status::OK(), 5s);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_CONTAINS(std::string(s.message()), "process 1 of 2: malformed status");
}

TEST(AgreeOnStatus, TimeoutGivesTheLocalFailureOrUnavailable) {
  MemoryKv kv;
  auto c = NewCallbackCoordinator(0, 2, KvCallbacks(kv));
  Status s = AgreeOnStatus(*c, "lonely", Status::OK(), 100ms);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_CONTAINS(std::string(s.message()), "agreeing on the outcome of `lonely`");
  Status local = AgreeOnStatus(*c, "lonely", ResourceExhaustedError("disk full"), 100ms);
  EXPECT_EQ(local.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(local.message()), "process 0 of 2: disk full");
}

}  // namespace
}  // namespace cairn
