// The Pathways colocated save (colocated.h): hosts write shards only, each
// alone, the controller writes its own leaves as "pwcontroller" and
// finalizes; the item reads back whole, each key in one database.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cairn/coordinator.h"
#include "cairn/engine/colocated.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"
#include "cairn/engine/testing/save_helpers.h"
#include "cairn/layout/orbax/item_store.h"

namespace cairn::engine {
namespace {
namespace fs = std::filesystem;
using namespace testing;  // NOLINT: the save helpers

// The tree: a jax.Array sharded over two hosts, one replicated on both, and
// a numpy array the controller holds. Shards only for host `h` (-1: none).
std::vector<SaveLeaf> Tree(const std::vector<float>& w, const std::vector<float>& r,
                           const std::vector<float>& n, int host) {
  SaveLeaf lw = ArrayLeaf("w", {12, 4}, {6, 4});
  SaveLeaf lr = ArrayLeaf("r", {4, 4});
  lr.num_replicas = 2;
  SaveLeaf ln = ArrayLeaf("n", {5});
  ln.value_type = std::string(orbax::kNumpyArray);
  if (host >= 0) {
    lw.shards = {Shard(w, {12, 4}, Box({6 * host, 0}, {6, 4}))};
    lr.shards = {Shard(r, {4, 4}, Box({0, 0}, {4, 4}), host)};
  }
  return {lw, lr, ln};
}

std::vector<float> Read(const std::string& dir, const std::string& param, const Shape& shape) {
  Index n = 1;
  for (Index d : shape) n *= d;
  std::vector<float> back(static_cast<size_t>(n), -1.0f);
  RestoreRequest rr;
  rr.directory = dir;
  ArrayToRestore a;
  a.param = param;
  a.boxes.push_back({Box(Shape(shape.size(), 0), shape), back.data(), {}});
  rr.arrays.push_back(std::move(a));
  Status s = Restore(rr);
  EXPECT_TRUE(s.ok()) << param << ": " << s.ToString();
  return back;
}

TEST(ColocatedSave, HostsWriteShardsOnlyAndTheControllerFinalizes) {
  const std::string dir = TempDir("colocated") + "/items";
  fs::create_directories(dir);
  std::vector<float> w = Iota(48), r = Iota(16, 100), n = Iota(5, 200);
  for (int host : {0, 1}) {
    SaveRequest req;
    req.directory = dir;
    req.caller_commits = true;
    req.options.shards_only = true;
    req.options.process_name = std::to_string(host);
    std::vector<SaveLeaf> tree = Tree(w, r, n, host);
    req.leaves = {tree[0], tree[1]};  // a host saves the jax.Arrays
    auto alone = NewSingleProcessCoordinator();
    Status s = Save(req, *alone);
    ASSERT_TRUE(s.ok()) << "host " << host << ": " << s.ToString();
  }
  EXPECT_FALSE(fs::exists(dir + "/_METADATA")) << "hosts stop before the metadata";
  EXPECT_FALSE(fs::exists(dir + "/manifest.ocdbt"));
  SaveRequest controller;
  controller.directory = dir;
  controller.caller_commits = true;
  controller.options.shards_only = true;
  controller.options.process_name = "pwcontroller";
  SaveLeaf numpy = Tree(w, r, n, -1)[2];
  numpy.shards = {Shard(n, {5}, Box({0}, {5}))};
  controller.leaves = {numpy};
  auto alone = NewSingleProcessCoordinator();
  ASSERT_TRUE(Save(controller, *alone).ok());
  EXPECT_FALSE(fs::exists(dir + "/array_metadatas/process_pwcontroller"))
      << "Orbax reads every array metadata file as a host's";

  SaveRequest whole;
  whole.directory = dir;
  whole.caller_commits = true;
  whole.leaves = Tree(w, r, n, -1);
  // A host that wrote nothing is an error naming its file.
  Status missing = FinalizeColocatedSave(whole, {"0", "2", "pwcontroller"});
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("process_2"), std::string_view::npos) << missing.ToString();
  Status s = FinalizeColocatedSave(whole, {"0", "1", "pwcontroller"});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fs::exists(dir + "/_METADATA"));
  EXPECT_TRUE(fs::exists(dir + "/manifest.ocdbt"));
  EXPECT_FALSE(fs::exists(dir + "/commit_success.txt"));

  EXPECT_EQ(Read(dir, "params.w", {12, 4}), w);
  EXPECT_EQ(Read(dir, "params.r", {4, 4}), r);
  EXPECT_EQ(Read(dir, "params.n", {5}), n);
  // Each key lies in one database: host 0 holds the jax.Arrays' metadata,
  // host 1 only chunks, the controller its numpy array.
  auto loc = orbax::OpenLocation(dir);
  ASSERT_TRUE(loc.ok());
  auto has = [&](const std::string& process, const std::string& key) {
    auto store = orbax::OpenItemWriteStore(*loc, true, process);
    EXPECT_TRUE(store.ok());
    auto v = (*store)->Get(key);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() && v->has_value();
  };
  EXPECT_TRUE(has("0", "params.w/zarr.json"));
  EXPECT_FALSE(has("1", "params.w/zarr.json"));
  EXPECT_TRUE(has("1", "params.w/c/1/0"));
  EXPECT_FALSE(has("0", "params.w/c/1/0"));
  EXPECT_TRUE(has("pwcontroller", "params.n/zarr.json"));
  EXPECT_FALSE(has("0", "params.n/zarr.json"));

  // A shards-only save needs an item its caller commits.
  SaveRequest own = controller;
  own.directory = dir + "2";
  own.caller_commits = false;
  EXPECT_EQ(Save(own, *alone).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::engine
