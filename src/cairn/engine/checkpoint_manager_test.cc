// CheckpointManager tests: the retention and save policies (Orbax's rules),
// step discovery that ignores temporary and deleting names, the step
// deletion protocol (rename and in-place stores), and crash consistency: a
// fault injected at every write of a save with its retention, and at every
// write of a deletion, leaves every listed step whole (restorable
// bit-exactly) and the next save succeeding.
#include "cairn/engine/checkpoint_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "cairn/engine/restore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/fault_kvstore.h"
#include "cairn/kvstore/testing/in_place_store.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/util/testing/temp_dir.h"

namespace cairn::engine {
namespace {
namespace fs = std::filesystem;

std::string TempDir(const std::string& name) { return ::cairn::testing::TestDir("cairn_manager_test", name); }

orbax::Location Loc(const std::string& path) {
  auto loc = orbax::OpenLocation(path);
  EXPECT_TRUE(loc.ok()) << loc.status().ToString();
  return loc.ok() ? *loc : orbax::Location{};
}

std::vector<float> Values(int64_t step) {
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(step * 100) + static_cast<float>(i) * 0.5f;
  return v;
}

// One float32 [4, 3] array `w` holding Values(step).
std::vector<SaveLeaf> Tree(const std::vector<float>& values) {
  SaveLeaf l;
  l.path = {{"w", orbax::KeyType::kDict}};
  l.dtype = DType::kFloat32;
  l.shape = {4, 3};
  l.shards.push_back({Box({0, 0}, {4, 3}), values.data(), {}, 0});
  return {l};
}

// `w` of the step directory `step_dir`, or the error.
Result<std::vector<float>> ReadW(const std::string& step_dir) {
  std::vector<float> out(12, -1.0f);
  RestoreRequest r;
  r.directory = step_dir;
  r.item_name = "default";
  r.arrays.push_back({"w", DType::kFloat32, {{Box({0, 0}, {4, 3}), out.data(), {}}}});
  CAIRN_RETURN_IF_ERROR(Restore(r));
  return out;
}

std::vector<int64_t> Listed(const orbax::Location& root, bool require_commit_file = false) {
  auto steps = ListCommittedSteps(root, {}, require_commit_file);
  EXPECT_TRUE(steps.ok()) << steps.status().ToString();
  std::vector<int64_t> out;
  if (steps.ok()) {
    for (const auto& s : *steps) out.push_back(s.step);
  }
  return out;
}

// Every listed step of `root` restores bit-exactly the values saved for it.
void ExpectListedStepsWhole(const std::string& root_dir, const std::string& context) {
  for (int64_t step : Listed(Loc(root_dir))) {
    auto w = ReadW(root_dir + "/" + std::to_string(step));
    ASSERT_TRUE(w.ok()) << context << ": step " << step << ": " << w.status().ToString();
    EXPECT_EQ(*w, Values(step)) << context << ": step " << step;
  }
}

TEST(Retention, MatchesOrbaxDefaultPolicy) {
  const std::vector<int64_t> steps = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // Orbax 0.12.8 keeps [0, 4, 8, 9, 10] for max_to_keep=3, keep_period=4.
  EXPECT_EQ(StepsToRemove(steps, {3, 4}), (std::vector<int64_t>{1, 2, 3, 5, 6, 7}));
  EXPECT_EQ(StepsToRemove(steps, {3, std::nullopt}), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(StepsToRemove(steps, {std::nullopt, 4}), std::vector<int64_t>{});  // keep all
  EXPECT_EQ(StepsToRemove(steps, {}), std::vector<int64_t>{});
  EXPECT_EQ(StepsToRemove({5, 7}, {3, std::nullopt}), std::vector<int64_t>{});  // fewer than max
  EXPECT_EQ(StepsToRemove({0, 3, 6}, {0, 3}), std::vector<int64_t>{});           // all periodic
  EXPECT_EQ(StepsToRemove({1, 2}, {0, std::nullopt}), (std::vector<int64_t>{1, 2}));
}

TEST(Retention, ByScoreMatchesOrbaxBestN) {
  // Orbax 0.12.8's BestN + EveryNSteps (best_fn, best_mode, max_to_keep,
  // keep_period, keep_checkpoints_without_metrics): the expectations are what
  // preservation_policy.BestN(...).should_preserve answers for these steps.
  const std::vector<int64_t> steps = {1, 2, 3, 4, 5, 6};
  const std::map<int64_t, double> loss = {{1, 0.5}, {2, 0.2}, {3, 0.9}, {5, 0.2}, {6, 0.7}};  // 4: no metrics
  RetentionPolicy best_low{2, std::nullopt, true, /*higher_is_better=*/false, /*keep_unscored=*/true};
  EXPECT_EQ(StepsToRemove(steps, best_low, loss), (std::vector<int64_t>{1, 3, 6}));  // keeps 2, 5 and unscored 4
  RetentionPolicy best_high{2, std::nullopt, true, true, false};
  EXPECT_EQ(StepsToRemove(steps, best_high, loss), (std::vector<int64_t>{1, 2, 4, 5}));  // keeps 3 and 6
  RetentionPolicy periodic{1, 3, true, false, false};
  // Ties keep the later step (5 over 2); 3 and 6 are periodic.
  EXPECT_EQ(StepsToRemove(steps, periodic, loss), (std::vector<int64_t>{1, 2, 4}));
  RetentionPolicy all{std::nullopt, std::nullopt, true, true, false};
  EXPECT_EQ(StepsToRemove(steps, all, loss), std::vector<int64_t>{});  // no max_to_keep: all kept
  RetentionPolicy enough{6, std::nullopt, true, true, false};
  EXPECT_EQ(StepsToRemove(steps, enough, loss), std::vector<int64_t>{});  // not more than n: all kept
}

TEST(Retention, RejectsBadPolicyAndAcceptsGoodOne) {
  EXPECT_TRUE(CheckRetentionPolicy({1, 1}).ok());
  Status s = CheckRetentionPolicy({-1, std::nullopt});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_to_keep"), std::string::npos) << s.ToString();
  s = CheckRetentionPolicy({std::nullopt, 0});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("keep_period"), std::string::npos) << s.ToString();
}

TEST(Retention, ShouldSaveFollowsOrbax) {
  EXPECT_TRUE(ShouldSaveStep(7, {}, 5));       // the first save, whatever the interval
  EXPECT_TRUE(ShouldSaveStep(10, {7}, 5));
  EXPECT_FALSE(ShouldSaveStep(11, {7}, 5));
  EXPECT_FALSE(ShouldSaveStep(5, {7}, 5));     // not above the latest
  EXPECT_FALSE(ShouldSaveStep(7, {7}, 1));
  EXPECT_TRUE(ShouldSaveStep(8, {7}, 1));
}

TEST(StepDiscovery, IgnoresTemporaryAndDeletingNames) {
  auto store = std::make_shared<MemoryKvStore>("memory://discovery/");
  orbax::Location root{store, "run/", "memory://discovery"};
  for (const std::string& name : std::vector<std::string>{"1", "2.orbax-checkpoint-tmp-0123abcd", DeletingName("3", "ff"), "4", "05", "x"}) {
    ASSERT_TRUE(store->Put("run/" + name + "/_CHECKPOINT_METADATA", AsBytes(std::string("{}"))).ok());
  }
  ASSERT_TRUE(store->Put("run/4/commit_success.txt", AsBytes(std::string("ok"))).ok());
  EXPECT_EQ(Listed(root), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(Listed(root, /*require_commit_file=*/true), (std::vector<int64_t>{4}));
  EXPECT_TRUE(IsDeletingName(DeletingName("3", "ff")));
  EXPECT_TRUE(IsDeletingName(DeletingName("step_0003", "ab")));
  EXPECT_FALSE(IsDeletingName("3"));
  EXPECT_FALSE(IsDeletingName("3.orbax-checkpoint-tmp-ab"));
  EXPECT_FALSE(IsDeletingName(".cairn-deleting-ab.orbax-checkpoint-tmp"));
  // Leftovers of interrupted deletions go; everything else stays.
  ASSERT_TRUE(RemoveDeletingLeftovers(root).ok());
  auto children = orbax::ListEntries(root);
  ASSERT_TRUE(children.ok());
  std::vector<std::string> names;
  for (const auto& c : *children) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"05", "1", "2.orbax-checkpoint-tmp-0123abcd", "4", "x"}));
}

// Fills `root/<step>/` with a step-like tree of `n` keys and the marker.
void FakeStep(const orbax::Location& root, const std::string& name, int n) {
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(root.store->Put(root.Key(name) + "/default/k" + std::to_string(i), AsBytes(std::string("v"))).ok());
  }
  ASSERT_TRUE(root.store->Put(root.Key(name) + "/commit_success.txt", AsBytes(std::string("ok"))).ok());
}

// A fault at every write of DeleteStep: the step is whole (every key
// present) or invisible, on a renaming store and an in-place one.
TEST(DeleteStep, FaultAtEveryWriteLeavesStepWholeOrInvisible) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in-place store" : "renaming store");
    bool finished = false;
    for (uint64_t n = 0; n < 40 && !finished; ++n) {
      auto mem = std::make_shared<MemoryKvStore>("memory://delete/");
      std::shared_ptr<KvStore> base =
          in_place ? std::shared_ptr<KvStore>(std::make_shared<cairn::testing::InPlaceStore>(mem)) : mem;
      auto fault = std::make_shared<FaultKvStore>(base);
      orbax::Location root{fault, "run/", "memory://delete"};
      FakeStep(root, "5", 6);
      FakeStep(root, "6", 2);
      fault->Reset();
      fault->FailWritesFrom(n, UnavailableError("injected crash"));
      Status s = DeleteStep(root.Child("5"));
      finished = fault->writes_failed() == 0;
      EXPECT_EQ(s.ok(), finished) << "fault at write " << n << ": " << s.ToString();
      fault->Reset();
      const std::vector<int64_t> listed = Listed(root, /*require_commit_file=*/in_place);
      if (listed.size() == 2) {
        EXPECT_EQ(listed, (std::vector<int64_t>{5, 6})) << "write " << n;
        auto keys = mem->List("run/5/default/");
        ASSERT_TRUE(keys.ok());
        EXPECT_EQ(keys->size(), 6u) << "step 5 is listed but partly deleted after a fault at write " << n;
      } else {
        EXPECT_EQ(listed, (std::vector<int64_t>{6})) << "write " << n;
      }
      // Recovery: leftovers go, a retried delete of a still listed step works.
      ASSERT_TRUE(RemoveDeletingLeftovers(root).ok());
      if (listed.size() == 2) ASSERT_TRUE(DeleteStep(root.Child("5")).ok());
      EXPECT_EQ(Listed(root, in_place), (std::vector<int64_t>{6}));
      auto left = mem->List("run/");
      ASSERT_TRUE(left.ok());
      for (const KeyInfo& k : *left) {
        EXPECT_TRUE(k.key.starts_with("run/6/") || (in_place && k.key.starts_with("run/5/"))) << k.key;
      }
    }
    EXPECT_TRUE(finished);
  }
}

TEST(DeleteStep, MissingStepIsNotFound) {
  auto mem = std::make_shared<MemoryKvStore>("memory://missing/");
  orbax::Location root{mem, "run/", "memory://missing"};
  FakeStep(root, "1", 1);
  Status s = DeleteStep(root.Child("2"));
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("run/2"), std::string::npos) << s.ToString();
  EXPECT_TRUE(DeleteStep(root.Child("1")).ok());  // control
  EXPECT_EQ(mem->num_keys(), 0u);
}

ManagerOptions Options(std::optional<int64_t> max_to_keep, std::optional<int64_t> keep_period, bool async) {
  ManagerOptions o;
  o.retention = {max_to_keep, keep_period};
  o.enable_async = async;
  return o;
}

TEST(CheckpointManager, SavesRetainsAndResumes) {
  const std::string dir = TempDir("retain");
  auto coordinator = NewSingleProcessCoordinator();
  {
    auto m = CheckpointManager::Open(Loc(dir), Options(3, 4, /*async=*/true), *coordinator);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    for (int64_t step = 0; step <= 10; ++step) {
      auto values = Values(step);
      auto saved = (*m)->Save(step, Tree(values));
      ASSERT_TRUE(saved.ok()) << saved.status().ToString();
      EXPECT_TRUE(*saved);
    }
    ASSERT_TRUE((*m)->WaitUntilFinished().ok());
    EXPECT_EQ((*m)->AllSteps(), (std::vector<int64_t>{0, 4, 8, 9, 10}));
    EXPECT_EQ((*m)->LatestStep(), 10);
    // What the directory holds is what the manager lists.
    EXPECT_EQ(Listed(Loc(dir)), (std::vector<int64_t>{0, 4, 8, 9, 10}));
    ExpectListedStepsWhole(dir, "after retention");
    // Declined, forced and repeated saves.
    auto values = Values(10);
    auto declined = (*m)->Save(10, Tree(values));
    ASSERT_TRUE(declined.ok());
    EXPECT_FALSE(*declined);
    auto repeated = (*m)->Save(10, Tree(values), /*force=*/true);
    EXPECT_EQ(repeated.status().code(), StatusCode::kAlreadyExists) << repeated.status().ToString();
    ASSERT_TRUE((*m)->Close().ok());
    auto closed = (*m)->Save(11, Tree(values));
    EXPECT_EQ(closed.status().code(), StatusCode::kFailedPrecondition) << closed.status().ToString();
  }
  // A new manager resumes: same steps, numbering and retention go on.
  auto m = CheckpointManager::Open(Loc(dir), Options(3, 4, /*async=*/false), *coordinator);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->AllSteps(), (std::vector<int64_t>{0, 4, 8, 9, 10}));
  auto values = Values(11);
  ASSERT_TRUE((*m)->Save(11, Tree(values)).ok());
  EXPECT_EQ((*m)->AllSteps(), (std::vector<int64_t>{0, 4, 8, 9, 10, 11}));
  auto values12 = Values(12);
  ASSERT_TRUE((*m)->Save(12, Tree(values12)).ok());
  EXPECT_EQ((*m)->AllSteps(), (std::vector<int64_t>{0, 4, 8, 10, 11, 12}));
  EXPECT_EQ(Listed(Loc(dir)), (std::vector<int64_t>{0, 4, 8, 10, 11, 12}));
  Status missing = (*m)->Delete(9);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find("not a committed step"), std::string::npos) << missing.ToString();
  ASSERT_TRUE((*m)->Delete(4).ok());
  EXPECT_EQ(Listed(Loc(dir)), (std::vector<int64_t>{0, 8, 10, 11, 12}));
  ExpectListedStepsWhole(dir, "after delete");
}

TEST(CheckpointManager, RejectsBadOptions) {
  auto coordinator = NewSingleProcessCoordinator();
  const std::string dir = TempDir("options");
  ManagerOptions o;
  o.save_interval_steps = 0;
  auto m = CheckpointManager::Open(Loc(dir), o, *coordinator);
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("save_interval_steps"), std::string::npos) << m.status().ToString();
  o.save_interval_steps = 2;
  o.item_name = "a/b";
  m = CheckpointManager::Open(Loc(dir), o, *coordinator);
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  o.item_name = "state";
  m = CheckpointManager::Open(Loc(dir), o, *coordinator);  // control
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto values = Values(0);
  EXPECT_TRUE(*(*m)->Save(0, Tree(values)));
  EXPECT_EQ((*m)->AllSteps(), std::vector<int64_t>{0});  // being saved, listed as Orbax does
  EXPECT_FALSE(*(*m)->Save(1, Tree(values)));  // not a multiple of 2
  EXPECT_TRUE(*(*m)->Save(2, Tree(values)));
  ASSERT_TRUE((*m)->WaitUntilFinished().ok());
  EXPECT_TRUE(fs::exists(dir + "/2/state/_METADATA"));
}

// A fault (one failed write, or nothing reaching storage after write N) at
// every write of a save of step 2 with max_to_keep=1 (so the save ends with
// the deletion of step 1): afterwards a new manager lists only whole steps,
// the latest of which is 1 or 2, and saves step 3.
TEST(CheckpointManager, FaultAtEveryWriteOfSaveAndRetention) {
  auto coordinator = NewSingleProcessCoordinator();
  for (bool crash_like : {true, false}) {
    bool finished = false;
    for (uint64_t n = 0; n < 400 && !finished; ++n) {
      const std::string context = std::string(crash_like ? "nothing after" : "only") + " write " + std::to_string(n);
      SCOPED_TRACE(context);
      const std::string dir = TempDir("fault");
      orbax::Location base = Loc(dir);
      auto fault = std::make_shared<FaultKvStore>(base.store);
      orbax::Location root{fault, base.prefix, base.base};
      {
        auto m = CheckpointManager::Open(root, Options(1, std::nullopt, /*async=*/false), *coordinator);
        ASSERT_TRUE(m.ok()) << m.status().ToString();
        auto v1 = Values(1);
        ASSERT_TRUE((*m)->Save(1, Tree(v1)).ok());
        ASSERT_TRUE((*m)->WaitUntilFinished().ok());
        fault->Reset();
        if (crash_like) fault->FailWritesFrom(n, UnavailableError("injected crash"));
        else fault->FailNthWrite(n, UnavailableError("injected fault"));
        auto v2 = Values(2);
        auto saved = (*m)->Save(2, Tree(v2));
        finished = fault->writes_failed() == 0;
        EXPECT_EQ(saved.ok(), finished) << saved.status().ToString();
        fault->Reset();
      }
      const std::vector<int64_t> listed = Listed(base);
      ASSERT_FALSE(listed.empty());
      EXPECT_TRUE(listed.back() == 1 || listed.back() == 2);
      if (finished) EXPECT_EQ(listed, std::vector<int64_t>{2});
      ExpectListedStepsWhole(dir, context);
      // Resume and save the next step.
      auto m = CheckpointManager::Open(base, Options(1, std::nullopt, false), *coordinator);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ((*m)->AllSteps(), listed);
      auto v3 = Values(3);
      auto saved = (*m)->Save(3, Tree(v3));
      ASSERT_TRUE(saved.ok()) << saved.status().ToString();
      EXPECT_TRUE(*saved);
      EXPECT_EQ(Listed(base), std::vector<int64_t>{3});
      ExpectListedStepsWhole(dir, context + ", resumed");
      fs::remove_all(dir);
    }
    EXPECT_TRUE(finished);
  }
}

}  // namespace
}  // namespace cairn::engine
